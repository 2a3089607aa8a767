/* lockstep-bench --component codecs: ns per message of each codec on the
 * path of an Enter Order: the MoldUDP64 tape datagram, the SoupBinTCP
 * stream, OUCH, the tape event and the protobuf Command; and the cost of a
 * datagram's tag, with the keyed functions it was chosen among. */
#include <sodium.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "arena.h"
#include "auth.h"
#include "bench.h"
#include "command.h"
#include "clock.h"
#include "lockstep.pb-c.h"
#include "tape.h"
#include "wire.h"

static volatile uint64_t sink;

static void x_sink_add(int64_t v)
{
	sink += (uint64_t)v;
}

struct codec_result {
	const char *name;
	double ns;
};
#define CODEC_RESULTS 32
static struct codec_result codec_results[CODEC_RESULTS];
static unsigned n_codec_results;

/* The samples every codec works on: an Enter Order, its Accepted and the
 * other answers the matcher sends (Executed, Canceled, Replaced, Rejected),
 * its Command and its tape event. */
struct samples {
	struct ouch_msg enter, accepted, executed, canceled, replaced, rejected;
	uint8_t msg[OUCH_MAX_LEN], cmd[256], ev[512];
	int len;
	size_t cmd_len, ev_len;
	uint64_t blocks_per_pkt; /* events in one tape datagram */
	uint64_t acc_sum; /* keeps the results alive */
};

static uint8_t buf[1 << 20];

static void codec_report(const char *name, uint64_t t0, uint64_t n)
{
	double ns = (double)(mono_ns() - t0) / (double)n;

	printf("codec %-24s %8.1f ns/message  (%.1f M/s)\n", name, ns, 1e3 / ns);
	if (n_codec_results < CODEC_RESULTS)
		codec_results[n_codec_results++] = (struct codec_result){ name, ns };
}

/* The answers to the sample Enter other than Accepted, as the matcher fills
 * them: tokens and stock shorter than their fields, so padding is done. */
static void samples_answers(struct samples *x)
{
	const struct ouch_accepted *a = &x->accepted.u.accepted;

	x->executed = (struct ouch_msg){ .type = OUCH_EXECUTED };
	memcpy(x->executed.u.executed.token, a->token, sizeof(a->token));
	x->executed.u.executed.shares = a->shares;
	x->executed.u.executed.price = a->price;
	x->executed.u.executed.liquidity = OUCH_LIQ_ADDED;
	x->canceled = (struct ouch_msg){ .type = OUCH_CANCELED };
	memcpy(x->canceled.u.canceled.token, a->token, sizeof(a->token));
	x->canceled.u.canceled.decrement = a->shares;
	x->canceled.u.canceled.reason = OUCH_CXL_USER;
	x->replaced = (struct ouch_msg){ .type = OUCH_REPLACED };
	/* Accepted and Replaced share their layout up to state */
	memcpy(&x->replaced.u.replaced, a, offsetof(struct ouch_replaced, previous_token));
	memcpy(x->replaced.u.replaced.previous_token, a->token, sizeof(a->token));
	x->replaced.u.replaced.replacement_token[0] = 'R';
	x->replaced.u.replaced.bbo_weight = a->bbo_weight;
	x->rejected = (struct ouch_msg){ .type = OUCH_REJECTED };
	memcpy(x->rejected.u.rejected.token, a->token, sizeof(a->token));
	x->rejected.u.rejected.reason = OUCH_REJ_INVALID_PRICE;
}

static void samples_init(struct samples *x)
{
	memset(x, 0, sizeof(*x));
	x->enter = (struct ouch_msg){ .type = OUCH_ENTER_ORDER, .inbound = 1 };
	x->accepted = (struct ouch_msg){ .type = OUCH_ACCEPTED };
	mix_sample_enter(&x->enter.u.enter, 1);
	x->len = ouch_encode_inbound(&x->enter, x->msg, sizeof(x->msg));
	mix_accept(&x->enter.u.enter, 0, &x->accepted.u.accepted);
	samples_answers(x);
	x->cmd_len = mix_pack_enter(&x->enter.u.enter, "TRADR1", "FRMA", x->cmd);
	x->ev_len = tape_event_encode(x->ev, sizeof(x->ev), 1, 12345678, 1700000000000000000ull,
				      "gw-1", 12345, 12345678, x->cmd, x->cmd_len);
}

