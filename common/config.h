/* Configuration: INI files read with libinih, typed against a table that
 * each program declares, with command-line overrides (`--set section.key=value`).
 * Every error names the file, the line and the key:
 *     gateway.conf:12: [gateway] batch_size: "abc" is not a number
 * Nothing here logs; errors are written to the caller's buffer. */
#ifndef LOCKSTEP_CONFIG_H
#define LOCKSTEP_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum config_type {
	CONFIG_STRING, /* char[size], NUL-terminated; too long is an error */
	CONFIG_INT, /* int64_t within [min, max] */
	CONFIG_UINT, /* uint64_t within [min, max] */
	CONFIG_BOOL, /* int: yes/no, true/false, on/off, 1/0 */
	CONFIG_DOUBLE, /* double within [min, max] */
	CONFIG_ENUM, /* int: index into a NULL-terminated names list */
	CONFIG_DURATION, /* uint64_t nanoseconds: "250ms", "1s", "500us", "100ns", "2m" */
	CONFIG_SIZE, /* uint64_t bytes: "8M", "64KiB", "1G", "4096" */
};

/* One key. offset is into the caller's config struct. */
struct config_key {
	const char *section, *name;
	enum config_type type;
	size_t offset;
	size_t size; /* CONFIG_STRING: buffer size */
	const char *def; /* default, as it would be written in the file; NULL: required */
	double min, max; /* for numbers; both 0: unbounded */
	const char *const *names; /* CONFIG_ENUM */
	const char *help;
};

#define CONFIG_END { NULL, NULL, 0, 0, 0, NULL, 0, 0, NULL, NULL }

/* Sections whose keys are not in the table, collected as they come (logins,
 * symbols): the callback gets each (section, name, value, line) and returns
 * 0 or writes an error. */
typedef int (*config_section_fn)(void *ctx, const char *section, const char *name,
				 const char *value, char *err, size_t errlen);

struct config_spec {
	const struct config_key *keys;
	const char *const *free_sections; /* NULL-terminated, may be NULL */
	config_section_fn on_free; /* called for keys of those sections */
	void *ctx;
};

/* Applies the defaults, then `path` (NULL: none), then each override
 * "section.key=value". Returns 0, or -EINVAL/-ENOENT with err holding the one
 * line that says file:line: [section] key: what is wrong (overrides report
 * "command line" as the file). Unknown keys and sections are errors.
 * (A file that cannot be read gives open()'s or read()'s -errno: -ENOENT when
 * it is missing, -EACCES, -EISDIR. On any error *cfg is left as it was,
 * though on_free may have been called for entries before the error. A key
 * set twice in the file is an error; an override may repeat a key, the last
 * wins. Durations need a unit: ns, us, ms, s, m (minutes), h. Sizes: bytes,
 * or K/KiB, M/MiB, G/GiB, T/TiB (all binary); "8MB" is refused. Lines are at
 * most libinih's INI_MAX_LINE - 3 (197) characters.) */
int config_load(const struct config_spec *spec, void *cfg, const char *path,
		const char *const *overrides, size_t n_overrides, char *err, size_t errlen);

/* config_load() with the file's text already in memory (a reload that
 * read the file elsewhere, tests, the fuzzer): text need not be
 * NUL-terminated; name is what error messages call it; text NULL: no file. */
int config_load_buffer(const struct config_spec *spec, void *cfg, const char *name,
		       const char *text, size_t len, const char *const *overrides,
		       size_t n_overrides, char *err, size_t errlen);

/* Prints every key with its default and help (for --help and man pages). */
void config_print_keys(const struct config_spec *spec, FILE *out);

#endif
