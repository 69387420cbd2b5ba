/* L2 forwarding for everything that is not aggregated: ARP, the TCP traffic of
 * torch.distributed, and HELPER_DATA packets on their way to a helper. */
#ifndef SA_ATP_FORWARDING_P4
#define SA_ATP_FORWARDING_P4

control L2Forwarding(in headers_t hdr, inout standard_metadata_t sm) {
    action forward(bit<9> port) {
        sm.egress_spec = port;
    }

    action flood() {
        sm.mcast_grp = FLOOD_GROUP;
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
