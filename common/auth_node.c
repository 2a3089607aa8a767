/* The process's cluster key and the per-surface checks (auth_node.h). */
#include "auth_node.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "addrlist.h"
#include "log.h"
#include "net.h"

const char *const auth_mode_names[] = { "off", "on", NULL };

#define SOURCES 8 /* source addresses counted one by one */

struct source {
	struct sockaddr_in addr;
	uint64_t n;
	char name[48]; /* auth_dropped_from_a_b_c_d_port */
};

static struct {
	struct auth a;
	uint64_t dropped[AUTH_N_SURFACES];
	uint64_t rx_key[AUTH_MAX_KEYS]; /* by index in a */
	char rx_key_name[AUTH_MAX_KEYS][24];
	struct source src[SOURCES];
	uint64_t src_other; /* drops from sources that found no slot */
	struct log_ratelimit rl;
	char describe[160];
} g = { .rl = LOG_RATELIMIT_INIT(1, 4) };

static void describe(void)
{
	size_t len;

	if (!g.a.on) {
		snprintf(g.describe, sizeof(g.describe),
			 "OFF: any host that reaches a port can speak for a member (a lab only)");
		return;
	}
	len = (size_t)snprintf(g.describe, sizeof(g.describe),
			       "on (cluster %s, tagging with key %u, accepting", g.a.cluster,
			       g.a.id[g.a.send]);
	for (unsigned i = 0; i < g.a.n && len < sizeof(g.describe); i++)
		len += (size_t)snprintf(g.describe + len, sizeof(g.describe) - len, " %u",
					g.a.id[i]);
	if (len < sizeof(g.describe))
		snprintf(g.describe + len, sizeof(g.describe) - len, ")");
}

/* The old counts follow their key id into the new set. */
static void carry_key_counts(const struct auth *fresh)
{
	uint64_t old[AUTH_MAX_KEYS];

	memcpy(old, g.rx_key, sizeof(old));
	memset(g.rx_key, 0, sizeof(g.rx_key));
	for (unsigned i = 0; i < fresh->n; i++) {
		for (unsigned j = 0; j < g.a.n; j++)
			if (g.a.on && g.a.id[j] == fresh->id[i])
				g.rx_key[i] = old[j];
		snprintf(g.rx_key_name[i], sizeof(g.rx_key_name[i]), "auth_rx_key_%u",
			 fresh->id[i]);
	}
}

int auth_node_setup(int mode, const char *cluster, const char *key_file, char *err,
		    size_t errlen)
{
	struct auth fresh;
	struct auth_keys k;
	int r;

	if (mode == AUTH_MODE_OFF) {
		auth_init_off(&fresh);
		log_warn("AUTHENTICATION IS OFF ([node] auth = off): any host that reaches "
			    "this node's ports can sequence orders in any name, vote and "
			    "forge the tape; run it so in a lab only");
	} else {
		if ((r = auth_keyfile_load(key_file, &k, err, errlen)) < 0)
			return r;
		r = auth_init(&fresh, cluster, &k);
		memset(&k, 0, sizeof(k));
		if (r < 0) {
			snprintf(err, errlen, "[node] cluster: \"%s\" is not 1 to %d printable "
					      "characters without spaces", cluster,
				 AUTH_CLUSTER_MAX - 1);
			return r;
		}
	}
	carry_key_counts(&fresh);
	g.a = fresh;
	describe();
	return 0;
}

int auth_node_setup_keys(const char *cluster, const struct auth_keys *k)
{
	struct auth fresh;
	int r = auth_init(&fresh, cluster, k);

	if (r < 0)
		return r;
	carry_key_counts(&fresh);
	g.a = fresh;
	describe();
	return 0;
}

const struct auth *auth_node(void)
{
	return &g.a;
}

size_t auth_node_reserve(void)
{
	return g.a.on ? AUTH_TRAILER_LEN : 0;
}

size_t auth_node_seal(enum auth_surface s, uint8_t *buf, size_t len, size_t cap,
		      size_t mold_off)
{
	int64_t r = auth_seal(&g.a, s, buf, len, cap, mold_off);

	if (r >= 0)
		return (size_t)r;
	log_ratelimited(&g.rl, LOG_LVL_ERR, "%s: cannot tag a %zu-byte datagram: %s",
			auth_surface_names[s], len, auth_strerror((int)r));
	return len;
}

