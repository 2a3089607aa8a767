/* lockstep-replay pcap: the tape written as MoldUDP64 packets in a classic
 * pcap file (Ethernet/IPv4/UDP) that Wireshark opens, each trading day in
 * its own session numbered from 1. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"
#include "replay.h"
#include "wire.h"

/* Classic libpcap format: a 24-byte file header (magic 0xa1b23c4d for
 * nanosecond timestamps, version 2.4, snaplen, link type 1 = Ethernet), then
 * per packet a 16-byte record header (seconds, nanoseconds, captured and
 * original length) and the frame. Written little-endian; readers take either
 * byte order from the magic. */
#define PCAP_MAGIC_NS 0xa1b23c4du
#define PCAP_SNAPLEN 65535u
#define ETH_HLEN 14u
#define IP_HLEN 20u
#define UDP_HLEN 8u
#define FRAME_HLEN (ETH_HLEN + IP_HLEN + UDP_HLEN)

struct pcap_out {
	FILE *f;
	struct sockaddr_in src, dst;
	uint16_t ip_id;
	uint64_t packets, blocks, bytes;
};

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* One's complement sum of 16-bit big-endian words (RFC 1071), not folded. */
static uint32_t csum_add(uint32_t sum, const uint8_t *p, size_t len)
{
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (i < len)
		sum += (uint32_t)(p[i] << 8);
	return sum;
}

static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static int pcap_open(struct pcap_out *p, const char *path)
{
	uint8_t h[24];

	p->f = fopen(path, "wb");
	if (!p->f)
		return -errno;
	setvbuf(p->f, NULL, _IOFBF, 1 << 20);
	put_le32(h, PCAP_MAGIC_NS);
	put_le16(h + 4, 2);
	put_le16(h + 6, 4);
	put_le32(h + 8, 0); /* thiszone: UTC */
	put_le32(h + 12, 0); /* sigfigs */
	put_le32(h + 16, PCAP_SNAPLEN);
	put_le32(h + 20, 1); /* LINKTYPE_ETHERNET */
	return fwrite(h, sizeof(h), 1, p->f) == 1 ? 0 : -EIO;
}

/* Writes one UDP datagram as an Ethernet frame; len <= MOLD_MAX_PACKET. */
static int pcap_write(struct pcap_out *p, uint64_t ts_ns, const uint8_t *payload, size_t len)
{
	uint8_t h[16 + FRAME_HLEN];
	uint8_t *eth = h + 16, *ip = eth + ETH_HLEN, *udp = ip + IP_HLEN;
	uint32_t group = ntohl(p->dst.sin_addr.s_addr), sum;
	size_t frame = FRAME_HLEN + len;
	uint8_t pseudo[12];

	put_le32(h, (uint32_t)(ts_ns / 1000000000u));
	put_le32(h + 4, (uint32_t)(ts_ns % 1000000000u));
	put_le32(h + 8, (uint32_t)(frame < PCAP_SNAPLEN ? frame : PCAP_SNAPLEN));
	put_le32(h + 12, (uint32_t)frame);
	/* Ethernet: the IPv4 multicast MAC 01:00:5e + the group's low 23 bits,
	 * a locally administered source, EtherType IPv4. */
	eth[0] = 0x01, eth[1] = 0x00, eth[2] = 0x5e;
	eth[3] = (uint8_t)(group >> 16 & 0x7f), eth[4] = (uint8_t)(group >> 8), eth[5] = (uint8_t)group;
	memcpy(eth + 6, "\x02\x00\x00\x00\x00\x01", 6);
	put_be16(eth + 12, 0x0800);
	/* IPv4: no options, no fragmentation, TTL 1 as the sequencer sends */
	ip[0] = 0x45;
	ip[1] = 0;
	put_be16(ip + 2, (uint16_t)(IP_HLEN + UDP_HLEN + len));
	put_be16(ip + 4, p->ip_id++);
	put_be16(ip + 6, 0);
	ip[8] = 1;
	ip[9] = 17; /* UDP */
	put_be16(ip + 10, 0);
	memcpy(ip + 12, &p->src.sin_addr.s_addr, 4);
	memcpy(ip + 16, &p->dst.sin_addr.s_addr, 4);
	put_be16(ip + 10, csum_fold(csum_add(0, ip, IP_HLEN)));
	/* UDP, with its checksum over the pseudo-header */
	memcpy(udp, &p->src.sin_port, 2);
	memcpy(udp + 2, &p->dst.sin_port, 2);
	put_be16(udp + 4, (uint16_t)(UDP_HLEN + len));
	put_be16(udp + 6, 0);
	memcpy(pseudo, ip + 12, 8);
	pseudo[8] = 0;
	pseudo[9] = 17;
	put_be16(pseudo + 10, (uint16_t)(UDP_HLEN + len));
	sum = csum_add(0, pseudo, sizeof(pseudo));
	sum = csum_add(sum, udp, UDP_HLEN);
	/* the payload's words start at an even offset from the UDP header */
	sum = csum_add(sum, payload, len);
	sum = csum_fold(sum);
	put_be16(udp + 6, sum ? (uint16_t)sum : 0xffff);
	if (fwrite(h, sizeof(h), 1, p->f) != 1 || (len && fwrite(payload, len, 1, p->f) != 1))
		return -EIO;
	p->packets++;
	p->bytes += sizeof(h) + len;
	return 0;
}

/* Sets the frames' addresses from --group and --source (its port defaults to
 * the group's). Returns 0, or 2 with a message. */
