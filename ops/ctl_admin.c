/* lockstepctl's risk commands: `risk`, `kill-switch` and `reference` on the
 * command line into the Admin that the primary sequencer puts on the tape
 * (sequencer/admin.c; matcher/engine.h says what the matchers do with it). */
#include <stdio.h>
#include <string.h>

#include "ctl_admin.h"
#include "ouch.h"
#include "risk.h"

void ctl_admin_usage(FILE *out)
{
	fputs("  risk firm|user NAME LIMIT...\n"
	      "                    the primary sequencer puts pre-trade limits of a firm or\n"
	      "                    user (NAME \"*\": each without limits of its own) on the\n"
	      "                    tape; every matcher applies them there. LIMIT is\n"
	      "                    max_qty=SHARES, max_notional=DOLLARS, collar=PCT% (or\n"
	      "                    BPbp), max_open=ORDERS or credit=DOLLARS; VALUE none\n"
	      "                    removes that limit\n"
	      "  kill-switch firm|user NAME [--cancel | --lift]\n"
	      "                    through the tape: new orders of NAME are rejected ('a');\n"
	      "                    --cancel also cancels its open orders ('S'); --lift ends it\n"
	      "  reference SYMBOL PRICE\n"
	      "                    through the tape: the symbol's reference price for the\n"
	      "                    collar (dollars, up to 4 decimals)\n",
	      out);
}

int ctl_admin_is(const char *cmd)
{
	return !strcmp(cmd, "risk") || !strcmp(cmd, "kill-switch") || !strcmp(cmd, "reference");
}

/* A login or firm as the credentials file has it: upper case (SoupBinTCP
 * compares them without case); the primary refuses anything but letters
 * and digits. */
static char *upper(char *name)
{
	for (char *p = name; *p; p++)
		if (*p >= 'a' && *p <= 'z')
			*p = (char)(*p - 'a' + 'A');
	return name;
}

static int scope_of(const char *w, Lockstep__Admin__Scope *out)
{
	if (!strcmp(w, "firm"))
		*out = LOCKSTEP__ADMIN__SCOPE__FIRM;
	else if (!strcmp(w, "user"))
		*out = LOCKSTEP__ADMIN__SCOPE__USER;
	else
		return -1;
	return 0;
}

int ctl_admin_parse(int nargs, char **args, int flags, struct ctl_admin *out)
{
	Lockstep__Admin *a = &out->admin;
	char err[160];
	const char *cmd = args[0];

	lockstep__admin__init(a);
	lockstep__risk_limits__init(&out->limits);
	if (!strcmp(cmd, "reference")) {
		if (nargs != 3 || flags || risk_price_parse(args[2], &a->price) < 0 || !a->price ||
		    a->price > OUCH_PRICE_MAX) {
			fprintf(stderr, "lockstepctl: reference SYMBOL PRICE (dollars, above 0 and "
					"at most 199999.99)\n");
			return -1;
		}
		a->kind = LOCKSTEP__ADMIN__KIND__REFERENCE;
		a->scope = LOCKSTEP__ADMIN__SCOPE__SYMBOL;
		a->name = args[1];
		return 0;
	}
	if (nargs < 3 || scope_of(args[1], &a->scope) < 0) {
		fprintf(stderr, "lockstepctl: %s firm|user NAME ... (see --help)\n", cmd);
		return -1;
	}
	a->name = upper(args[2]);
	if (!strcmp(cmd, "kill-switch")) {
		if (nargs != 3 || flags == (CTL_ADMIN_CANCEL | CTL_ADMIN_LIFT)) {
			fprintf(stderr, "lockstepctl: kill-switch firm|user NAME [--cancel | --lift]\n");
			return -1;
		}
		a->kind = flags & CTL_ADMIN_LIFT ? LOCKSTEP__ADMIN__KIND__LIFT
						 : LOCKSTEP__ADMIN__KIND__KILL;
		a->cancel = !!(flags & CTL_ADMIN_CANCEL);
		return 0;
	}
	if (flags || nargs < 4) {
		fprintf(stderr, "lockstepctl: risk firm|user NAME LIMIT... (see --help)\n");
		return -1;
	}
	out->text[0] = '\0';
	for (int i = 3; i < nargs; i++) {
		size_t used = strlen(out->text);

		if (used + strlen(args[i]) + 2 > sizeof(out->text)) {
			fprintf(stderr, "lockstepctl: risk: too many limits\n");
			return -1;
		}
		snprintf(out->text + used, sizeof(out->text) - used, "%s%s", used ? " " : "",
			 args[i]);
	}
	{
		struct risk_limits l;

		if (risk_limits_parse(out->text, &l, err, sizeof(err)) < 0) {
			fprintf(stderr, "lockstepctl: risk: %s\n", err);
			return -1;
		}
		risk_limits_to_pb(&l, &out->limits);
	}
	a->kind = LOCKSTEP__ADMIN__KIND__LIMITS;
	a->limits = &out->limits;
	return 0;
}
