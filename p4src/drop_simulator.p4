/* Loss injection for experiments (these machines have no netem), as in SwitchML: an SA-ATP
 * packet is dropped with the probability configured for its port. Instantiated once at ingress
 * and once at egress. */
#ifndef SA_ATP_DROP_SIMULATOR_P4
#define SA_ATP_DROP_SIMULATOR_P4

control DropSimulator(in bit<9> port, out bool dropped) {
    bit<32> threshold = 0;

    /* threshold = p * 2^32 for drop probability p. */
    action set_loss(bit<32> loss_threshold) {
        threshold = loss_threshold;
    }

    /* Per-port loss; the default entry covers every port without one. */
    table loss {
        key = { port: exact; }
        actions = { set_loss; }
        default_action = set_loss(0);
        size = 512;
    }

    apply {
        dropped = false;
        loss.apply();
        if (threshold != 0) {
            bit<32> r;
            random(r, 32w0, 32w0xFFFFFFFF);
            if (r < threshold) {
                dropped = true;
            }
        }
    }
}

#endif
