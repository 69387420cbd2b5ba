/* SA-ATP: straggler-aware in-network gradient aggregation, v1model (bmv2) program.
 * docs/protocol.md is the contract; docs/p4-program.md walks through the controls. */
#include <core.p4>
#include <v1model.p4>

#include "include/constants.p4"
#include "include/headers.p4"
#include "parser.p4"
#include "forwarding.p4"
#include "job_admission.p4"
#include "drop_simulator.p4"
#include "aggregator.p4"
#include "replica_rewrite.p4"
#include "packet_stats.p4"

control SaAtpIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    JobAdmission() admission;
    DropSimulator() drop_sim;
    Aggregator() aggregator;
    L2Forwarding() l2;
    PacketStats() stats;

    apply {
        bit<4> rx_op = 0;
        bool use_l2 = false;
        if (hdr.sa.isValid()) {
            rx_op = hdr.sa.op;
        }

        if (sm.parser_error != error.NoError || sm.checksum_error == 1) {
            meta.drop_reason = DROP_MALFORMED;
        } else if (hdr.packet_out.isValid()) {
            if (hdr.lanes.isValid() && hdr.packet_out.aggregator < NUM_AGGREGATORS) {
                aggregator.apply(hdr, meta, sm);   /* management request */
            } else {
                meta.drop_reason = DROP_MALFORMED;
            }
        } else if (!hdr.sa.isValid()) {
            use_l2 = true;
        } else {
            bool host_op = rx_op == OP_DATA || rx_op == OP_TAKEOVER || rx_op == OP_HELPER_DATA
                           || rx_op == OP_HELPER_RESULT;
            admission.apply(hdr, meta, sm, host_op);
            if (meta.transit == 1) {
                use_l2 = true;   /* aggregated by another switch */
            } else {
                if (meta.drop_reason == DROP_NONE) {
                    bool lost;
                    drop_sim.apply(sm.ingress_port, lost);
                    if (lost) {
                        meta.drop_reason = DROP_SIM;
                    }
                }
                if (meta.drop_reason == DROP_NONE) {
                    if (rx_op == OP_HELPER_DATA) {
                        use_l2 = true;
                    } else {
                        aggregator.apply(hdr, meta, sm);
                    }
                }
            }
        }

        if (use_l2) {
            l2.apply(hdr, sm);
        }
        stats.apply(meta.job_index, rx_op, meta.drop_reason);
        if (meta.drop_reason != DROP_NONE) {
            mark_to_drop(sm);
        }
    }
}

control SaAtpEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    ReplicaRewrite() replica_rewrite;
    DropSimulator() drop_sim;
    PacketStats() stats;

    apply {
        if (sm.egress_port == CPU_PORT) {
            return;   /* management reply: no rewrite, no loss, not counted */
        }
        if (sm.instance_type == INSTANCE_TYPE_REPLICATION) {
            if (meta.to_job == 1) {
                replica_rewrite.apply(hdr, meta, sm);
            } else if (sm.egress_port == sm.ingress_port) {
                mark_to_drop(sm);   /* never flood a frame back out of the port it came in on */
            }
        }
        bit<4> tx_op = 0;
        if (hdr.sa.isValid() && meta.transit == 0) {
            tx_op = hdr.sa.op;
            if (meta.drop_reason == DROP_NONE) {
                bool lost;
                drop_sim.apply(sm.egress_port, lost);
                if (lost) {
                    meta.drop_reason = DROP_SIM;
                }
            }
        }
        stats.apply(meta.job_index, tx_op, meta.drop_reason);
        if (meta.drop_reason != DROP_NONE) {
            mark_to_drop(sm);
        }
    }
}

V1Switch(SaAtpParser(), SaAtpVerifyChecksum(), SaAtpIngress(), SaAtpEgress(),
         SaAtpComputeChecksum(), SaAtpDeparser()) main;
