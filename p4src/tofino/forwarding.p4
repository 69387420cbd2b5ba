/* L2 forwarding for everything that is not aggregated (docs/protocol.md §11): known MACs to
 * their port; unknown destinations flooded, except frames to or from SA-ATP's UDP port. */
#ifndef SA_ATP_TNA_FORWARDING_P4
#define SA_ATP_TNA_FORWARDING_P4

control L2Forwarding(inout headers_t hdr, inout ingress_metadata_t meta,
                     inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    bool flooded = false;

    action forward(PortId_t port) {
        ig_tm_md.ucast_egress_port = port;
    }

    action flood() {
        flooded = true;
    }

    table dmac {
        key = { hdr.ethernet.dst_addr: exact; }
        actions = { forward; flood; }
        default_action = flood();
        size = 1024;
    }

    apply {
        dmac.apply();
        if (flooded) {
            if (hdr.udp.isValid() && (hdr.udp.src_port == SA_ATP_UDP_PORT
                                      || hdr.udp.dst_port == SA_ATP_UDP_PORT)) {
                meta.drop_reason = DROP_NO_FLOOD;
            } else {
                ig_tm_md.mcast_grp_a = FLOOD_GROUP;
                meta.flood = 1;
            }
        }
    }
}

#endif