void auth_node_seal_batch(enum auth_surface s, struct net_batch *b, unsigned n, size_t mold_off)
{
	if (!g.a.on)
		return;
	for (unsigned i = 0; i < n; i++)
		b->lens[i] = auth_node_seal(s, net_batch_slot(b, i), b->lens[i], b->size, mold_off);
}

size_t auth_node_request(uint8_t out[AUTH_CONTROL_MAX], const struct mold_request *r)
{
	return auth_node_seal(AUTH_REQUEST, out, mold_build_request(out, r), AUTH_CONTROL_MAX, 0);
}

size_t auth_node_heartbeat(uint8_t out[AUTH_CONTROL_MAX], enum auth_surface s,
			   const struct mold_session *sess, uint64_t next_seq, int eos)
{
	size_t n = eos ? mold_build_end_of_session(out, sess, next_seq)
		       : mold_build_heartbeat(out, sess, next_seq);

	return auth_node_seal(s, out, n, AUTH_CONTROL_MAX, 0);
}

static struct source *source_slot(const struct sockaddr_in *from)
{
	struct source *min = &g.src[0];

	for (unsigned i = 0; i < SOURCES; i++) {
		struct source *x = &g.src[i];

		if (x->n && net_addr_same(&x->addr, from))
			return x;
		if (x->n < min->n)
			min = x;
	}
	if (min->n) /* every slot taken: the first eight keep theirs */
		return NULL;
	uint32_t a = ntohl(from->sin_addr.s_addr);

	min->addr = *from;
	snprintf(min->name, sizeof(min->name), "auth_dropped_from_%u_%u_%u_%u_%u", a >> 24,
		 (a >> 16) & 255, (a >> 8) & 255, a & 255, ntohs(from->sin_port));
	return min;
}

static void count_drop(enum auth_surface s, int err, const uint8_t *buf, size_t len,
		       const struct sockaddr_in *from)
{
	char addr[32] = "?";
	struct source *x = from ? source_slot(from) : NULL;
	uint64_t n;

	g.dropped[s]++;
	if (x)
		n = ++x->n;
	else
		n = ++g.src_other;
	if (from)
		net_format_addr(from, addr, sizeof(addr));
	log_ratelimited(&g.rl, LOG_LVL_WARNING,
			"%s: dropped a %zu-byte datagram from %s: %s (key id %u; %llu from there "
			"so far)",
			auth_surface_names[s], len, addr, auth_strerror(err),
			auth_key_id_of(buf, len), (unsigned long long)n);
}

int auth_node_check(enum auth_surface s, uint8_t *buf, size_t *len, size_t mold_off,
		    const struct sockaddr_in *from)
{
	unsigned k = 0;
	size_t inner;
	int r = auth_open(&g.a, s, buf, *len, mold_off, &inner, &k);

	if (r != AUTH_OK) {
		count_drop(s, r, buf, *len, from);
		return -1;
	}
	if (g.a.on)
		g.rx_key[k]++;
	*len = inner;
	return 0;
}

int auth_node_from_host(const struct sockaddr_in *hosts, int n, const struct sockaddr_in *from,
			const char *what, const char *key, uint64_t *refused)
{
	char a[32];

	if (addrlist_has_host(hosts, n, from))
		return 1;
	(*refused)++;
	net_format_addr(from, a, sizeof(a));
	log_ratelimited(&g.rl, LOG_LVL_WARNING, "%s from %s refused: not a host of %s", what, a,
			key);
	return 0;
}

uint64_t auth_node_dropped(enum auth_surface s)
{
	return g.dropped[s];
}

const char *auth_node_describe(void)
{
	if (!g.describe[0])
		describe();
	return g.describe;
}

void auth_node_stats(struct counters *out)
{
	static char names[AUTH_N_SURFACES][40];

	for (int s = 0; s < AUTH_N_SURFACES; s++) {
		if (!names[s][0])
			snprintf(names[s], sizeof(names[s]), "auth_dropped_%s",
				 auth_surface_names[s]);
		counters_add(out, names[s], g.dropped[s], 0);
	}
	counters_add(out, "auth_on", (uint64_t)g.a.on, 1);
	for (unsigned i = 0; i < g.a.n; i++)
		counters_add(out, g.rx_key_name[i], g.rx_key[i], 0);
	for (unsigned i = 0; i < SOURCES; i++)
		if (g.src[i].n)
			counters_add(out, g.src[i].name, g.src[i].n, 0);
	if (g.src_other)
		counters_add(out, "auth_dropped_from_others", g.src_other, 0);
}
