/* lockstep-recorder, the tape recorder (issue 19): a node that joins the
 * tape (network A, and B with tape_group_b), recovers what it misses from
 * its upstream servers (the sequencers, or a recorder nearer them),
 * journals every event in the sequencer's journal format (lockstep-replay
 * reads it: verify, dump, pcap, rebuild, a drop copy), and answers the
 * tape's retransmission requests from that journal (common/tapeserve.h),
 * so that the receivers near it ask it, not the sequencers
 * ([matcher]/[gateway] tape_recorders). It never votes and never
 * sequences; the tape carries committed events only, so whatever it
 * journals is final. */
#ifndef LOCKSTEP_RECORDER_H
#define LOCKSTEP_RECORDER_H

#include <stdint.h>

#include "config.h"
#include "daemon.h"

struct rec_config {
	struct node_config node;
	char tape_group[64], tape_iface[64], tape_session[16];
	char tape_group_b[64], tape_iface_b[64]; /* A/B ("": network A only) */
	char upstream[512]; /* comma-separated host:port: where it asks */
	char retrans[64]; /* host:port where it answers */
	int fsync; /* index into rec_fsync_modes */
	uint64_t fsync_interval_ns, segment_size;
	uint64_t rcvbuf, sndbuf, batch, max_datagram, retrans_packets;
	uint64_t ab_wait_ns, request_delay_ns, retrans_wait_ns, retrans_wait_max_ns;
	uint64_t reorder_window, reorder_bytes;
	/* the repair group (request suppression): joined on tape_iface; asked
	 * first (repair_ask), answered by multicast (repair_answer) */
	char repair_group[64];
	int repair_ask, repair_answer, repair_suppress;
	uint64_t repair_holdoff_ns;
	double drop_rate; /* loss generator for tests, 0: off */
	uint64_t drop_seed;
};

extern const struct config_spec rec_config_spec;
extern const struct daemon_ops recorder_daemon;

#endif
