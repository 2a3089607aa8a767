/* Logging to stderr with sd-daemon priority prefixes ("<3>" error ... "<7>"
 * debug), which journald turns into priorities. One line per call; the line
 * is written with a single write() so that lines of several threads or
 * processes sharing a file do not interleave. */
#ifndef LOCKSTEP_LOG_H
#define LOCKSTEP_LOG_H

#include <stdint.h>

enum log_level {
	LOG_LVL_ERR = 3,
	LOG_LVL_WARNING = 4,
	LOG_LVL_NOTICE = 5,
	LOG_LVL_INFO = 6,
	LOG_LVL_DEBUG = 7,
};

void log_init(const char *ident, int level); /* ident: "sequencer-1" */
void log_set_level(int level);
int log_get_level(void);
/* "err", "warning", "notice", "info", "debug" (or 3..7); -1 if unknown. */
int log_level_parse(const char *name);
/* Prefix timestamps (for logs that are files, not journald). */
void log_set_timestamps(int on);

void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...) log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARNING, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_LVL_NOTICE, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) \
	do { \
		if (log_get_level() >= LOG_LVL_DEBUG) \
			log_msg(LOG_LVL_DEBUG, __VA_ARGS__); \
	} while (0)

/* A rate limit for per-packet warnings: at most `burst` lines per `interval`
 * seconds; the first line after a quiet spell says how many were suppressed. */
struct log_ratelimit {
	uint64_t interval_ns;
	unsigned burst;
	uint64_t window_start;
	unsigned printed;
	uint64_t suppressed;
};

#define LOG_RATELIMIT_INIT(seconds, burst) { (uint64_t)((seconds) * 1e9), (burst), 0, 0, 0 }

/* 1 when a line may be printed now (and then prints any suppressed count). */
int log_ratelimit_ok(struct log_ratelimit *rl, int level);

#define log_ratelimited(rl, level, ...) \
	do { \
		if (log_ratelimit_ok((rl), (level))) \
			log_msg((level), __VA_ARGS__); \
	} while (0)

#endif