/* MoldUDP64: a tape datagram of events, parsed and walked */
static void codec_mold(struct samples *x, uint64_t n)
{
	struct mold_session sess;
	struct mold_builder b;
	struct mold_packet mp;
	size_t pkt_len;
	uint64_t t0;

	mold_session_set(&sess, "TAPE");
	mold_build_begin(&b, buf, WIRE_MAX_DATAGRAM, &sess, 1000);
	while (mold_build_add(&b, x->ev, (uint16_t)x->ev_len) == 0)
		x->blocks_per_pkt++;
	pkt_len = mold_build_end(&b);
	t0 = mono_ns();
	for (uint64_t i = 0; i < n / x->blocks_per_pkt; i++) {
		struct mold_iter it;
		const uint8_t *data;
		uint64_t seq;
		uint16_t l;

		if (mold_parse(buf, pkt_len, &sess, 0, &mp) == 0) {
			mold_iter_init(&it, &mp);
			while (mold_iter_next(&it, &seq, &data, &l))
				x->acc_sum += l;
		}
	}
	codec_report("moldudp64_parse+iter", t0, n / x->blocks_per_pkt * x->blocks_per_pkt);
}

/* SoupBinTCP: a client's stream of Enter Orders, parsed */
static void codec_soup(struct samples *x, uint64_t n)
{
	static uint8_t pbuf[1 << 17];
	struct soup_parser p;
	struct soup_packet pk;
	uint64_t packets = 0, t0;
	size_t stream_len = 0;

	while (stream_len + (size_t)x->len + 3 <= sizeof(buf))
		stream_len += (size_t)soup_build_unsequenced(buf + stream_len, sizeof(buf) - stream_len,
							     x->msg, (uint16_t)x->len);
	t0 = mono_ns();
	while (packets < n) {
		size_t off = 0;

		soup_parser_init(&p, pbuf, sizeof(pbuf), SOUP_MAX_PAYLOAD, SOUP_FROM_CLIENT);
		while (off < stream_len) {
			size_t room, k;
			uint8_t *at = soup_parser_space(&p, &room);

			k = stream_len - off < room ? stream_len - off : room;
			if (k > 65536)
				k = 65536; /* a recv's worth */
			memcpy(at, buf + off, k);
			soup_parser_feed(&p, k);
			off += k;
			while (soup_parser_next(&p, &pk) == SOUP_OK) {
				x->acc_sum += pk.len;
				packets++;
			}
		}
	}
	codec_report("soupbintcp_parse", t0, packets);
}

/* An outbound message encoded n times; its timestamp varies. */
static void codec_ouch_out(struct samples *x, struct ouch_msg *m, const char *name, uint64_t n)
{
	uint64_t t0 = mono_ns();

	for (uint64_t i = 0; i < n; i++) {
		m->u.executed.timestamp = i; /* every outbound type starts with it */
		x->acc_sum += (uint64_t)ouch_encode_outbound(m, buf, OUCH_MAX_LEN);
	}
	codec_report(name, t0, n);
}

static void codec_ouch(struct samples *x, uint64_t n)
{
	struct ouch_msg d;
	uint64_t t0 = mono_ns();

	for (uint64_t i = 0; i < n; i++) {
		x->msg[1 + (i & 7)] = (uint8_t)('A' + (i & 15)); /* the token varies */
		if (ouch_decode_inbound(x->msg, (size_t)x->len, &d) == 0)
			x->acc_sum += d.u.enter.shares;
	}
	codec_report("ouch_decode(Enter)", t0, n);
	t0 = mono_ns();
	for (uint64_t i = 0; i < n; i++) {
		x->accepted.u.accepted.order_ref = i;
		x->acc_sum += (uint64_t)ouch_encode_outbound(&x->accepted, buf, OUCH_MAX_LEN);
	}
	codec_report("ouch_encode(Accepted)", t0, n);
	codec_ouch_out(x, &x->executed, "ouch_encode(Executed)", n);
	codec_ouch_out(x, &x->canceled, "ouch_encode(Canceled)", n);
	codec_ouch_out(x, &x->replaced, "ouch_encode(Replaced)", n);
	codec_ouch_out(x, &x->rejected, "ouch_encode(Rejected)", n);
	t0 = mono_ns();
	for (uint64_t i = 0; i < n; i++) {
		x->enter.u.enter.shares = 100 + (uint32_t)(i & 1023);
		x->acc_sum += (uint64_t)ouch_encode_inbound(&x->enter, buf, OUCH_MAX_LEN);
	}
	codec_report("ouch_encode(Enter)", t0, n);
}

static void codec_tape(struct samples *x, uint64_t n)
{
	struct tape_event_view v;
	uint64_t t0 = mono_ns();

	for (uint64_t i = 0; i < n; i++)
		x->acc_sum += tape_event_encode(buf, 512, 1, i, 1700000000000000000ull + i, "gw-1", i, i,
						x->cmd, x->cmd_len);
	codec_report("tape_event_encode", t0, n);
	t0 = mono_ns();
	for (uint64_t i = 0; i < n; i++)
		if (tape_event_peek(x->ev, x->ev_len, &v) == 0)
			x->acc_sum += v.body_len + v.seq;
	codec_report("tape_event_peek", t0, n);
}

