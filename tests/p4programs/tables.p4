/* Executor test program: tables of every match kind (exact, lpm, ternary, range, optional),
 * priorities, default actions (plain, with parameters, const), const entries, hit/miss and
 * action_run branching, a keyless table, if-statements inside an action, a direct counter. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }

header key_t {
    bit<32> addr;
    bit<16> port;
    bit<8>  proto;
    bit<8>  flags;
    bit<16> tag;
}

header result_t {
    bit<8>  exact_v;
    bit<8>  lpm_v;
    bit<8>  tern_v;
    bit<8>  range_v;
    bit<8>  opt_v;
    bit<8>  const_v;
    bit<8>  hitmiss;
    bit<8>  sw;
    bit<8>  ifpath;
    bit<8>  reserved;
    bit<16> param;
}

struct headers_t { ethernet_t ethernet; key_t key; result_t result; }
struct metadata_t { bit<8> unused; }

parser ParserImpl(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x88B6: parse_key;
            default: accept;
        }
    }
    state parse_key {
        pkt.extract(hdr.key);
        pkt.extract(hdr.result);
        transition accept;
    }
}

control NoVerify(inout headers_t hdr, inout metadata_t meta) { apply { } }

control IngressImpl(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    direct_counter(CounterType.packets_and_bytes) exact_counter;

    action drop() { mark_to_drop(sm); }

    action set_exact(bit<8> v, bit<9> port) { hdr.result.exact_v = v; sm.egress_spec = port; }
    action exact_miss(bit<8> v) { hdr.result.exact_v = v; }
    table t_exact {
        key = { hdr.key.addr: exact; hdr.key.port: exact; }
        actions = { set_exact; exact_miss; }
        default_action = exact_miss(0xEE);
        counters = exact_counter;
        size = 64;
    }

    action set_lpm(bit<8> v) { hdr.result.lpm_v = v; }
    table t_lpm {
        key = { hdr.key.proto: exact; hdr.key.addr: lpm; }
        actions = { set_lpm; NoAction; }
        default_action = NoAction();
    }

    action set_tern(bit<8> v) { hdr.result.tern_v = v; }
    table t_ternary {
        key = { hdr.key.addr: ternary; hdr.key.flags: ternary; }
        actions = { set_tern; }
        default_action = set_tern(0xDD);
    }

    action set_range(bit<8> v) { hdr.result.range_v = v; }
    table t_range {
        key = { hdr.key.port: range; hdr.key.proto: exact; }
        actions = { set_range; NoAction; }
        default_action = NoAction();
    }

    action set_opt(bit<8> v) { hdr.result.opt_v = v; }
    table t_optional {
        key = { hdr.key.proto: optional; hdr.key.flags: optional; }
        actions = { set_opt; NoAction; }
        default_action = NoAction();
    }

    action set_const(bit<8> v) { hdr.result.const_v = v; }
    table t_const {
        key = { hdr.key.flags: ternary; hdr.key.tag: range; }
        actions = { set_const; }
        const default_action = set_const(0x99);
        const entries = {
            (0x01 &&& 0x0F, 0 .. 99): set_const(1);
            (0x01 &&& 0x0F, _): set_const(2);
            (_, 50 .. 60): set_const(3);
            (0xFF, 1000 .. 2000): set_const(4);
        }
    }

    action set_hm(bit<8> v) { hdr.result.hitmiss = v; }
    table t_hitmiss {
        key = { hdr.key.tag: exact; }
        actions = { set_hm; NoAction; }
        default_action = NoAction();
    }

    action a1() { hdr.result.sw = 1; }
    action a2(bit<16> p) { hdr.result.sw = 2; hdr.result.param = p; }
    table t_switch {
        key = { hdr.key.proto: exact; }
        actions = { a1; a2; NoAction; }
        default_action = NoAction();
    }

    action with_if(bit<8> threshold) {
        if (hdr.key.flags > threshold) {
            hdr.result.ifpath = 1;
        } else if (hdr.key.flags == threshold) {
            hdr.result.ifpath = 2;
        } else {
            hdr.result.ifpath = 3;
        }
        hdr.result.param = hdr.result.param + 1;
    }
    table t_if {
        actions = { with_if; }
        default_action = with_if(0x10);
    }

    apply {
        if (hdr.key.isValid()) {
            t_exact.apply();
            t_lpm.apply();
            t_ternary.apply();
            t_range.apply();
            t_optional.apply();
            t_const.apply();
            if (t_hitmiss.apply().hit) {
                hdr.result.hitmiss = hdr.result.hitmiss | 0x80;
            } else {
                hdr.result.hitmiss = 0x0F;
            }
            switch (t_switch.apply().action_run) {
                a1: { hdr.result.reserved = 0xA1; }
                a2: { hdr.result.reserved = 0xA2; }
                default: { hdr.result.reserved = 0xFE; }
            }
            t_if.apply();
        } else {
            drop();
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
        pkt.emit(hdr.key);
        pkt.emit(hdr.result);
    }
}

V1Switch(ParserImpl(), NoVerify(), IngressImpl(), EgressImpl(), NoCompute(), DeparserImpl()) main;
