/* Headers, metadata and internal codes of the TNA program (docs/tofino.md). The protocol's
 * constants and the SA-ATP header come from protocol.p4, generated from protocol/constants.py. */
#ifndef SA_ATP_TNA_TYPES_P4
#define SA_ATP_TNA_TYPES_P4

/* The passes of an SA-ATP packet through the ingress pipeline. */
const bit<2> PASS_STATE = 0;   /* from a port: admission and the aggregator's state registers */
const bit<2> PASS_LANES = 1;   /* resubmitted: the lane registers (low words), the answer */
const bit<2> PASS_HIGH  = 2;   /* recirculated: the high words of the lanes, then out */

/* What a packet asks of the aggregator (meta.kind). */
const bit<3> KIND_NONE          = 0;   /* nothing */
const bit<3> KIND_DATA          = 1;   /* DATA, not a probe, from a worker of the expected set */
const bit<3> KIND_UNEXPECTED    = 2;   /* DATA, not a probe, from a worker outside it */
const bit<3> KIND_PROBE         = 3;
const bit<3> KIND_TAKEOVER      = 4;
const bit<3> KIND_HELPER_RESULT = 5;
const bit<3> KIND_MGMT_READ     = 6;
const bit<3> KIND_MGMT_CLEAR    = 7;

/* The run in the slot against the packet's (meta.run_class, from run_id). An empty aggregator
 * is not compared and counts as one of an older run: both are 0, which is also what a stateful
 * ALU returns from an outcome that drives no output, so the three-way comparison costs two
 * constants, the most a 32-bit stateful ALU computes besides the cell it writes. */
const bit<2> RUN_NEWER = 0;   /* the slot is empty or holds an older run: it counts as empty */
const bit<2> RUN_SAME  = 1;
const bit<2> RUN_OLDER = 2;   /* the slot holds a newer run: BOUNCE(OLD_RUN) */

/* The chunk in the slot against the packet's (meta.situation, from chunk_id). */
const bit<2> SIT_NEWER   = 0;   /* the slot is empty, of an older run, or holds an older chunk */
const bit<2> SIT_HELD    = 1;   /* the slot holds this chunk of this run */
const bit<2> SIT_OLDER   = 2;   /* the slot holds a newer chunk: the packet is stale */
const bit<2> SIT_OLD_RUN = 3;

/* The slot state as `progress` keeps it in bits 17:16, AGGREGATING highest so that one
 * comparison of the whole word tells it apart (docs/tofino.md, 'State registers'); the
 * protocol's codes are SLOT_*. */
const bit<2>  PHASE_EMPTY       = 0;
const bit<2>  PHASE_COMPLETE    = 1;
const bit<2>  PHASE_TAKEN       = 2;
const bit<2>  PHASE_AGGREGATING = 3;
const bit<32> COMPLETE_BASE     = 0x10000;          /* PHASE_COMPLETE << 16 */
const bit<32> TAKEN_BASE        = 0x20000;          /* PHASE_TAKEN << 16 */
const bit<32> AGGREGATING_BASE  = 0x30000;          /* PHASE_AGGREGATING << 16 */
const bit<18> PROGRESS_STARTED      = 0x30001;   /* AGGREGATING_BASE | 1: a first contribution */
const bit<18> PROGRESS_STARTED_DONE = 0x10001;   /* COMPLETE_BASE | 1: one that completes */
const bit<18> PROGRESS_STARTED_TAKEN = 0x20001;  /* TAKEN_BASE | 1: one that finds the pool busy */
const bit<32> ADD_AND_COMPLETE  = 0xFFFE0001;       /* count + 1, AGGREGATING -> COMPLETE */
const bit<18> DUP_COMPLETE      = 0x20000;          /* less: AGGREGATING -> COMPLETE */
const bit<18> TAKE_OVER         = 0x10000;          /* less: AGGREGATING -> TAKEN */

/* What a packet does to the lanes (lanes.p4). */
const bit<3> LANES_KEEP  = 0;
const bit<3> LANES_STORE = 1;   /* a stored HELPER_RESULT: the lanes and the gate take it, if
                                 * they still hold its aggregation */
