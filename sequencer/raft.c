/* placeholder: being written */
#include "raft.h"
