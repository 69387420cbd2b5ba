/* Parsers and deparsers. Ingress sees three kinds of packet: from a port (pass 1: the lanes are
 * parsed, untouched, which proves that the frame is whole), resubmitted (pass 2: the lane
 * registers use them) and recirculated from a loop port (pass 3: frames pass 2 wrote, behind a
 * pass header). The controller names the CPU and loop ports in
 * the parser value sets. Egress never parses the lanes: they travel as payload. */
#ifndef SA_ATP_TNA_PARSER_P4
#define SA_ATP_TNA_PARSER_P4

parser SaAtpIngressParser(packet_in pkt, out headers_t hdr, out ingress_metadata_t meta,
                          out ingress_intrinsic_metadata_t ig_intr_md) {
    Checksum() ipv4_checksum;
    value_set<PortId_t>(4) cpu_port;
    value_set<PortId_t>(16) loop_ports;

    state start {
        pkt.extract(ig_intr_md);
        meta.pass = PASS_STATE;
        meta.bad_version = false;
        transition select(ig_intr_md.resubmit_flag) {
            1: parse_resubmit;
            default: parse_port_metadata;
        }
    }

    /* Pass 2. Each path assigns the lanes' operation and address once: Tofino's parser ORs a
     * second write into a field rather than replacing it. */
    state parse_resubmit {
        transition select(ig_intr_md.ingress_port) {
            cpu_port: parse_resubmitted_request;
            default: parse_resubmitted_frame;
        }
    }

    state parse_resubmitted_frame {
        pkt.extract(meta.resub);   /* the lanes' operation too: meta.resub.lane_op */
        meta.pass = PASS_LANES;
        meta.lane_at = meta.resub.lane_index;
        transition parse_ethernet;
    }

    /* pass 1 resubmits a request with nothing to say: its lanes' operation is the request's */
    state parse_resubmitted_request {
        pkt.advance(64);
        meta.pass = PASS_LANES;
        transition parse_request;
    }

    /* A management request. The lanes take their operation and address from the parser
     * (sa_atp_tna.p4), so the parser, not the apply block, refuses an aggregator out of range
     * here; the lane tables refuse a frame whose lanes are not whole. A clear stores the
     * request's lanes, which the controller sends as zeros (docs/tofino.md, 'Management'). */
    state parse_request {
        pkt.extract(hdr.packet_out);
        meta.lane_at = hdr.packet_out.aggregator[12:0];
        transition select(hdr.packet_out.opcode, hdr.packet_out.aggregator[31:13]) {
            (MGMT_READ_AGGREGATOR, 0): request_read;
            (MGMT_CLEAR_AGGREGATOR, 0): request_clear;
            default: parse_ethernet;
        }
    }

    state request_read {
        meta.resub.lane_op = LANES_LOAD;
        transition parse_ethernet;
    }

    state request_clear {
        meta.resub.lane_op = LANES_CLEAR;
        transition parse_ethernet;
    }

    state parse_port_metadata {
        pkt.advance(PORT_METADATA_SIZE);
        transition select(ig_intr_md.ingress_port) {
            cpu_port: parse_packet_out;
            loop_ports: parse_pass;
            default: parse_ethernet;
        }
    }

    state parse_packet_out {
        pkt.extract(hdr.packet_out);
        transition parse_ethernet;
    }

    /* Pass 3: a frame pass 2 wrote, whole and well formed. */
    state parse_pass {
        pkt.extract(hdr.pass);
        meta.pass = PASS_HIGH;
        meta.resub.lane_op = LANES_HIGH;
        meta.lane_at = hdr.pass.lane_index;
        transition select(hdr.pass.response) {
            RESPOND_REPORT: parse_high_report;
            default: parse_high;
        }
    }

    state parse_high_report {
        pkt.extract(hdr.packet_in);
        transition parse_high;
    }

    state parse_high {
        pkt.extract(hdr.ethernet);
        pkt.extract(hdr.ipv4);
        pkt.extract(hdr.udp);
        pkt.extract(hdr.sa);
        pkt.extract(hdr.lanes);
        meta.udp_valid = 1;
        meta.sa_valid = 1;
        transition accept;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        ipv4_checksum.add(hdr.ipv4);
        meta.checksum_err = ipv4_checksum.verify();   /* on Tofino: true on a mismatch */
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, IP_PROTO_UDP): parse_udp;   /* no options, first fragment */
            default: accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
        /* Header validity as metadata, set here rather than by a table: admission keys on it
         * in the first stages, and a table setting it would delay the whole state chain. */
        meta.udp_valid = 1;
        transition select(hdr.udp.dst_port) {
            SA_ATP_UDP_PORT: parse_sa_atp;
            default: accept;
        }
    }

    /* What the lanes' gate ORs in (lanes.p4), from the header alone: a stateful ALU cannot
     * shift, and the gate acts in stage 0, before any action; so one state per worker id sets
     * its bit, and a HELPER_RESULT gives its bitmap. */
    state parse_sa_atp {
        pkt.extract(hdr.sa);
        meta.sa_valid = 1;
        transition select(hdr.sa.version, hdr.sa.op, hdr.sa.worker[4:0]) {
            (SA_ATP_VERSION, OP_HELPER_RESULT, _): gate_helper;
            (SA_ATP_VERSION, _, 0): gate_w00;
            (SA_ATP_VERSION, _, 1): gate_w01;
            (SA_ATP_VERSION, _, 2): gate_w02;
            (SA_ATP_VERSION, _, 3): gate_w03;
            (SA_ATP_VERSION, _, 4): gate_w04;
            (SA_ATP_VERSION, _, 5): gate_w05;
            (SA_ATP_VERSION, _, 6): gate_w06;
            (SA_ATP_VERSION, _, 7): gate_w07;
            (SA_ATP_VERSION, _, 8): gate_w08;
            (SA_ATP_VERSION, _, 9): gate_w09;
            (SA_ATP_VERSION, _, 10): gate_w10;
            (SA_ATP_VERSION, _, 11): gate_w11;
            (SA_ATP_VERSION, _, 12): gate_w12;
            (SA_ATP_VERSION, _, 13): gate_w13;
            (SA_ATP_VERSION, _, 14): gate_w14;
            (SA_ATP_VERSION, _, 15): gate_w15;
            (SA_ATP_VERSION, _, 16): gate_w16;
            (SA_ATP_VERSION, _, 17): gate_w17;
            (SA_ATP_VERSION, _, 18): gate_w18;
            (SA_ATP_VERSION, _, 19): gate_w19;
            (SA_ATP_VERSION, _, 20): gate_w20;
            (SA_ATP_VERSION, _, 21): gate_w21;
            (SA_ATP_VERSION, _, 22): gate_w22;
            (SA_ATP_VERSION, _, 23): gate_w23;
            (SA_ATP_VERSION, _, 24): gate_w24;
            (SA_ATP_VERSION, _, 25): gate_w25;
            (SA_ATP_VERSION, _, 26): gate_w26;
            (SA_ATP_VERSION, _, 27): gate_w27;
            (SA_ATP_VERSION, _, 28): gate_w28;
            (SA_ATP_VERSION, _, 29): gate_w29;
            (SA_ATP_VERSION, _, 30): gate_w30;
            (SA_ATP_VERSION, _, 31): gate_w31;
            default: unsupported_version;
        }
    }

    state gate_helper {
        meta.gate_bits = hdr.sa.bitmap;
        transition parse_lanes;
    }

    state gate_w00 { meta.gate_bits = 32w0x00000001; transition parse_lanes; }
    state gate_w01 { meta.gate_bits = 32w0x00000002; transition parse_lanes; }
    state gate_w02 { meta.gate_bits = 32w0x00000004; transition parse_lanes; }
    state gate_w03 { meta.gate_bits = 32w0x00000008; transition parse_lanes; }
    state gate_w04 { meta.gate_bits = 32w0x00000010; transition parse_lanes; }
    state gate_w05 { meta.gate_bits = 32w0x00000020; transition parse_lanes; }
    state gate_w06 { meta.gate_bits = 32w0x00000040; transition parse_lanes; }
    state gate_w07 { meta.gate_bits = 32w0x00000080; transition parse_lanes; }
    state gate_w08 { meta.gate_bits = 32w0x00000100; transition parse_lanes; }
    state gate_w09 { meta.gate_bits = 32w0x00000200; transition parse_lanes; }
    state gate_w10 { meta.gate_bits = 32w0x00000400; transition parse_lanes; }
    state gate_w11 { meta.gate_bits = 32w0x00000800; transition parse_lanes; }
    state gate_w12 { meta.gate_bits = 32w0x00001000; transition parse_lanes; }
    state gate_w13 { meta.gate_bits = 32w0x00002000; transition parse_lanes; }
    state gate_w14 { meta.gate_bits = 32w0x00004000; transition parse_lanes; }
    state gate_w15 { meta.gate_bits = 32w0x00008000; transition parse_lanes; }
    state gate_w16 { meta.gate_bits = 32w0x00010000; transition parse_lanes; }
    state gate_w17 { meta.gate_bits = 32w0x00020000; transition parse_lanes; }
    state gate_w18 { meta.gate_bits = 32w0x00040000; transition parse_lanes; }
    state gate_w19 { meta.gate_bits = 32w0x00080000; transition parse_lanes; }
    state gate_w20 { meta.gate_bits = 32w0x00100000; transition parse_lanes; }
    state gate_w21 { meta.gate_bits = 32w0x00200000; transition parse_lanes; }
    state gate_w22 { meta.gate_bits = 32w0x00400000; transition parse_lanes; }
    state gate_w23 { meta.gate_bits = 32w0x00800000; transition parse_lanes; }
    state gate_w24 { meta.gate_bits = 32w0x01000000; transition parse_lanes; }
    state gate_w25 { meta.gate_bits = 32w0x02000000; transition parse_lanes; }
    state gate_w26 { meta.gate_bits = 32w0x04000000; transition parse_lanes; }
    state gate_w27 { meta.gate_bits = 32w0x08000000; transition parse_lanes; }
    state gate_w28 { meta.gate_bits = 32w0x10000000; transition parse_lanes; }
    state gate_w29 { meta.gate_bits = 32w0x20000000; transition parse_lanes; }
    state gate_w30 { meta.gate_bits = 32w0x40000000; transition parse_lanes; }
    state gate_w31 { meta.gate_bits = 32w0x80000000; transition parse_lanes; }

    state unsupported_version {
        meta.bad_version = true;
        transition accept;
    }

    state parse_lanes {
        pkt.extract(hdr.lanes);
        transition accept;
    }
}