static void codec_command(struct samples *x, struct arena *arena, uint64_t n)
{
	uint64_t t0 = mono_ns();

	for (uint64_t i = 0; i < n; i++) {
		Lockstep__Command *c = lockstep__command__unpack(&arena->allocator, x->cmd_len, x->cmd);

		if (c)
			x->acc_sum += c->new_order->shares;
		arena_reset(arena);
	}
	codec_report("command_unpack(arena)", t0, n);
	t0 = mono_ns();
	for (uint64_t i = 0; i < n; i++) {
		struct engine_cmd e;
		uint32_t part;

		if (command_decode(x->cmd, x->cmd_len, &e, &part) == 0)
			x->acc_sum += e.u.enter.shares;
	}
	codec_report("command_decode(matcher)", t0, n);
	t0 = mono_ns();
	for (uint64_t i = 0; i < n; i++) {
		x->enter.u.enter.shares = 100 + (uint32_t)(i & 1023);
		x->acc_sum += mix_pack_enter(&x->enter.u.enter, "TRADR1", "FRMA", buf);
	}
	codec_report("command_pack", t0, n);
}

/* The tag of a request (42 bytes sealed) and of a full tape datagram
 * (1,472): seal and open; then the other keyed functions libsodium has,
 * over the same 1,450 bytes, which is why SipHash-128 was picked. */
static void codec_auth(uint64_t n)
{
	static uint8_t dg[WIRE_MAX_DATAGRAM];
	struct auth_keys k;
	struct auth a;
	uint8_t out[32], key[32] = { 1 }, nonce[12] = { 0 };
	size_t inner, body = WIRE_MAX_DATAGRAM - AUTH_TRAILER_LEN;
	uint64_t t0, m = n / 8 ? n / 8 : 1;

	auth_keys_generate(&k);
	auth_init(&a, "bench", &k);
	memset(dg, 0x5a, sizeof(dg));
	dg[18] = 0;
	dg[19] = 1;
	t0 = mono_ns();
	for (uint64_t i = 0; i < n; i++) {
		dg[18] = 0;
		dg[19] = 1;
		x_sink_add(auth_seal(&a, AUTH_REQUEST, dg, 20, sizeof(dg), 0));
		x_sink_add(auth_open(&a, AUTH_REQUEST, dg, 42, 0, &inner, NULL) == 0);
	}
	codec_report("auth_seal+open_request", t0, n);
	t0 = mono_ns();
	for (uint64_t i = 0; i < m; i++) {
		dg[18] = 0;
		dg[19] = 1;
		x_sink_add(auth_seal(&a, AUTH_TAPE, dg, body, sizeof(dg), 0));
		x_sink_add(auth_open(&a, AUTH_TAPE, dg, body + AUTH_TRAILER_LEN, 0, &inner, NULL) == 0);
	}
	codec_report("auth_seal+open_1472", t0, m);
	t0 = mono_ns();
	for (uint64_t i = 0; i < m; i++, dg[0]++)
		crypto_generichash(out, 16, dg, body, key, 32);
	codec_report("alt_blake2b_1450", t0, m);
	t0 = mono_ns();
	for (uint64_t i = 0; i < m; i++, dg[0]++) {
		memcpy(nonce, &i, sizeof(i));
		crypto_stream_chacha20_ietf(out, 32, nonce, key);
		crypto_onetimeauth_poly1305(out, dg, body, out);
	}
	codec_report("alt_chacha20_poly1305_1450", t0, m);
	t0 = mono_ns();
	for (uint64_t i = 0; i < m; i++, dg[0]++)
		crypto_auth_hmacsha256(out, dg, body, key);
	codec_report("alt_hmac_sha256_1450", t0, m);
	x_sink_add(out[0]);
}

static void codec_json(void)
{
	FILE *f = fopen(opt.json, "w");

	if (!f)
		return;
	fprintf(f, "{\"component\": \"codecs\", \"ns_per_message\": {");
	for (unsigned i = 0; i < n_codec_results; i++)
		fprintf(f, "%s\"%s\": %.2f", i ? ", " : "", codec_results[i].name, codec_results[i].ns);
	fprintf(f, "}}\n");
	fclose(f);
}

int comp_codecs_run(uint64_t n)
{
	static struct samples x;
	struct arena arena;

	samples_init(&x);
	if (arena_init(&arena, 1 << 16) < 0)
		return 1;
	codec_mold(&x, n);
	codec_soup(&x, n);
	codec_ouch(&x, n);
	codec_tape(&x, n);
	codec_command(&x, &arena, n);
	codec_auth(n);
	sink += x.acc_sum;
	arena_fini(&arena);
	printf("(an Enter is %d bytes of OUCH, %zu of Command, %zu of Event; %llu Events per "
	       "%u-byte tape datagram)\n",
	       x.len, x.cmd_len, x.ev_len, (unsigned long long)x.blocks_per_pkt, WIRE_MAX_DATAGRAM);
	if (opt.json)
		codec_json();
	return 0;
}
