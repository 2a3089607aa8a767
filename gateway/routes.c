/* Partition routing: symbol -> partition, the partitions' checks, and
 * the tables' life cycle (routes.h; the token table is route_tokens.c). */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "gateway.h"
#include "net.h"
#include "routes.h"
#include "routes_private.h"

#define SYMBOL_LEN 8 /* OUCH stock */

/* len bytes without the trailing blanks and NULs (OUCH pads with spaces). */
static size_t trimmed(const char *p, size_t len, size_t max)
{
	len = strnlen(p, len < max ? len : max);
	while (len > 0 && p[len - 1] == ' ')
		len--;
	return len;
}

uint32_t gw_route_symbol_hash(const char *stock, size_t len)
{
	uint32_t h = 2166136261u;

	len = trimmed(stock, len, SYMBOL_LEN);
	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)stock[i]) * 16777619u;
	return h;
}

static uint64_t sym_pack(const char *stock, size_t len)
{
	uint64_t v = 0;

	memcpy(&v, stock, trimmed(stock, len, SYMBOL_LEN));
	return v;
}

static size_t sym_slot(const struct gw_routes *r, uint64_t key)
{
	size_t h = (size_t)(XXH3_64bits(&key, sizeof(key)) & r->sym_mask);

	while (r->sym_key[h] && r->sym_key[h] != key)
		h = (h + 1) & r->sym_mask;
	return h;
}

int gw_route_symbol(const struct gw_routes *r, const char *stock, size_t len)
{
	uint64_t key;
	size_t h;

	if (!r->listed)
		return (int)(gw_route_symbol_hash(stock, len) % r->n_parts);
	key = sym_pack(stock, len);
	if (key == 0)
		return -ENOENT;
	h = sym_slot(r, key);
	return r->sym_key[h] ? r->sym_part[h] : -ENOENT;
}

unsigned gw_routes_parts(const struct gw_routes *r)
{
	return r->n_parts;
}

int gw_routes_listed(const struct gw_routes *r)
{
	return r->listed;
}

void gw_routes_close(struct gw_routes *r)
{
	if (!r)
		return;
	free(r->sym_key);
	free(r->sym_part);
	gw_tokens_free(r);
	free(r);
}

/* The section that holds partition p's keys, for error messages. */
static const char *part_section(unsigned p, char *buf, size_t cap)
{
	if (p == 0)
		return "gateway";
	snprintf(buf, cap, "partition%u", p);
	return buf;
}

/* Counts the symbols of every listed partition and checks each name:
 * 1..8 printable characters, as the matcher's [matcher] symbols. */
static int symbols_count(const struct gw_config *cfg, size_t *n, char *err, size_t errlen)
{
	char sec[24];

	*n = 0;
	for (unsigned p = 0; p < cfg->partitions; p++) {
		const char *s = cfg->part[p].symbols;

		while (*s) {
			size_t w = strcspn(s, " \t,"), i = 0;

			if (w == 0) {
				s++;
				continue;
			}
			while (i < w && (unsigned char)s[i] > 0x20 && (unsigned char)s[i] < 0x7f)
				i++;
			if (w > SYMBOL_LEN || i < w) {
				snprintf(err, errlen,
					 "[%s] symbols: \"%.*s\": want 1 to %d printable chars",
					 part_section(p, sec, sizeof(sec)), (int)w, s, SYMBOL_LEN);
				return -EINVAL;
			}
			(*n)++;
			s += w;
		}
	}
	return 0;
}

static int symbols_build(struct gw_routes *r, const struct gw_config *cfg, size_t n, char *err,
			 size_t errlen)
{
	size_t size = 16;
	char sec[24];

	while (size < n * 2)
		size *= 2;
	r->sym_key = calloc(size, sizeof(*r->sym_key));
	r->sym_part = calloc(size, sizeof(*r->sym_part));
	if (!r->sym_key || !r->sym_part) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->sym_mask = size - 1;
	for (unsigned p = 0; p < cfg->partitions; p++) {
		const char *s = cfg->part[p].symbols;

		while (*s) {
			size_t w = strcspn(s, " \t,"), h;
			uint64_t key;

			if (w == 0) {
				s++;
				continue;
			}
			key = sym_pack(s, w);
			h = sym_slot(r, key);
			if (r->sym_key[h]) {
				snprintf(err, errlen, "[%s] symbols: %.*s is partition %u's too",
					 part_section(p, sec, sizeof(sec)), (int)w, s,
					 r->sym_part[h]);
				return -EINVAL;
			}
			r->sym_key[h] = key;
			r->sym_part[h] = (uint8_t)p;
			s += w;
		}
	}
	return 0;
}

