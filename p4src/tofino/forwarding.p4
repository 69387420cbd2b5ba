/* L2 forwarding for everything that is not aggregated (docs/protocol.md §11): known MACs to
 * their port; unknown destinations flooded, except frames to or from SA-ATP's UDP port.
 * `dmac` is looked up for every frame from a port and only notes its outcome; `l2_sel` (const
 * entries) acts on it for the frames admit forwards. No condition wraps either, so that they
 * sit beside the aggregator's chain in the first stages instead of delaying it (on Tofino 1,
 * a table after an `if` in the program waits for everything inside it, docs/tofino.md). */
#ifndef SA_ATP_TNA_FORWARDING_P4
#define SA_ATP_TNA_FORWARDING_P4

control L2Forwarding(in headers_t hdr, inout ingress_metadata_t meta) {
    action forward(PortId_t port) {
        meta.l2_port = port;
    }

    action flood() {
        meta.l2_flood = 1;
    }

    table dmac {
        key = { hdr.ethernet.dst_addr: exact; }
        actions = { forward; flood; }
        default_action = flood();
        size = 1024;
    }

    apply {
        if (meta.pass == PASS_STATE && !hdr.packet_out.isValid()) {   /* the parser's: S0 */
            dmac.apply();
        }
    }
}

control L2Answer(inout headers_t hdr, inout ingress_metadata_t meta,
                 inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                 inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    action to_port() {
        ig_tm_md.ucast_egress_port = meta.l2_port;
    }
    action to_all() {
        ig_tm_md.mcast_grp_a = FLOOD_GROUP;
        hdr.bridge.flood = 1;
    }
    action no_flood() {
        meta.drop_reason = DROP_NO_FLOOD;
        ig_dprsr_md.drop_ctl = 1;
    }
    table l2_sel {
        key = { meta.use_l2: ternary; meta.l2_flood: ternary; meta.udp_valid: ternary;
                hdr.udp.src_port: ternary; hdr.udp.dst_port: ternary; }
        actions = { to_port; to_all; no_flood; NoAction; }
        const entries = {
            (0, _, _, _, _): NoAction();
            (1, 0, _, _, _): to_port();
            (1, 1, 1, SA_ATP_UDP_PORT, _): no_flood();
            (1, 1, 1, _, SA_ATP_UDP_PORT): no_flood();
            (1, 1, _, _, _): to_all();
        }
        const default_action = NoAction();
    }

    apply {
        l2_sel.apply();
    }
}

#endif