control SaAtpIngressDeparser(packet_out pkt, inout headers_t hdr, in ingress_metadata_t meta,
                             in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Resubmit() resubmit;

    apply {
        if (ig_dprsr_md.resubmit_type == 1) {
            resubmit.emit(meta.resub);
        }
        pkt.emit(hdr.bridge);
        pkt.emit(hdr.pass);
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.sa);
        pkt.emit(hdr.lanes);
    }
}

parser SaAtpEgressParser(packet_in pkt, out headers_t hdr, out egress_metadata_t meta,
                         out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        pkt.extract(hdr.bridge);
        meta.drop_reason = DROP_NONE;
        meta.dest_worker = 0;
        transition select(hdr.bridge.to_loop, hdr.bridge.sa, hdr.bridge.to_cpu) {
            (1, _, _): accept;          /* on to pass 3: carried as it is */
            (0, 1, 1): parse_packet_in;
            (0, 1, 0): parse_sa_frame;
            default: accept;            /* not SA-ATP: nothing to rewrite */
        }
    }

    state parse_packet_in {
        pkt.extract(hdr.packet_in);
        transition parse_sa_frame;
    }

    /* Ingress parsed an SA-ATP header in this frame, so the headers before it are there. */
    state parse_sa_frame {
        pkt.extract(hdr.ethernet);
        pkt.extract(hdr.ipv4);
        pkt.extract(hdr.udp);
        pkt.extract(hdr.sa);
        transition accept;
    }
}

/* The switch rewrites IPv4 addresses only in SA-ATP packets, so only those get a new checksum. */
control SaAtpEgressDeparser(packet_out pkt, inout headers_t hdr, in egress_metadata_t meta,
                            in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_checksum;

    apply {
        if (hdr.sa.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_checksum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
                hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
                hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr});
        }
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.sa);
    }
}

#endif