/* A partition at or above cfg->partitions must not be configured: a
 * forgotten `partitions` would otherwise leave it silently unused. */
static int part_unused(const struct gw_config *cfg, unsigned p)
{
	char def[16];

	snprintf(def, sizeof(def), "EXEC%u", p);
	return !cfg->part[p].symbols[0] && !cfg->part[p].exec_group[0] &&
	       !cfg->part[p].exec_retrans[0] && strcmp(cfg->part[p].exec_session, def) == 0;
}

static int parts_check(const struct gw_config *cfg, char *err, size_t errlen)
{
	struct sockaddr_in group[GW_MAX_PARTITIONS];
	unsigned listed = 0;
	char sec[24];

	if (cfg->partitions < 1 || cfg->partitions > GW_MAX_PARTITIONS) {
		snprintf(err, errlen, "[gateway] partitions: 1 to %d", GW_MAX_PARTITIONS);
		return -EINVAL;
	}
	for (unsigned p = (unsigned)cfg->partitions; p < GW_MAX_PARTITIONS; p++) {
		if (p > 0 && !part_unused(cfg, p)) {
			snprintf(err, errlen,
				 "[partition%u]: configured, but [gateway] partitions = %u", p,
				 (unsigned)cfg->partitions);
			return -EINVAL;
		}
	}
	for (unsigned p = 0; p < cfg->partitions; p++) {
		const struct gw_part_config *c = &cfg->part[p];
		const char *sn = part_section(p, sec, sizeof(sec));

		if (!c->exec_group[0] || net_parse_addr(c->exec_group, &group[p]) < 0) {
			snprintf(err, errlen, "[%s] exec_group: \"%s\": want the partition's "
				 "execution stream group, host:port", sn, c->exec_group);
			return -EINVAL;
		}
		if (!c->exec_retrans[0]) {
			snprintf(err, errlen, "[%s] exec_retrans: required (the partition's "
				 "replicas' retransmission addresses)", sn);
			return -EINVAL;
		}
		for (unsigned q = 0; q < p; q++) {
			if (net_addr_same(&group[q], &group[p])) {
				snprintf(err, errlen,
					 "[%s] exec_group: %s is partition %u's as well", sn,
					 c->exec_group, q);
				return -EINVAL;
			}
		}
		listed += c->symbols[strspn(c->symbols, " \t,")] != '\0';
	}
	if (listed && listed != cfg->partitions) {
		for (unsigned p = 0; p < cfg->partitions; p++) {
			if (cfg->part[p].symbols[strspn(cfg->part[p].symbols, " \t,")])
				continue;
			snprintf(err, errlen, "[%s] symbols: missing: list the symbols of every "
				 "partition, or of none (then they are spread by hash)",
				 part_section(p, sec, sizeof(sec)));
			return -EINVAL;
		}
	}
	return 0;
}

int gw_routes_open(struct gw_routes **out, const struct gw_config *cfg, char *err,
		   size_t errlen)
{
	struct gw_routes *r;
	size_t n_sym;
	int rc = parts_check(cfg, err, errlen);

	if (rc < 0)
		return rc;
	rc = symbols_count(cfg, &n_sym, err, errlen);
	if (rc < 0)
		return rc;
	r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->n_parts = (unsigned)cfg->partitions;
	r->listed = n_sym > 0;
	if (r->listed && (rc = symbols_build(r, cfg, n_sym, err, errlen)) < 0)
		goto out_free;
	if (r->n_parts > 1) {
		rc = gw_tokens_alloc(r, cfg->max_tokens);
		if (rc < 0) {
			snprintf(err, errlen, "[gateway] max_tokens: %llu: out of memory",
				 (unsigned long long)cfg->max_tokens);
			goto out_free;
		}
	}
	*out = r;
	return 0;

out_free:
	gw_routes_close(r);
	return rc;
}