static int pcap_addresses(struct pcap_out *out, const char *group, const char *source)
{
	char src[96];

	if (net_parse_addr(group, &out->dst) < 0 || !out->dst.sin_port)
		return fail_usage("--group %s: want ADDR:PORT", group);
	snprintf(src, sizeof(src), strchr(source, ':') ? "%s" : "%s:0", source);
	if (net_parse_addr(src, &out->src) < 0)
		return fail_usage("--source %s: want ADDR or ADDR:PORT", source);
	if (!out->src.sin_port)
		out->src.sin_port = out->dst.sin_port;
	return 0;
}

/* Writes the records from..to as packets through buf (MOLD_MAX_PACKET
 * bytes); counts in *skipped those too large for any. Returns 0 or a
 * negative errno. */
static int pcap_export(struct pcap_out *out, struct packer *pk, const struct tapedir *t,
		       uint64_t from, uint64_t to, uint8_t *buf, uint64_t *skipped)
{
	struct journal_iter *it = NULL;
	struct progress pr;
	uint64_t seq, term;
	const uint8_t *data;
	size_t len;
	int r;

	progress_start(&pr, "pcap", from, to);
	r = journal_iter_open(&it, t->j, from);
	while (r == 0 && (r = journal_iter_next(it, &seq, &term, &data, &len)) == 1) {
		uint64_t ts = packer_record(pk, seq, data, len);

		r = 0;
		if (!packer_fits(len)) {
			(*skipped)++;
		} else if (!packer_add(pk, seq, ts, data, len)) {
			if (pk->open)
				r = pcap_write(out, pk->ts, buf, packer_end(pk));
			packer_start(pk, buf, seq, ts, data, len);
		}
		out->blocks++;
		progress_tick(&pr, seq);
		if (seq >= to)
			break;
	}
	if (r >= 0 && pk->open)
		r = pcap_write(out, pk->ts, buf, packer_end(pk));
	progress_end(&pr);
	journal_iter_close(it);
	return r;
}

int cmd_pcap(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "from", required_argument, NULL, 'f' }, { "to", required_argument, NULL, 't' },
		{ "group", required_argument, NULL, 'g' }, { "source", required_argument, NULL, 'S' },
		{ "tape-session", required_argument, NULL, 'n' },
		{ "max-datagram", required_argument, NULL, 'm' }, { "help", no_argument, NULL, 'h' },
		{ "day", required_argument, NULL, 'd' }, { NULL, 0, NULL, 0 },
	};
	const char *group = "239.255.0.1:9200", *source = "127.0.0.1", *session = "TAPE";
	struct packer pk = { .max = WIRE_MAX_DATAGRAM };
	struct pcap_out out = { 0 };
	struct tapedir t;
	uint64_t from = 0, to = 0, max = 0, skipped = 0;
	uint32_t day = 0;
	uint8_t *buf;
	int c, r, rc;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'f': if (opt_from(optarg, &from)) return 2; break;
		case 't': if (opt_to(optarg, &to)) return 2; break;
		case 'g': group = optarg; break;
		case 'S': source = optarg; break;
		case 'n': session = optarg; break;
		case 'd': if (opt_day(optarg, &day)) return 2; break;
		case 'm':
			if (parse_u64(optarg, &max) < 0 || max < 64 || max > MOLD_MAX_PACKET)
				return fail_usage("--max-datagram: 64..%u", MOLD_MAX_PACKET);
			pk.max = (size_t)max;
			break;
		case 'h': usage(stdout); return 0;
		default: return 2;
		}
	}
	if (argc - optind != 2)
		return fail_usage("pcap: a journal directory and an output file");
	if ((rc = pcap_addresses(&out, group, source)) != 0)
		return rc;
	if (wirepos_init(&pk.w, session) < 0)
		return fail_usage("--tape-session %s: up to 10 printable characters", session);
	if ((rc = tapedir_open(&t, argv[optind], 1, 0)) != 0)
		return rc;
	if ((day && (rc = days_range(&t, day, &from, &to)) != 0) ||
	    (rc = tapedir_range(&t, &from, &to)) != 0) {
		tapedir_close(&t);
		return rc;
	}
	if ((r = wirepos_prime(&pk.w, &t, from)) < 0) {
		fprintf(stderr, PROG ": reading %s: %s\n", t.dir, strerror(-r));
		tapedir_close(&t);
		return 2;
	}
	buf = malloc(MOLD_MAX_PACKET);
	r = buf ? pcap_open(&out, argv[optind + 1]) : -ENOMEM;
	if (r < 0) {
		fprintf(stderr, PROG ": %s: %s\n", argv[optind + 1], strerror(-r));
		free(buf);
		tapedir_close(&t);
		return 2;
	}
	r = pcap_export(&out, &pk, &t, from, to, buf, &skipped);
	if (fclose(out.f) != 0 && r >= 0)
		r = -errno;
	free(buf);
	tapedir_close(&t);
	if (r < 0) {
		fprintf(stderr, PROG ": pcap: %s\n", strerror(-r));
		return 2;
	}
	if (skipped)
		fprintf(stderr, PROG ": warning: %llu events too large for a UDP datagram left out\n",
			(unsigned long long)skipped);
	fprintf(stderr, "%s: %llu events (seq %llu..%llu, %u day(s)) in %llu packets, %llu bytes\n",
		argv[optind + 1], (unsigned long long)(out.blocks - skipped),
		(unsigned long long)from, (unsigned long long)to,
		tapeday_day_at(&pk.w.td, to, NULL) - tapeday_day_at(&pk.w.td, from, NULL) + 1,
		(unsigned long long)out.packets,
		(unsigned long long)(out.bytes + 24));
	return 0;
}
