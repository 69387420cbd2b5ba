/* SA-ATP: straggler-aware in-network gradient aggregation, TNA (Tofino) program.
 * docs/protocol.md is the contract, the same as for the v1model program (p4src/sa_atp.p4), and
 * the two agree packet by packet (tests/tofino/). docs/tofino.md explains the layout: three
 * ingress passes (state, resubmitted lanes, recirculated high words), pair registers for the
 * lanes, one RegisterAction per register per pass chosen by a table with const entries. */
#include <core.p4>
#include <tna.p4>

#include "include/protocol.p4"
#include "include/types.p4"
#include "parser.p4"
#include "source_guard.p4"
#include "job_admission.p4"
#include "drop_simulator.p4"
#include "aggregator.p4"
#include "decide.p4"
#include "lanes.p4"
#include "respond.p4"
#include "forwarding.p4"
#include "replica_rewrite.p4"
#include "packet_stats.p4"

/* The state chain takes all 12 stages of Tofino 1: with PHV initialisation relaxed in the later
 * stages, the backend fits meta.expected and meta.progress_in in the early ones (docs/tofino.md,
 * 'Compiling'). In the source, so that every compile of it, the SDE's included, gets it. */
@command_line("--relax-phv-init", "1")

/* The loop port that takes a packet from this port round to pass 3: one in the port's pipe
 * (the aggregators of a job live in its pipe), installed by the controller for every port. */
control LoopPorts(in ingress_intrinsic_metadata_t ig_intr_md, inout ingress_metadata_t meta) {
    action to_loop(PortId_t port) {
        meta.loop_port = port;
    }

    table loop_port {
        key = { ig_intr_md.ingress_port: exact; }
        actions = { to_loop; @defaultonly NoAction; }
        const default_action = NoAction();
        size = 512;
    }

    apply {
        loop_port.apply();
    }
}

@pa_auto_init_metadata
/* bf-p4c 1.2.5.16 would alias the bridged ingress port to the intrinsic one, both header
 * fields, and stop on an internal error: keep it a field of its own. */
@pa_no_overlay("ingress", "hdr.bridge.ingress_port")
/* An action may write a container from at most two PHV sources (the container itself counts
 * when some of its fields keep their value), or one and a constant: the bitmap an answer
 * carries gets a container of its own (docs/tofino.md, Compiling: where it stands). */
@pa_container_size("ingress", "hdr.sa.bitmap", 32)
/* A stateful ALU's output lands whole in one container: the generation (read or bumped by
 * `generation`, compared by `member`, hashed into the gate's gate_id) in one of its own; as
 * a 16-bit field it had been split over 8-bit containers, which no ALU operation can fill
 * from it ("ATTACHED_OUTPUT_ILLEGAL_ALIGNMENT"). */
@pa_container_size("ingress", "meta.gen", 8)
/* agreed_scale's stateful ALU answers a comparison (meta.scale_ok) and a read (meta.rd_scale,
 * which lands in a 32-bit container): both take its output from one action-bus slot, which
 * serves accesses of a single width ("can't fit in a single slot for 16 bit access"). */
@pa_container_size("ingress", "meta.scale_ok", 32)
/* The same for chunk_id: a comparison (meta.situation, which pass 3's answer reads too) and a
 * read of the 32-bit chunk for a report. */
@pa_container_size("ingress", "meta.situation", 32)
/* The job's slot bounds are read only where the jobs table has written them (a frame of an
 * unknown job is never aggregated): left out of the zeroing, their containers can be shared
 * with fields the later stages use. The shared pool needed that room (docs/tofino.md). */
