/* The matcher's risk plumbing around the engine's pre-trade checks
 * (engine.h, "Pre-trade risk"): the risk file that [matcher] risk_file
 * names, the tape's Admin into an engine command, and each Admin described
 * for the log and for lockstep-replay dump.
 *
 * The risk file holds one entry a line, in lockstepctl's words:
 *     firm NAME LIMIT...     limits of a firm (NAME "*": every firm without its own)
 *     user NAME LIMIT...     limits of a user (a SoupBinTCP login; "*" likewise)
 *     reference SYMBOL PRICE a symbol's reference price (dollars) for the collar
 * LIMIT as common/risk.h reads it; a login or firm in upper case (as the
 * credentials file has it: lower case is raised), letters and digits; a
 * PRICE at most OUCH's largest; blank lines and lines starting with #
 * are skipped; a (scope, name) at most once. Read at start (and by
 * --check-config): every replica of a partition must hold the same file,
 * since it is part of the state hash. Limits change at run time through the
 * tape (lockstepctl risk), never by editing the file under a running
 * replica. */
#ifndef LOCKSTEP_RISK_ADMIN_H
#define LOCKSTEP_RISK_ADMIN_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

#define RISK_FILE_MAX 65536 /* entries */

/* Reads the risk file at path ("" or NULL: no entries, *out NULL) into a
 * malloc'ed array of engine admin commands (LIMITS and REFERENCE). 0, or a
 * negative errno with err saying "path:line: what is wrong". */
int risk_file_load(const char *path, struct engine_admin_cmd **out, size_t *n, char *err,
		   size_t errlen);

/* The same with the file's text in memory (name for the errors; a NUL
 * byte in it is an error), for tests and the fuzzer. */
int risk_text_load(const char *name, const char *text, size_t len, struct engine_admin_cmd **out,
		   size_t *n, char *err, size_t errlen);

/* An Admin body of the tape (a packed lockstep.proto Admin) into an
 * ENGINE_ADMIN command; 0, or -1 when it does not unpack or does not fit
 * (a name too long). Unpacked with protobuf-c: an operator's command is
 * rare. */
int risk_admin_decode(const uint8_t *buf, size_t len, struct engine_cmd *out);

/* "firm FRM1: max_qty=100 credit=5000", "user TRADR1: kill switch, open
 * orders canceled", ...; snprintf's return. */
int risk_admin_describe(const struct engine_admin_cmd *a, char *buf, size_t len);

#endif
