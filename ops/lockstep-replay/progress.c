/* lockstep-replay: the progress line on stderr (a terminal only) that long
 * runs show. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "replay.h"

void progress_start(struct progress *p, const char *what, uint64_t lo, uint64_t hi)
{
	memset(p, 0, sizeof(*p));
	p->on = isatty(STDERR_FILENO);
	p->what = what;
	p->lo = lo;
	p->hi = hi;
	p->start_ns = mono_ns();
	p->next_ns = p->start_ns + 500000000u;
}

void progress_show(struct progress *p, uint64_t seq)
{
	uint64_t now = mono_ns();
	double pct = p->hi > p->lo ? 100.0 * (double)(seq - p->lo) / (double)(p->hi - p->lo) : 100.0;

	if (now < p->next_ns)
		return;
	p->next_ns = now + 250000000u;
	fprintf(stderr, "\r%s: seq %llu of %llu (%.0f%%), %.2fM events/s ", p->what,
		(unsigned long long)seq, (unsigned long long)p->hi, pct,
		(double)p->n * 1e3 / (double)(now - p->start_ns));
	p->shown = 1;
}
void progress_end(struct progress *p)
{
	if (p->shown)
		fputs("\r\033[K", stderr);
	p->shown = 0;
}
