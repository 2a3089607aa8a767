/* The configuration's key table as text, for --help and man pages. */
#include <stdio.h>

#include "config_private.h"

static const char *const cfg_type_names[] = {
	[CONFIG_STRING] = "string", [CONFIG_INT] = "int",
	[CONFIG_UINT] = "uint",	    [CONFIG_BOOL] = "bool",
	[CONFIG_DOUBLE] = "double", [CONFIG_ENUM] = "enum",
	[CONFIG_DURATION] = "duration", [CONFIG_SIZE] = "size",
};

/* "uint in [1, 1000]", "enum: none|interval|batch", "string (at most 31)" */
static void cfg_describe(const struct config_key *k, char *buf, size_t len)
{
	char lo[48], hi[48];
	size_t n;

	n = (size_t)snprintf(buf, len, "%s", cfg_type_names[k->type]);
	if (k->type == CONFIG_STRING) {
		snprintf(buf + n, len - n, " (at most %zu characters)", k->size ? k->size - 1 : 0);
	} else if (k->type == CONFIG_ENUM) {
		for (int i = 0; k->names && k->names[i] && n < len; i++)
			n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "|" : ": ",
					      k->names[i]);
	} else if (k->type != CONFIG_BOOL && cfg_bounded(k)) {
		config_value_bound(k, k->min, lo, sizeof(lo));
		config_value_bound(k, k->max, hi, sizeof(hi));
		snprintf(buf + n, len - n, " in [%s, %s]", lo, hi);
	}
}

void config_print_keys(const struct config_spec *spec, FILE *out)
{
	char type[256];

	for (size_t i = 0; spec->keys && spec->keys[i].name; i++) {
		const struct config_key *k = &spec->keys[i];

		if ((unsigned)k->type > CONFIG_SIZE)
			continue;
		cfg_describe(k, type, sizeof(type));
		fprintf(out, "%s.%s = %s  # %s%s%s\n", k->section, k->name,
			!k->def ? "(required)" : *k->def ? k->def : "\"\"", type,
			k->help ? ": " : "", k->help ? k->help : "");
	}
	for (size_t i = 0; spec->free_sections && spec->free_sections[i]; i++)
		fprintf(out, "[%s]  # free section: any key = value\n", spec->free_sections[i]);
}

