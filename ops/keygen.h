/* lockstepctl keygen: makes and rotates cluster key files (ops/keygen.c). */
#ifndef LOCKSTEP_KEYGEN_H
#define LOCKSTEP_KEYGEN_H

#include <stdio.h>

/* The keygen lines of lockstepctl --help. */
void keygen_usage(FILE *out);

/* `lockstepctl keygen ...` with argv[0] = "keygen": the exit status (0
 * done, 1 refused or failed, said why on stderr, 2 usage). */
int keygen_main(int argc, char **argv);

#endif