@pa_no_init("ingress", "meta.slot_base")
@pa_no_init("ingress", "meta.pool_base")
@pa_no_init("ingress", "meta.own_slots")
control SaAtpIngress(inout headers_t hdr, inout ingress_metadata_t meta,
                     in ingress_intrinsic_metadata_t ig_intr_md,
                     in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                     inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                     inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    SourceGuard() source_guard;
    JobAdmission() admission;
    DropSimulator() drop_sim;
    Aggregator() aggregator;
    Decide() decide;
    Lanes() lanes;
    LoopPorts() passes;
    Respond() respond;
    L2Forwarding() l2;
    L2Answer() l2_answer;
    PacketStats(true) stats;
    /* A management request's aggregator, where lane_holder reads it (an identity hash, as
     * admit's index_of; the lanes take it from the parser) */
    Hash<agg_index_t>(HashAlgorithm_t.IDENTITY) holder_of;

    /* Tofino 1 runs tables by next-table chaining: a table that follows an `if` in the
     * program is placed after everything inside it. So every `if` below tests only what the
     * parser found (its tables go in the first stage) or comes at the end, and pass 1's
     * decisions are ternary tables with const entries (admit, l2_sel, the aggregator's
     * selectors, decide) applied without a condition: their keys carry the pass. */
    /* abs_slot = slot_base + slot (a table, not an `if`), applied after the jobs lookup,
     * whose slot_base it reads: in pass 1 of a frame from a port, and in passes 2 and 3,
     * which find their aggregator again the same way */
    action add_slot() {
        meta.abs_slot = (bit<12>)(meta.slot_base + hdr.sa.slot);
    }
    /* (a management request's kind, set before it, is not KIND_NONE: it has its aggregator) */
    table abs_slot_sel {
        key = { meta.pass: exact; meta.port_frame: exact; meta.kind: exact; }
        actions = { add_slot; NoAction; }
        const entries = {
            (PASS_STATE, 1, KIND_NONE): add_slot();
            (PASS_LANES, 0, KIND_NONE): add_slot();
            (PASS_HIGH, 0, KIND_NONE): add_slot();
        }
        const default_action = NoAction();
    }

    /* Where a frame's lanes are (docs/protocol.md §4.6): its aggregator's own, or, for a
     * borrowed slot (nothing left of own_slots - slot), the pool's at pool slot ++ SET. */
    Hash<agg_index_t>(HashAlgorithm_t.IDENTITY) own_lanes_of;
    Hash<agg_index_t>(HashAlgorithm_t.IDENTITY) pool_lanes_of;
    /* into the resubmit data, which pass 2 gets and pass 3 gets back from the pass header:
     * where lane_holder reads them in every pass */
    action own_lanes() {
        meta.resub.setValid();
        meta.resub.lane_index = own_lanes_of.get({meta.abs_slot, meta.set_bit});
    }
    action pool_lanes() {
        meta.resub.setValid();
        meta.resub.lane_index = pool_lanes_of.get({meta.pool_base[11:0], meta.set_bit});
    }
    table lanes_at_sel {
        key = { meta.port_frame: exact; meta.own_slots: ternary; }
        actions = { own_lanes; pool_lanes; NoAction; }
        const entries = {
            (1, 0): pool_lanes();
            (1, _): own_lanes();
        }
        const default_action = NoAction();
    }

    apply {
        bit<4> rx_op = 0;
        if (meta.pass == PASS_STATE && !hdr.packet_out.isValid()) {
            meta.port_frame = 1;   /* pass 1 of a frame from a port: admitted, counted */
            meta.set_bit = hdr.sa.flags[0:0];   /* the aggregator: abs_slot ++ set_bit */
            if (hdr.sa.isValid()) {
                rx_op = hdr.sa.op;
            }
            if (ig_prsr_md.parser_err != 0 || meta.bad_version || meta.checksum_err) {
                meta.drop_reason = DROP_MALFORMED;
                ig_dprsr_md.drop_ctl = 1;
            }
        } else if (meta.pass == PASS_STATE) {
            /* a management request: handled in pass 2, once its frame is parsed whole */
            ig_dprsr_md.resubmit_type = 1;
            meta.resub.setValid();
        } else if (meta.pass == PASS_LANES && hdr.packet_out.isValid()) {
            bool known_op = hdr.packet_out.opcode == MGMT_READ_AGGREGATOR
                            || hdr.packet_out.opcode == MGMT_CLEAR_AGGREGATOR;
            if (known_op && ig_prsr_md.parser_err == 0 && hdr.lanes.isValid()
                    && hdr.packet_out.aggregator < NUM_AGGREGATORS) {
                /* the aggregator (admit_sel's locate, as for passes 2 and 3) and its lanes */
                meta.abs_slot = hdr.packet_out.aggregator[12:1];
                meta.set_bit = hdr.packet_out.aggregator[0:0];
                meta.resub.setValid();   /* not parsed: the request has its own (parser.p4) */
                meta.resub.lane_index = holder_of.get({hdr.packet_out.aggregator[12:0]});
                meta.response = RESPOND_REPORT;
                if (hdr.packet_out.opcode == MGMT_CLEAR_AGGREGATOR) {
                    /* what the registers' claims write, and what the report says */
                    hdr.sa.run = 0;
                    hdr.sa.chunk = 0;
                    hdr.sa.scale = 0;
                    hdr.sa.exp = 0;
                    hdr.sa.worker = 0;
                    hdr.sa.bitmap = 0;
                    meta.kind = KIND_MGMT_CLEAR;
                    meta.lane_op = LANES_CLEAR;
                } else {
                    meta.kind = KIND_MGMT_READ;
                    meta.lane_op = LANES_LOAD;
                }
            } else {
                ig_dprsr_md.drop_ctl = 1;
            }
        } else if (meta.pass == PASS_LANES) {
            meta.set_bit = hdr.sa.flags[0:0];   /* the aggregator, found again (admit_sel) */
            meta.lane_op = meta.resub.lane_op;
            meta.response = meta.resub.response;
        } else {
            meta.set_bit = hdr.sa.flags[0:0];
            meta.resub.setValid();   /* lane_holder's address, as in pass 2 */
            meta.resub.lane_index = hdr.pass.lane_index;
            meta.lane_op = LANES_HIGH;
            meta.job_index = hdr.pass.job_index;
        }
        /* What this pass does to the lanes, and where they are, come from the parser alone
         * (meta.resub.lane_op, which pass 1 writes only at its end, and meta.lane_at; never
         * from pass 1's decisions, which wait for pass 2): the gate can then act in stage 0
         * and the lanes from stage 1, beside the state chain's stateful ALUs. */
        lanes.apply(hdr, meta.resub.lane_op, meta.lane_at, meta.resub.gate_id, meta.gate_bits);

        /* Pass 1 (the tables below act only there: their keys carry port_frame or kind).
         * The loss draw, at once (admit reads what it leaves of the port's threshold). */
        drop_sim.apply(ig_intr_md.ingress_port, meta.loss_left);
        source_guard.apply(hdr, meta);
        l2.apply(hdr, meta);   /* dmac: where admit's forward goes */
        /* the lookups, which the aggregator's admit_sel reads */
        admission.apply(hdr, meta, ig_intr_md, ig_prsr_md.parser_err);
        abs_slot_sel.apply();
        lanes_at_sel.apply();

        /* Ingress -> egress: what is known by now, in one action (the TNA idiom for bridged
         * metadata); the tables below (admit_sel, l2_sel, answer) set to_worker, flood,
         * to_job, to_cpu and to_loop in the header itself, after this. */
        hdr.bridge.setValid();
        hdr.bridge.to_job = 0;
        hdr.bridge.flood = 0;
        hdr.bridge.to_worker = 0;
        hdr.bridge.transit = meta.transit;
        hdr.bridge.to_cpu = 0;
        hdr.bridge.to_loop = 0;
        hdr.bridge.sa = meta.sa_valid;
        hdr.bridge.job_index = meta.job_index;
        hdr.bridge.ingress_port = ig_intr_md.ingress_port;

        /* admit_sel (with `valid`), the limits, the state registers */
        aggregator.apply(hdr, meta, ig_dprsr_md, ig_tm_md);
        l2_answer.apply(hdr, meta, ig_dprsr_md, ig_tm_md);
        decide.apply(hdr, meta, ig_dprsr_md);
        passes.apply(ig_intr_md, meta);
        respond.apply(hdr, meta, ig_intr_md, ig_dprsr_md, ig_tm_md);

        if (meta.port_frame == 1) {
            stats.apply(meta.job_index, rx_op, meta.drop_reason);
        }
    }
}

