/* SA-ATP protocol constants. docs/protocol.md is the contract; protocol/constants.py mirrors
 * these values and tests/test_protocol_constants.py checks that the two agree. */
#ifndef SA_ATP_CONSTANTS_P4
#define SA_ATP_CONSTANTS_P4

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8>  IP_PROTO_UDP   = 17;
const bit<16> SA_ATP_UDP_PORT = 0x5A7A;   /* 23162 */
const bit<4>  SA_ATP_VERSION = 2;

/* Packet types (hdr.sa.op). */
const bit<4> OP_DATA          = 1;
const bit<4> OP_RESULT        = 2;
const bit<4> OP_BOUNCE        = 3;
const bit<4> OP_TAKEOVER      = 4;
const bit<4> OP_PARTIAL       = 5;
const bit<4> OP_HELPER_DATA   = 6;
const bit<4> OP_HELPER_RESULT = 7;

/* Flags (hdr.sa.flags). */
const bit<8> FLAG_SET    = 0x01;
const bit<8> FLAG_RETX   = 0x02;
const bit<8> FLAG_COPY   = 0x04;
const bit<8> FLAG_HELPER = 0x08;
const bit<8> FLAG_PROBE  = 0x10;   /* DATA that asks about a chunk without contributing */

/* Bounce reasons (hdr.sa.reason). */
const bit<8> BOUNCE_PENDING        = 1;
const bit<8> BOUNCE_STALE          = 2;
const bit<8> BOUNCE_TAKEN          = 3;
const bit<8> BOUNCE_NOT_HELD       = 4;
const bit<8> BOUNCE_SCALE_MISMATCH = 5;
const bit<8> BOUNCE_OLD_RUN        = 6;   /* the slot holds a newer run of the job */

/* Holder of a pool aggregator's lanes (lane_holder register): 0 = free, else the holding
 * aggregator's index + 1, with POOL_HELD while its chunk is aggregating. */
const bit<16> POOL_HELD = 0x8000;

/* Aggregator states (slot_state register). */
const bit<8> SLOT_EMPTY       = 0;
const bit<8> SLOT_AGGREGATING = 1;
const bit<8> SLOT_COMPLETE    = 2;
const bit<8> SLOT_TAKEN       = 3;

/* Aggregator: what a packet does to the lanes, and how it is answered (p4src/aggregator.p4). */
const bit<3> LANES_KEEP  = 0;
const bit<3> LANES_STORE = 1;   /* the packet's lanes become the sum */
const bit<3> LANES_ADD   = 2;   /* add the packet's lanes to the sum */
const bit<3> LANES_LOAD  = 3;   /* copy the sum into the packet */
const bit<3> LANES_CLEAR = 4;   /* zero the sum */

const bit<4> RESPOND_NONE          = 0;
const bit<4> RESPOND_ABSORB        = 1;   /* summed, nothing to send */
const bit<4> RESPOND_BOUNCE        = 2;
const bit<4> RESPOND_COPY          = 3;   /* unicast copy of the stored result */
const bit<4> RESPOND_RESULT        = 4;   /* multicast the completed result */
const bit<4> RESPOND_PARTIAL       = 5;   /* multicast the partial to the helper and the job */
const bit<4> RESPOND_HELPER_RESULT = 6;   /* multicast a helper's result */
const bit<4> RESPOND_CONTROLLER    = 7;   /* management reply to the CPU port */
const bit<4> RESPOND_PENDING       = 8;   /* BOUNCE(PENDING) to the sender and the missing */

/* Drop reasons (index into the drops counters, per job). */
const bit<4> DROP_NONE         = 0;
const bit<4> DROP_MALFORMED    = 1;
const bit<4> DROP_BAD_OP       = 2;
const bit<4> DROP_UNKNOWN_JOB  = 3;
const bit<4> DROP_UNREGISTERED = 4;
const bit<4> DROP_SLOT_RANGE   = 5;
const bit<4> DROP_NOT_EXPECTED = 6;
const bit<4> DROP_SIM          = 7;   /* the drop simulator */
const bit<4> DROP_NO_REPLICA   = 8;   /* a multicast replica with no address entry */
const bit<4> DROP_SPOOFED      = 9;   /* claims the switch's own address as its source */
const bit<4> DROP_NO_FLOOD     = 10;  /* SA-ATP's port to an unknown destination: never flooded */

/* Sizes. */
#define NUM_SLOTS 4096                 /* slots in the pool; each is a pair of aggregators */
#define NUM_AGGREGATORS 8192           /* 2 * NUM_SLOTS: shadow sets 0 and 1 */
#define MAX_JOBS 256                   /* job indices 1..255; 0 = no job */
#define STATS_SIZE 4096                /* MAX_JOBS * 16 (op or drop reason) */
#define MAX_WORKER_ENTRIES 8192

/* Multicast group that floods non-SA-ATP frames with an unknown destination. Job groups are
 * allocated by the controller above it. */
const bit<16> FLOOD_GROUP = 1;

/* The controller's port (simple_switch_grpc --cpu-port). Frames from it carry a packet_out
 * header with a management op; frames to it carry a packet_in header. */
const bit<9> CPU_PORT = 255;

/* Management ops (hdr.packet_out.opcode): the controller reads and clears aggregators in band,
 * because P4Runtime register access is not implemented by bmv2's server (PI). */
const bit<8> MGMT_READ_AGGREGATOR  = 1;
const bit<8> MGMT_CLEAR_AGGREGATOR = 2;
#define MGMT_OPCODES 3                 /* size of the management counter: opcodes 0..2 */

/* v1model instance_type of a multicast replica. */
const bit<32> INSTANCE_TYPE_REPLICATION = 5;

#endif