const bit<3> LANES_GATED = 2;   /* a contribution: the gate says store, add or read (lanes.p4) */
const bit<3> LANES_LOAD  = 3;   /* the low words into the packet */
const bit<3> LANES_HIGH  = 4;   /* the high words into the packet */
const bit<3> LANES_CLEAR = 5;   /* a clear: lane_holder clears, the lanes store the request's */
const bit<3> LANES_ADD   = 6;   /* what the gate chose for a contribution: add (lanes.p4) */
const bit<3> LANES_REPAIR = 7;  /* a counted worker's retransmission to a complete chunk: its
                                 * lanes again, if the cells hold its aggregation and lack them */

/* How a packet is answered. */
const bit<4> RESPOND_NONE          = 0;
const bit<4> RESPOND_ABSORB        = 1;
const bit<4> RESPOND_BOUNCE        = 2;
const bit<4> RESPOND_COPY          = 3;
const bit<4> RESPOND_RESULT        = 4;
const bit<4> RESPOND_PARTIAL       = 5;
const bit<4> RESPOND_HELPER_RESULT = 6;
const bit<4> RESPOND_REPORT        = 7;
const bit<4> RESPOND_PENDING       = 8;

#define MAX_WORKER_ENTRIES 8192

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;

/* Who holds a pool aggregator's lanes (docs/protocol.md §4.6), as a pair so that a stateful ALU
 * asks "is it this aggregator" and "is it held" in its two comparisons: hi is the v1model
 * program's lane_holder (the holding aggregator's index + 1, with POOL_HELD while its chunk
 * aggregates; 0: free), lo the holding aggregator's index (0 when free: aggregator 0 is slot
 * 0 of a job, always its own, so never a holder). */
struct holder_pair_t {
    bit<16> lo;
    bit<16> hi;
}

/* Pass 1 -> pass 2: the resubmit data (64 bits on Tofino 1). Each field has its own byte(s),
 * so that each container it lands in has one source. Pass 2 looks the job up again (its index
 * and group), so the data holds only what pass 1 decided and where the lanes are. */
header resubmit_h {
    bit<5>      _pad4;
    bit<3>      lane_op;
    bit<4>      _pad0;
    bit<4>      response;
    bit<3>      _pad3;
    agg_index_t lane_index;  /* where its lanes are: the aggregator's, or the pool's (§4.6) */
    bit<32>     gate_id;     /* the aggregation: generation << 16 | aggregator (lanes.p4's gate) */
}

/* Pass 2 -> pass 3: ahead of the frame on the recirculation port. */
header pass_h {
    bit<4>      response;
    bit<4>      _pad0;
    bit<8>      job_index;
    bit<16>     job_group;   /* the jobs table writes it here in every pass: PHV is short */
    bit<7>      _pad1;
    PortId_t    port;        /* the reply's port: the sender's, or the CPU port */
    bit<3>      _pad3;
    agg_index_t lane_index;  /* as in resubmit_h */
}

/* Ingress -> egress, filled in one action at the end of ingress from the metadata of the same
 * names (the TNA idiom for bridged metadata). Flexible: the compiler lays the fields out, so
 * that each can come from its metadata field. */
@flexible
header bridge_h {
    bit<1>   to_job;         /* a multicast copy for a worker of the job (rid = worker) */
    bit<1>   flood;          /* a copy of a flooded frame */
    bit<1>   to_worker;      /* a HELPER_DATA for its helper (the SA-ATP header's reason) */
    bit<1>   transit;
    bit<1>   to_cpu;
    bit<1>   to_loop;        /* on its way to pass 3 */
    bit<1>   sa;             /* ingress parsed an SA-ATP header in this frame */
    bit<8>   job_index;
    PortId_t ingress_port;
}

@controller_header("packet_out")
header packet_out_h {
    bit<8>  opcode;
    bit<32> aggregator;
}

