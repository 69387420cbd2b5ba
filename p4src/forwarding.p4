/* L2 forwarding for everything that is not aggregated: ARP, the TCP traffic of torch.distributed,
 * and the SA-ATP packets of jobs aggregated by another switch. A frame to or from SA-ATP's UDP port
 * is never flooded: every legitimate one has a known destination, and a flooded one would reach
 * every worker (docs/protocol.md §11). */
#ifndef SA_ATP_FORWARDING_P4
#define SA_ATP_FORWARDING_P4

control L2Forwarding(in headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    action forward(bit<9> port) {
        sm.egress_spec = port;
    }

    action flood() {
        if (hdr.udp.isValid() && (hdr.udp.src_port == SA_ATP_UDP_PORT
                                  || hdr.udp.dst_port == SA_ATP_UDP_PORT)) {
            meta.drop_reason = DROP_NO_FLOOD;
        } else {
            sm.mcast_grp = FLOOD_GROUP;
        }
    }

    /* Destination MAC -> output port, installed by the controller for every known host;
     * unknown destinations (and broadcast) are flooded, pruned at egress. */
    table dmac {
        key = { hdr.ethernet.dst_addr: exact; }
        actions = { forward; flood; }
        default_action = flood();
        size = 1024;
    }

    apply {
        dmac.apply();
    }
}

#endif
