/* lockstepctl's risk commands (ctl_admin.c): risk, kill-switch, reference. */
#ifndef LOCKSTEP_CTL_ADMIN_H
#define LOCKSTEP_CTL_ADMIN_H

#include <stdio.h>

#include "lockstep.pb-c.h"

/* kill-switch's options. */
enum { CTL_ADMIN_CANCEL = 1, CTL_ADMIN_LIFT = 2 };

/* The Admin a command line makes; it points into itself and into args. */
struct ctl_admin {
	Lockstep__Admin admin;
	Lockstep__RiskLimits limits;
	char text[512];
};

void ctl_admin_usage(FILE *out); /* the commands' lines of --help */
int ctl_admin_is(const char *cmd); /* 1 for risk, kill-switch and reference */
/* args[0] is the command, nargs counts it; flags are CTL_ADMIN_*. 0, or -1
 * after saying on stderr what is wrong. */
int ctl_admin_parse(int nargs, char **args, int flags, struct ctl_admin *out);

#endif
