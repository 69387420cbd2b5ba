/* SA-ATP: straggler-aware in-network gradient aggregation, v1model (bmv2) program.
 * docs/protocol.md is the contract; docs/p4-program.md walks through the controls. */
#include <core.p4>
#include <v1model.p4>

#include "include/constants.p4"
#include "include/headers.p4"
#include "parser.p4"
#include "source_guard.p4"
#include "forwarding.p4"
#include "job_admission.p4"
#include "drop_simulator.p4"
#include "aggregator.p4"
#include "replica_rewrite.p4"
#include "packet_stats.p4"

control SaAtpIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    SourceGuard() source_guard;
    JobAdmission() admission;
    DropSimulator() drop_sim;
    Aggregator() aggregator;
    L2Forwarding() l2;
    PacketStats(true) stats;

    apply {
        bit<4> rx_op = 0;
        bool use_l2 = false;
        if (hdr.sa.isValid() && !hdr.packet_out.isValid()) {
            rx_op = hdr.sa.op;
        }

        if (hdr.packet_out.isValid()) {
            /* A management request (counted by the aggregator, not here). */
            bool known_op = hdr.packet_out.opcode == MGMT_READ_AGGREGATOR
                            || hdr.packet_out.opcode == MGMT_CLEAR_AGGREGATOR;
            if (known_op && sm.parser_error == error.NoError && hdr.lanes.isValid()
                    && hdr.packet_out.aggregator < NUM_AGGREGATORS) {
                aggregator.apply(hdr, meta, sm);
            } else {
                mark_to_drop(sm);
            }
            return;
        }
        if (sm.parser_error != error.NoError || sm.checksum_error == 1) {
            meta.drop_reason = DROP_MALFORMED;
        } else {
            source_guard.apply(hdr, meta);
        }
        if (meta.drop_reason != DROP_NONE) {
            /* malformed or spoofed: counted and dropped below */
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
                        /* On to its helper (admission chose the port), from the address it
                         * was sent to: the switch's. */
                        hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
                        hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
                        hdr.udp.src_port = SA_ATP_UDP_PORT;
                        hdr.udp.checksum = 0;
                    } else {
                        aggregator.apply(hdr, meta, sm);
                    }
                }
            }
        }

        if (use_l2) {
            l2.apply(hdr, meta, sm);
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
    PacketStats(false) stats;

    apply {
        if (sm.egress_port == CPU_PORT) {
            return;   /* management reply: no rewrite, no loss, not counted */
        }
        bool to_worker = meta.to_worker == 1;   /* a HELPER_DATA on its way to its helper */
        if (sm.instance_type == INSTANCE_TYPE_REPLICATION) {
            if (meta.to_job == 1) {
                meta.dest_worker = (bit<8>)sm.egress_rid;
                to_worker = true;
            } else if (sm.egress_port == sm.ingress_port) {
                mark_to_drop(sm);   /* never flood a frame back out of the port it came in on */
                return;
            }
        }
        if (to_worker) {
            replica_rewrite.apply(hdr, meta);
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