@pa_auto_init_metadata
control SaAtpEgress(inout headers_t hdr, inout egress_metadata_t meta,
                    in egress_intrinsic_metadata_t eg_intr_md,
                    in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                    inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                    inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    ReplicaRewrite() replica_rewrite;
    DropSimulator() drop_sim;
    PacketStats(false) stats;

    apply {
        if (hdr.bridge.to_loop == 0 && hdr.bridge.to_cpu == 0) {
            bool rewrite = false;
            bool pruned = false;
            if (hdr.bridge.to_job == 1) {
                meta.dest_worker = (bit<8>)eg_intr_md.egress_rid;
                rewrite = true;
            } else if (hdr.bridge.to_worker == 1) {
                meta.dest_worker = hdr.sa.reason;
                rewrite = true;
            } else if (hdr.bridge.flood == 1 && eg_intr_md.egress_port == hdr.bridge.ingress_port) {
                pruned = true;   /* never flood a frame back out of the port it came in on */
            }
            if (rewrite) {
                replica_rewrite.apply(hdr, meta);
            }
            if (pruned) {
                eg_dprsr_md.drop_ctl = 1;
            } else {
                bit<4> tx_op = 0;
                if (hdr.sa.isValid() && hdr.bridge.transit == 0) {
                    tx_op = hdr.sa.op;
                    if (meta.drop_reason == DROP_NONE) {
                        drop_sim.apply(eg_intr_md.egress_port, meta.loss_left);
                        if (meta.loss_left != 0) {
                            meta.drop_reason = DROP_SIM;
                        }
                    }
                }
                stats.apply(hdr.bridge.job_index, tx_op, meta.drop_reason);
                if (meta.drop_reason != DROP_NONE) {
                    eg_dprsr_md.drop_ctl = 1;
                }
            }
        }
        hdr.bridge.setInvalid();
    }
}

Pipeline(SaAtpIngressParser(), SaAtpIngress(), SaAtpIngressDeparser(),
         SaAtpEgressParser(), SaAtpEgress(), SaAtpEgressDeparser()) pipe;

Switch(pipe) main;
