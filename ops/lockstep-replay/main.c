/* lockstep-replay: offline tools over a sequencer's journal, the tape as it was
 * committed: verify, dump, pcap export, re-multicast (send), matcher rebuild,
 * diff, repair, the trading days and their archives, one file each. This file: the usage text, the option helpers the
 * subcommands share, and the dispatch. The journal is opened read-only
 * (common/journal.h) and read sequentially with journal_iter; nothing here
 * writes to it. See ops/man/lockstep-replay.1. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

void usage(FILE *f)
{
	fputs("Usage: lockstep-replay COMMAND JOURNAL_DIR [OPTIONS]\n"
	      "\n"
	      "Offline tools over a sequencer's journal (ops/cluster: DIR/seq-1/journal).\n"
	      "The journal is opened read-only (repair and archive --remove excepted);\n"
	      "sequence numbers SEQ are the tape's index, continuous across trading days.\n"
	      "Wherever a command reads DIR, a day archive FILE (see archive) does too: it\n"
	      "is unpacked into a private directory under $TMPDIR (/tmp), removed after.\n"
	      "--day N (verify, dump, pcap, send, rebuild) selects trading day N's records\n"
	      "(rebuild: up to its end). Day d goes on the wire in its own MoldUDP64 session\n"
	      "(day 1: --tape-session NAME; day d > 1: NAME's first 4 characters and d in\n"
	      "6 digits, e.g. TAPE000002), numbered from 1.\n"
	      "\n"
	      "  days    DIR [--tape-session NAME] [--json]\n"
	      "      The trading days the journal holds (from its DayEvents): day, session,\n"
	      "      first..last index, events, first and last event time (UTC), and whether\n"
	      "      the day ended (its END_OF_DAY is there).\n"
	      "  archive DIR (--day N | --all-before N | --all) --out FILE [--level L]\n"
	      "          [--remove]\n"
	      "      Packs the segments of day N (over: the next day has opened), of every\n"
	      "      day before N, or of the whole directory (--all: one no daemon writes)\n"
	      "      into FILE, zstd-compressed (level L, 3), after checking every record's\n"
	      "      CRC; FILE is synced, then read back. --remove then deletes those\n"
	      "      segments from DIR (each only while it is the file archived).\n"
	      "  verify  DIR [--allow-trimmed] [--day N]\n"
	      "      Checks every record's CRC, that sequence numbers run without gap or\n"
	      "      duplicate from 1 (from anywhere with --allow-trimmed), that every event\n"
	      "      decodes, carries its record's seq and term, terms never go down, and\n"
	      "      the matcher can apply every command, and that each START_OF_DAY opens\n"
	      "      the next day. Exit 1 naming the first bad record.\n"
	      "  dump    DIR [--from SEQ] [--to SEQ] [--day N] [--symbol S] [--session USER]\n"
	      "          [--json] [--tape-session NAME] [--follow]\n"
	      "      One line per event: UTC time of day, seq, its day, session and per-day\n"
	      "      seq (day=2 TAPE000002#17), term, origin (gateway#seq),\n"
	      "      login/firm, the command (symbol, side, shares, price, TIF, token); or\n"
	      "      JSON lines. --symbol also shows cancels, replaces and modifies of that\n"
	      "      symbol's orders; --session keeps one login's commands. --follow goes\n"
	      "      on as the journal's writer appends (looking every 100 ms), until\n"
	      "      --to SEQ or until killed: a live drop copy of a recorder's or a\n"
	      "      sequencer's journal to a file or a pipe.\n"
	      "  pcap    DIR OUT.pcap [--from SEQ] [--to SEQ] [--day N] [--group ADDR:PORT]\n"
	      "          [--source ADDR[:PORT]] [--tape-session NAME] [--max-datagram N]\n"
	      "      Writes the tape as MoldUDP64 packets in a classic pcap file\n"
	      "      (Ethernet/IPv4/UDP, nanosecond timestamps from the events) that\n"
	      "      Wireshark opens. Consecutive events with one timestamp (one sequencer\n"
	      "      batch) share a packet up to --max-datagram bytes (1472), as the\n"
	      "      sequencer sent them, never two days in one. Defaults: group\n"
	      "      239.255.0.1:9200, source\n"
	      "      127.0.0.1 (port: the group's), session TAPE.\n"
	      "  send    DIR --group ADDR:PORT [--retrans ADDR:PORT] [--iface ADDR]\n"
	      "          [--pace original|max|xN] [--from SEQ] [--to SEQ] [--day N]\n"
	      "          [--tape-session NAME] [--linger S] [--heartbeat MS]\n"
	      "          [--max-datagram N] [--retrans-packets N] [--ttl N]\n"
	      "          [--key-file FILE] [--cluster NAME] [--auth on|off]\n"
	      "      Multicasts the tape again as a live MoldUDP64 stream (session REPLAY\n"
	      "      by default) out of --iface (127.0.0.1), at the original pacing, at\n"
	      "      full speed or N times faster (batched as in pcap), with heartbeats\n"
	      "      when idle; answers retransmission requests on --retrans like a\n"
	      "      sequencer, so a matcher with tape_group, tape_session and\n"
	      "      tape_retrans pointed here consumes it unchanged. After the last event\n"
	      "      it goes on heartbeating and serving retransmissions for --linger\n"
	      "      seconds (10; -1: until SIGINT/SIGTERM), then ends the session.\n"
	      "      Every datagram is tagged under the cluster key of --key-file\n"
	      "      (/etc/lockstep/cluster.key) for cluster --cluster (lockstep), as a\n"
	      "      sequencer's; requests that fail are dropped. --auth off: untagged\n"
	      "      (for matchers run with [node] auth = off).\n"
	      "  rebuild DIR [--to SEQ | --day N] [--config MATCHER.CONF]\n"
	      "          [--set matcher.KEY=VALUE]\n"
	      "          [--every N] [--json] [--snapshot OUT]\n"
	      "      Runs the matcher's engine offline over the tape (up to SEQ) and prints\n"
	      "      the state hash, equal bit for bit to a live replica's at that seq when\n"
	      "      the [matcher] config (partition, symbols, max_shares, capacities,\n"
	      "      risk_file) is the replica's; without --config, the matcher's\n"
	      "      defaults. --every N\n"
	      "      prints the hash at every N-th seq too. --snapshot OUT writes that\n"
	      "      state as a matcher snapshot (the matcher's format, exec stream seq\n"
	      "      included): into OUT/snap-<seq>.lss when OUT is a directory (a\n"
	      "      matcher's <state_dir>/snapshots: it starts from it), else to OUT.\n"
	      "  itch    DIR [--config MATCHER.CONF] [--set KEY=VALUE] [--day N]\n"
	      "          [--out FILE] [--json]\n"
	      "      Regenerates a partition's public ITCH 5.0 feed from the tape (the\n"
	      "      engine run as rebuild runs it): the very messages, under the very\n"
	      "      sequence numbers, that its replicas published, written to FILE in\n"
	      "      NASDAQ's ITCH file format (each message after its length, u16\n"
	      "      big-endian), day N's only or every day's; lockstep-feed --record\n"
	      "      writes a live capture in the same format, for cmp(1).\n"
	      "  diff    DIR_A DIR_B\n"
	      "      Compares two tapes record by record from the later first seq and\n"
	      "      tells where they part. Exit 0 when identical, 1 when not.\n"
	      "  repair  DIR\n"
	      "      A damaged journal (a bad record with good records after it, which\n"
	      "      the daemons refuse to open) is cut before its first bad record; every\n"
	      "      segment from the bad one on is first copied to DIR.damaged-SEQ. The\n"
	      "      one command that writes the journal. A sequencer started on it\n"
	      "      fetches the cut range from its group: repair one member at a time,\n"
	      "      while the others hold the range (their commit is past SEQ).\n"
	      "\n"
	      "No per-record index is kept (send excepted): memory does not grow with\n"
	      "the journal. On a terminal, long runs show a progress line on stderr.\n"
	      "Exit status: 0 success, 1 a check failed (bad record, tapes differ),\n"
	      "2 usage error or the journal cannot be read.\n",
	      f);
}

int fail_usage(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see lockstep-replay --help)\n", stderr);
	return 2;
}

int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

int opt_from(const char *arg, uint64_t *from)
{
	return parse_u64(arg, from) < 0 ? fail_usage("--from: a sequence number") : 0;
}

int opt_to(const char *arg, uint64_t *to)
{
	return parse_u64(arg, to) < 0 || !*to ? fail_usage("--to: a sequence number") : 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {
		{ "verify", cmd_verify }, { "dump", cmd_dump }, { "pcap", cmd_pcap },
		{ "send", cmd_send }, { "rebuild", cmd_rebuild }, { "diff", cmd_diff },
		{ "repair", cmd_repair }, { "days", cmd_days }, { "archive", cmd_archive },
		{ "itch", cmd_itch },
	};

	if (argc < 2)
		return fail_usage("which command?");
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		puts(PROG " " LOCKSTEP_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(argv[1], cmds[i].name) == 0)
			return cmds[i].fn(argc - 1, argv + 1);
	return fail_usage("unknown command %s", argv[1]);
}
