/* Loss injection for experiments (docs/protocol.md §9), instantiated at ingress and at egress:
 * a packet is lost when a 32-bit random number falls below its port's threshold. */
#ifndef SA_ATP_TNA_DROP_SIMULATOR_P4
#define SA_ATP_TNA_DROP_SIMULATOR_P4

control DropSimulator(in PortId_t port, out bool dropped) {
    Random<bit<32>>() rng;
    bit<32> threshold = 0;

    action set_loss(bit<32> loss_threshold) {
        threshold = loss_threshold;
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
        /* r < threshold when something is left of threshold - r (saturating) */
        threshold = threshold |-| r;
        dropped = threshold != 0;
    }
}

#endif
