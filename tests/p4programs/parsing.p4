/* Executor test program: parser states, select (plain, masked, multi-field, lookahead),
 * advance, verify / parser errors, unaligned and signed header fields, checksum verification
 * and update (with payload), deparser order. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }

/* 13 bytes of fields that are not byte aligned, one signed, one 48-bit. */
header probe_t {
    bit<3>  kind;
    bit<5>  flags;
    bit<12> vid;
    bit<4>  pcp;
    int<8>  delta;
    bit<24> tag;
    bit<48> stamp;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

header udp_t { bit<16> srcPort; bit<16> dstPort; bit<16> length; bit<16> checksum; }

/* Emitted first: what the parser saw. */
header report_t {
    bit<8>  error_code;
    bit<8>  checksum_error;
    bit<16> peek;
    bit<8>  path;
}

struct headers_t {
    report_t   report;
    ethernet_t ethernet;
    probe_t    probe;
    ipv4_t     ipv4;
    udp_t      udp;
}

struct metadata_t { bit<16> peek; bit<8> path; }

error { BadVersion, BadTag }

parser ParserImpl(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        meta.path = 1;
        transition select(hdr.ethernet.etherType) {
            0x0800: parse_ipv4;
            0x88B0 &&& 0xFFF0: parse_probe;
            default: accept;
        }
    }
    state parse_probe {
        meta.peek = pkt.lookahead<bit<16>>();
        pkt.extract(hdr.probe);
        verify(hdr.probe.tag != 0xBADBAD, error.BadTag);
        meta.path = 2;
        transition select(hdr.probe.kind, hdr.probe.vid) {
            (1, _): parse_ipv4;
            (2, 0x0AB): skip_four;
            (3, 0x800 &&& 0x800): check_next;
            default: accept;
        }
    }
    state skip_four {
        pkt.advance(32);
        meta.path = 3;
        transition parse_ipv4;
    }
    state check_next {
        meta.path = 4;
        transition select(pkt.lookahead<bit<4>>()) {
            4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        verify(hdr.ipv4.version == 4, error.BadVersion);
        transition select(hdr.ipv4.protocol) {
            17: parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        transition accept;
    }
}

control VerifyChecksumImpl(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control IngressImpl(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.report.setValid();
        if (sm.parser_error == error.NoError) {
            hdr.report.error_code = 0;
        } else if (sm.parser_error == error.PacketTooShort) {
            hdr.report.error_code = 1;
        } else if (sm.parser_error == error.BadVersion) {
            hdr.report.error_code = 2;
        } else if (sm.parser_error == error.BadTag) {
            hdr.report.error_code = 3;
        } else {
            hdr.report.error_code = 0xFF;
        }
        hdr.report.checksum_error = (bit<8>) sm.checksum_error;
        hdr.report.peek = meta.peek;
        hdr.report.path = meta.path;
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        }
        if (hdr.probe.isValid()) {
            hdr.probe.delta = hdr.probe.delta - 3;
            hdr.probe.vid = hdr.probe.vid + 1;
            hdr.probe.stamp = hdr.probe.stamp + 1;
            hdr.probe.flags = hdr.probe.flags ^ 5w0x1F;
        }
        sm.egress_spec = 2;
    }
}

control EgressImpl(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    apply { }
}

control ComputeChecksumImpl(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
        update_checksum_with_payload(hdr.udp.isValid() && hdr.ipv4.isValid(),
            { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, 8w0, hdr.ipv4.protocol, hdr.udp.length,
              hdr.udp.srcPort, hdr.udp.dstPort, hdr.udp.length, 16w0 },
            hdr.udp.checksum, HashAlgorithm.csum16);
    }
}

control DeparserImpl(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.report);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.probe);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
    }
}

V1Switch(ParserImpl(), VerifyChecksumImpl(), IngressImpl(), EgressImpl(),
         ComputeChecksumImpl(), DeparserImpl()) main;
