/* Logging to stderr with sd-daemon priority prefixes (log.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"

static char log_ident[64] = "lockstep";
static int log_level = LOG_LVL_INFO;
static int log_timestamps;

void log_init(const char *ident, int level)
{
	snprintf(log_ident, sizeof(log_ident), "%s", ident ? ident : "lockstep");
	log_set_level(level);
}

void log_set_level(int level)
{
	if (level < LOG_LVL_ERR)
		level = LOG_LVL_ERR;
	if (level > LOG_LVL_DEBUG)
		level = LOG_LVL_DEBUG;
	log_level = level;
}

int log_get_level(void)
{
	return log_level;
}

void log_set_timestamps(int on)
{
	log_timestamps = on;
}

int log_level_parse(const char *name)
{
	static const char *const names[] = { "err", "warning", "notice", "info", "debug" };

	if (!name)
		return -1;
	if (name[0] >= '3' && name[0] <= '7' && name[1] == '\0')
		return name[0] - '0';
	for (int i = 0; i < 5; i++)
		if (strcasecmp(name, names[i]) == 0)
			return LOG_LVL_ERR + i;
	if (strcasecmp(name, "error") == 0)
		return LOG_LVL_ERR;
	if (strcasecmp(name, "warn") == 0)
		return LOG_LVL_WARNING;
	return -1;
}

void log_msg(int level, const char *fmt, ...)
{
	char line[1024];
	size_t n = 0;
	va_list ap;
	int saved = errno;

	if (level > log_level)
		return;
	n += (size_t)snprintf(line, sizeof(line), "<%d>", level);
	if (log_timestamps) {
		uint64_t now = wall_ns();
		time_t secs = (time_t)(now / 1000000000ull);
		struct tm tm;

		gmtime_r(&secs, &tm);
		n += strftime(line + n, sizeof(line) - n, "%H:%M:%S", &tm);
		n += (size_t)snprintf(line + n, sizeof(line) - n, ".%06llu ",
				      (unsigned long long)(now % 1000000000ull / 1000));
	}
	n += (size_t)snprintf(line + n, sizeof(line) - n, "%s: ", log_ident);
	if (n < sizeof(line)) {
		va_start(ap, fmt);
		int k = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
		va_end(ap);
		if (k > 0)
			n += (size_t)k;
	}
	if (n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	/* One write per line, so that concurrent writers do not interleave. */
	ssize_t w = write(STDERR_FILENO, line, n);
	(void)w;
	errno = saved;
}

int log_ratelimit_ok(struct log_ratelimit *rl, int level)
{
	uint64_t now = mono_ns();

	if (level > log_level)
		return 0;
	if (rl->window_start == 0 || now - rl->window_start >= rl->interval_ns) {
		uint64_t missed = rl->suppressed;

		rl->window_start = now;
		rl->printed = 0;
		rl->suppressed = 0;
		if (missed)
			log_msg(level, "(%llu similar messages suppressed)", (unsigned long long)missed);
	}
	if (rl->printed < rl->burst) {
		rl->printed++;
		return 1;
	}
	rl->suppressed++;
	return 0;
}