@controller_header("packet_in")
header packet_in_h {     /* laid out as the v1model program's, for the same controller code */
    PortId_t ingress_port;
    bit<7>   _pad;
    bit<8>   opcode;
    bit<32>  aggregator;
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

struct headers_t {
    bridge_h     bridge;
    pass_h       pass;
    packet_out_h packet_out;
    packet_in_h  packet_in;
    ethernet_h   ethernet;
    ipv4_h       ipv4;
    udp_h        udp;
    sa_atp_h     sa;
    /* Pass 1 parses the lanes only so that a short frame is an error; passes 2 and 3 add them
     * and return them. One header for all three passes: the 64 words take normal PHV
     * containers in any case (the registers write them), so a header of pass 1's own would
     * only add to them. */
    lanes_h      lanes;
}

struct ingress_metadata_t {
    /* bridged to egress (bridge_h), before the aggregator; to_worker, flood, to_job, to_cpu
     * and to_loop are written into the bridge header by the tables that decide them */
    bit<1>      sa_valid;
    bit<1>      udp_valid;
    bit<1>      port_frame;  /* pass 1 of a frame from a port */
    resubmit_h  resub;
    bit<2>      pass;
    bool        bad_version;
    bool        checksum_err;
    bit<4>      drop_reason;
    bit<1>      spoofed;     /* the source guard's finding (admit turns it into a drop) */
    bit<32>     loss_left;   /* the drop simulator's: not 0 when the packet is lost */
    /* admission */
    bit<1>      job_known;
    bit<8>      job_index;
    bit<16>     slot_base;
    bit<16>     num_slots;
    bit<16>     own_slots;   /* then own_slots |-| slot: 0 for a borrowed slot, in every pass */
    bit<16>     pool_base;   /* the pool's first slot; then less own_slots, then plus the slot:
                              * the pool's pair a borrowed slot sums in (§4.6) */
    bit<8>      fan_in;
    bit<32>     expected;
    bit<1>      inband_fanin;
    bit<1>      registered;  /* the workers table knows the worker on its port and addresses */
    bit<1>      expected_worker;   /* its bit is set in the job's expected set */
    bit<1>      transit;
    bit<1>      helper_known;
    PortId_t    helper_port;
    bit<1>      use_l2;      /* forwarded like any other traffic */
    bit<1>      l2_flood;    /* dmac knows no port for the destination */
    PortId_t    l2_port;     /* the port it knows */
    /* the aggregator */
    bit<3>      kind;
    bit<12>     abs_slot;    /* slot_base + slot: the aggregator pair, before the set bit */
    bit<1>      set_bit;     /* the packet's SET flag (a request's aggregator bit 0) */
    agg_index_t index;           /* abs_slot ++ SET, from the identity hash (sa_atp_tna.p4) */
    bit<1>      lanes_away;      /* lane_holder: the lanes are not this aggregator's (§4.6) */
    agg_index_t lane_at;         /* and where they are: the pass's lane index, or a request's */
    bit<32>     gate_bits;       /* the worker's bit (the parser's, from its id) or a
                                  * HELPER_RESULT's bitmap, which pass 1 sums and the gate ORs
                                  * in; in pass 2, the gate's answer (the workers whose lanes
                                  * were in), then that XOR contributors (respond.p4). One
                                  * field for the three: PHV is short */
    bit<18>     progress_in;   /* a progress word to write, or what progress_check subtracts */
    bit<32>     limit_add;
    bit<8>      was_valid;
    bit<2>      run_class;
    bit<2>      situation;
    bit<8>      gen;
    bit<1>      scale_ok;
    bit<1>      is_member;
    bit<32>     old_progress;
    bit<8>      rd_count;    /* old_progress[7:0], whole, for the answer's count */
    bit<1>      at_limit;    /* old_progress == limit_add: a duplicate does not complete */
    bit<16>     rd_scale;
    /* the answer */
    bit<3>      lane_op;
    bit<4>      response;
    bit<8>      bounce_reason;
    PortId_t    loop_port;
}

struct egress_metadata_t {
    bit<4>  drop_reason;
    bit<32> loss_left;       /* the drop simulator's: not 0 when the copy is lost */
    bit<8>  dest_worker;     /* the worker a copy goes to: egress_rid, or the helper */
}

#endif
