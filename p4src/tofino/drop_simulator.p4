/* Loss injection for experiments (docs/protocol.md §9), instantiated at ingress and at egress:
 * a packet is lost when a 32-bit random number falls below its port's threshold, i.e. when
 * something is left of the threshold less the number (saturating): `left` is not 0. */
#ifndef SA_ATP_TNA_DROP_SIMULATOR_P4
#define SA_ATP_TNA_DROP_SIMULATOR_P4

control DropSimulator(in PortId_t port, inout bit<32> left) {
    Random<bit<32>>() rng;
    action set_loss(bit<32> loss_threshold) {
        left = loss_threshold;
    }

    table loss {
        key = { port: exact; }
        actions = { set_loss; }
        default_action = set_loss(0);
        size = 512;
    }

    apply {
        bit<32> r = rng.get();
        loss.apply();
        left = left |-| r;   /* r < threshold when something is left */
    }
}

#endif
