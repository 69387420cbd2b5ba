/* Header and metadata types. Field meanings: docs/protocol.md §2. */
#ifndef SA_ATP_HEADERS_P4
#define SA_ATP_HEADERS_P4

#include "lanes.p4"

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;

/* Management request from the controller (P4Runtime PacketOut metadata). */
@controller_header("packet_out")
header packet_out_h {
    bit<8>  opcode;       /* MGMT_* */
    bit<32> aggregator;   /* register index: 2 * slot + set */
}

/* Management reply to the controller (P4Runtime PacketIn metadata). */
@controller_header("packet_in")
header packet_in_h {
    bit<9>  ingress_port;
    bit<7>  _pad;
    bit<8>  opcode;
    bit<32> aggregator;
}

header ethernet_h {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

header ipv4_h {
    bit<4>      version;
    bit<4>      ihl;
    bit<8>      diffserv;
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

header udp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

header sa_atp_h {
    bit<4>  version;
    bit<4>  op;
    bit<8>  flags;
    bit<16> job;
    bit<16> slot;      /* job-relative */
    bit<8>  worker;    /* sender, or the helper in PARTIAL / BOUNCE(TAKEN) */
    bit<8>  reason;    /* bounce reason; in HELPER_DATA, the helper it goes to */
    bit<32> chunk;
    bit<32> bitmap;
    bit<8>  count;
    bit<8>  fanin;     /* in-band fan-in, 0 = the job's */
    bit<16> scale;     /* agreed quantization exponent + 0x8000; 0 = raw int32 */
    bit<16> exp;       /* block exponent + 0x8000 (max over contributors in results) */
    bit<32> run;       /* the job run's identity; state of another run never matches */
}

#define LANE_FIELD(i) bit<32> v##i;
header lanes_h {
    LANES(LANE_FIELD)
}

struct headers_t {
    packet_out_h packet_out;
    packet_in_h  packet_in;
    ethernet_h ethernet;
    ipv4_h     ipv4;
    udp_h      udp;
    sa_atp_h   sa;
    lanes_h    lanes;
}

struct metadata_t {
    bit<4>  drop_reason;   /* DROP_*; the stats control drops the packet when non-zero */
    bit<8>  job_index;     /* dense per-job index for counters, 0 = no job */
    bit<16> slot_base;     /* first slot of the job's range in the pool */
    bit<16> num_slots;     /* the job's window W: its own slots, then the borrowed ones */
    bit<16> own_slots;     /* slots whose lanes are the job's own; the rest borrow the pool's */
    bit<16> pool_base;     /* first slot of the shared pool the borrowed slots' lanes come from */
    bit<8>  fan_in;
    bit<32> expected;      /* bitmap of workers expected to contribute */
    bit<16> job_group;     /* multicast group of the job's workers */
    bit<1>  inband_fanin;  /* the job accepts hdr.sa.fanin */
    bit<32> worker_bit;    /* 1 << hdr.sa.worker, from the workers table */
    bit<1>  transit;       /* the job is aggregated by another switch: just forward */
    bit<1>  to_job;        /* multicast to the job's workers (not a flood) */
    bit<1>  to_worker;     /* unicast to worker dest_worker (HELPER_DATA to its helper) */
    bit<8>  dest_worker;   /* the worker a copy goes to: egress_rid, or the helper */
}

#endif
