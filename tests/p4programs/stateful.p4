/* Executor test program: an in-network aggregation step over 64 int<32> lanes (one register
 * array per lane, the shape of the SA-ATP data path), an indirect counter, a register used as a
 * packet sequence, every v1model hash algorithm bmv2 implements, random, log_msg and truncate. */
#include <core.p4>
#include <v1model.p4>

#define SLOTS 16

#define LANES8(g) int<32> v##g##0; int<32> v##g##1; int<32> v##g##2; int<32> v##g##3; \
                  int<32> v##g##4; int<32> v##g##5; int<32> v##g##6; int<32> v##g##7;
#define REGS8(g) register<int<32>>(SLOTS) r##g##0; register<int<32>>(SLOTS) r##g##1; \
                 register<int<32>>(SLOTS) r##g##2; register<int<32>>(SLOTS) r##g##3; \
                 register<int<32>>(SLOTS) r##g##4; register<int<32>>(SLOTS) r##g##5; \
                 register<int<32>>(SLOTS) r##g##6; register<int<32>>(SLOTS) r##g##7;
#define ADD(n) r##n.read(t, idx); t = t + hdr.agg.v##n; r##n.write(idx, t); hdr.agg.v##n = t;
#define ADD8(g) ADD(g##0) ADD(g##1) ADD(g##2) ADD(g##3) ADD(g##4) ADD(g##5) ADD(g##6) ADD(g##7)
#define PUT(n) r##n.write(idx, hdr.agg.v##n);
#define PUT8(g) PUT(g##0) PUT(g##1) PUT(g##2) PUT(g##3) PUT(g##4) PUT(g##5) PUT(g##6) PUT(g##7)
#define GET(n) r##n.read(hdr.agg.v##n, idx);
#define GET8(g) GET(g##0) GET(g##1) GET(g##2) GET(g##3) GET(g##4) GET(g##5) GET(g##6) GET(g##7)

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }

header agg_t {
    bit<16> slot;
    bit<8>  op;
    bit<8>  flags;
    LANES8(0) LANES8(1) LANES8(2) LANES8(3) LANES8(4) LANES8(5) LANES8(6) LANES8(7)
}

header info_t {
    bit<16> crc16;
    bit<32> crc32;
    bit<16> csum;
    bit<32> ident;
    bit<16> xor16;
    bit<16> crc16c;
    bit<32> crc32c;
    bit<16> bounded;
    bit<8>  rnd;
    bit<8>  rnd_fixed;
    bit<32> seen;
}

struct headers_t { ethernet_t ethernet; agg_t agg; info_t info; }
struct metadata_t { bit<32> idx; }

parser ParserImpl(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x88B7: parse_agg;
            default: accept;
        }
    }
    state parse_agg {
        pkt.extract(hdr.agg);
        pkt.extract(hdr.info);
        transition accept;
    }
}

control NoVerify(inout headers_t hdr, inout metadata_t meta) { apply { } }

control IngressImpl(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    REGS8(0) REGS8(1) REGS8(2) REGS8(3) REGS8(4) REGS8(5) REGS8(6) REGS8(7)
    register<bit<32>>(1) seen;
    counter(8, CounterType.packets_and_bytes) op_counter;

    action add_lanes() {
        bit<32> idx = meta.idx;
        int<32> t;
        ADD8(0) ADD8(1) ADD8(2) ADD8(3) ADD8(4) ADD8(5) ADD8(6) ADD8(7)
    }
    action put_lanes() {
        bit<32> idx = meta.idx;
        PUT8(0) PUT8(1) PUT8(2) PUT8(3) PUT8(4) PUT8(5) PUT8(6) PUT8(7)
    }
    action get_lanes() {
        bit<32> idx = meta.idx;
        GET8(0) GET8(1) GET8(2) GET8(3) GET8(4) GET8(5) GET8(6) GET8(7)
    }
    table t_op {
        key = { hdr.agg.op: exact; }
        actions = { add_lanes; put_lanes; get_lanes; NoAction; }
        const entries = {
            0: add_lanes();
            1: put_lanes();
            2: get_lanes();
        }
        default_action = NoAction();
    }

    apply {
        if (hdr.agg.isValid()) {
            meta.idx = (bit<32>) hdr.agg.slot;
            t_op.apply();
            op_counter.count((bit<32>) hdr.agg.op);

            bit<32> n;
            seen.read(n, 0);
            hdr.info.seen = n;
            seen.write(0, n + 1);

            hash(hdr.info.crc16, HashAlgorithm.crc16, 16w0,
                 { hdr.agg.slot, hdr.agg.op, hdr.ethernet.src }, 32w65536);
            hash(hdr.info.crc32, HashAlgorithm.crc32, 32w0,
                 { hdr.ethernet.dst, hdr.agg.slot }, 64w4294967296);
            hash(hdr.info.csum, HashAlgorithm.csum16, 16w0,
                 { hdr.ethernet.src, hdr.agg.slot, hdr.agg.flags }, 32w65536);
            hash(hdr.info.ident, HashAlgorithm.identity, 32w0,
                 { hdr.agg.slot, hdr.agg.op, hdr.agg.flags }, 64w4294967296);
            hash(hdr.info.xor16, HashAlgorithm.xor16, 16w0,
                 { hdr.ethernet.src, hdr.agg.op }, 32w65536);
            hash(hdr.info.crc16c, HashAlgorithm.crc16_custom, 16w0,
                 { hdr.agg.slot }, 32w65536);
            hash(hdr.info.crc32c, HashAlgorithm.crc32_custom, 32w0,
                 { hdr.agg.slot }, 64w4294967296);
            hash(hdr.info.bounded, HashAlgorithm.crc16, 16w100,
                 { hdr.agg.slot, hdr.agg.op, hdr.ethernet.src }, 32w1000);
            random(hdr.info.rnd, 8w10, 8w20);
            random(hdr.info.rnd_fixed, 8w7, 8w7);
            log_msg("aggregate slot={} op={}", { hdr.agg.slot, hdr.agg.op });
            if (hdr.agg.op == 3) {
                truncate(32w40);
            }
            sm.egress_spec = 1;
        } else {
            mark_to_drop(sm);
        }
    }
}

control EgressImpl(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    apply { }
}

control NoCompute(inout headers_t hdr, inout metadata_t meta) { apply { } }

control DeparserImpl(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.agg);
        pkt.emit(hdr.info);
    }
}

V1Switch(ParserImpl(), NoVerify(), IngressImpl(), EgressImpl(), NoCompute(), DeparserImpl()) main;
