/* lockstepctl passwd: hashes a SoupBinTCP password for the gateway's
 * credentials file (ops/passwd.c). */
#ifndef LOCKSTEP_PASSWD_H
#define LOCKSTEP_PASSWD_H

#include <stdio.h>

/* The passwd lines of lockstepctl --help. */
void passwd_usage(FILE *out);

/* `lockstepctl passwd [LOGIN FIRM [cancel_on_disconnect]]` with argv[0] =
 * "passwd": the exit status (0 printed, 1 failed, said why on stderr, 2
 * usage). */
int passwd_main(int argc, char **argv);

#endif
