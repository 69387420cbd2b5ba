/* Executor test program: multicast (egress_rid, instance_type), ingress and egress clones with
 * and without preserved metadata, resubmit and recirculate with field lists, mark_to_drop,
 * exit, packet_length across header removal, controller packet I/O (packet_in / packet_out).
 * The mode byte selects the behaviour. */
#include <core.p4>
#include <v1model.p4>

const bit<9> CPU_PORT = 64;

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> pad;
    bit<8> tag;
}

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> pad;
    bit<8> reason;
}

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }

header rep_t {
    bit<8>  mode;
    bit<8>  in_instance;
    bit<8>  eg_instance;
    bit<8>  carry;
    bit<16> rid;
    bit<16> in_port;
    bit<8>  passes;
    bit<8>  marker;
    bit<16> in_len;
    bit<16> eg_len;
}

header extra_t { bit<32> word; }

struct headers_t {
    packet_in_t  packet_in;
    packet_out_t packet_out;
    ethernet_t   ethernet;
    rep_t        rep;
    extra_t      extra;
}

struct metadata_t {
    @field_list(1, 2)
    bit<8> carry;
    @field_list(1)
    bit<8> passes;
    bit<8> scratch;
}

parser ParserImpl(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t sm) {
    state start {
        transition select(sm.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        pkt.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        pkt.extract(hdr.rep);
        transition select(hdr.rep.mode) {
            9: parse_extra;
            default: accept;
        }
    }
    state parse_extra {
        pkt.extract(hdr.extra);
        transition accept;
    }
}

control NoVerify(inout headers_t hdr, inout metadata_t meta) { apply { } }

control IngressImpl(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.packet_out.isValid()) {
            sm.egress_spec = hdr.packet_out.egress_port;
            hdr.rep.carry = hdr.packet_out.tag;
            hdr.packet_out.setInvalid();
            exit;
        }
        hdr.rep.in_instance = (bit<8>) sm.instance_type;
        hdr.rep.in_port = (bit<16>) sm.ingress_port;
        hdr.rep.in_len = (bit<16>) sm.packet_length;
        meta.scratch = 0x33;
        sm.egress_spec = 1;
        if (hdr.rep.mode == 1) {
            sm.mcast_grp = 5;
        } else if (hdr.rep.mode == 2) {
            meta.carry = 0xAB;
            clone(CloneType.I2E, 7);
        } else if (hdr.rep.mode == 3) {
            if (meta.passes < 2) {
                meta.passes = meta.passes + 1;
                meta.carry = 0x5A;
                resubmit_preserving_field_list(1);
            }
            hdr.rep.passes = meta.passes;
            hdr.rep.carry = meta.carry;
        } else if (hdr.rep.mode == 4) {
            sm.egress_spec = 3;
        } else if (hdr.rep.mode == 5) {
            sm.mcast_grp = 5;
            mark_to_drop(sm);
        } else if (hdr.rep.mode == 6) {
            sm.egress_spec = 2;
            exit;
        } else if (hdr.rep.mode == 7) {
            sm.egress_spec = 2;
        } else if (hdr.rep.mode == 8) {
            meta.carry = 0xCD;
            clone_preserving_field_list(CloneType.I2E, 7, 2);
        } else if (hdr.rep.mode == 9) {
            hdr.extra.setInvalid();
            sm.egress_spec = 4;
        } else if (hdr.rep.mode == 10) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = sm.ingress_port;
            hdr.packet_in.pad = 0;
            hdr.packet_in.reason = 0x2A;
            sm.egress_spec = CPU_PORT;
        }
        hdr.rep.marker = 0x11;
    }
}

control EgressImpl(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.rep.eg_instance = (bit<8>) sm.instance_type;
        hdr.rep.rid = sm.egress_rid;
        hdr.rep.eg_len = (bit<16>) sm.packet_length;
        if (sm.instance_type != 0 || hdr.rep.mode == 8) {
            hdr.rep.carry = meta.carry;
        }
        if (hdr.rep.mode == 4 && meta.passes == 0) {
            meta.passes = 1;
            meta.carry = 0x77;
            recirculate_preserving_field_list(1);
        }
        if (hdr.rep.mode == 4) {
            hdr.rep.passes = meta.passes;
        }
        if (hdr.rep.mode == 7 && sm.instance_type == 0) {
            meta.carry = 0xEE;
            clone_preserving_field_list(CloneType.E2E, 8, 2);
            hdr.rep.marker = 0x22;
        }
    }
}

control NoCompute(inout headers_t hdr, inout metadata_t meta) { apply { } }

control DeparserImpl(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.rep);
        pkt.emit(hdr.extra);
    }
}

V1Switch(ParserImpl(), NoVerify(), IngressImpl(), EgressImpl(), NoCompute(), DeparserImpl()) main;
