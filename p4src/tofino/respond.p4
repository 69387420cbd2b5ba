/* The answer to an aggregator packet, pass by pass (docs/tofino.md, 'Passes'):
 *   pass 1  bounces, PENDING and an unstored HELPER_RESULT leave at once; whatever touches the
 *           lanes is resubmitted with what pass 1 decided;
 *   pass 2  after the lanes: the header describes the aggregator; a sum (a result, a copy, a
 *           partial, a report) goes round a loop port for the high words;
 *   pass 3  after the high words: out to where pass 2 addressed it, if the aggregator still
 *           holds the chunk. */
#ifndef SA_ATP_TNA_RESPOND_P4
#define SA_ATP_TNA_RESPOND_P4

control Respond(inout headers_t hdr, inout ingress_metadata_t meta,
                in ingress_intrinsic_metadata_t ig_intr_md,
                inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    /* Answer the sender, from the address it sent to. */
    action reply_to_sender() {
        mac_addr_t mac = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = mac;
        ipv4_addr_t ip = hdr.ipv4.dst_addr;
        hdr.ipv4.dst_addr = hdr.ipv4.src_addr;
        hdr.ipv4.src_addr = ip;
        bit<16> port = hdr.udp.dst_port;
        hdr.udp.dst_port = hdr.udp.src_port;
        hdr.udp.src_port = port;
        hdr.udp.checksum = 0;
    }

    /* From the switch's address to the job; egress writes each copy's destination. */
    action from_switch() {
        hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
        hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
        hdr.udp.src_port = SA_ATP_UDP_PORT;
        hdr.udp.checksum = 0;
    }

    /* flags_hi: the flags above SET (COPY for a copy), SET kept: a slice write, next to op's */
    action describe(bit<4> op, bit<7> flags_hi) {
        hdr.sa.op = op;
        hdr.sa.reason = 0;
        hdr.sa.flags[7:1] = flags_hi;
        hdr.sa.count = meta.rd_count;   /* bitmap and exp: read into the header (aggregator.p4) */
        hdr.sa.scale = meta.rd_scale;
    }

    action bounce_to_sender() {
        hdr.sa.op = OP_BOUNCE;
        hdr.sa.reason = meta.bounce_reason;   /* bitmap: read into the header */
        hdr.sa.count = meta.rd_count;
    }

    action report_to_cpu() {
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = ig_intr_md.ingress_port;   /* _pad left as it is */
        hdr.packet_in.opcode = hdr.packet_out.opcode;
        hdr.packet_in.aggregator = hdr.packet_out.aggregator;   /* the request's, as in v1model */
        hdr.packet_out.setInvalid();
    }

    action report(bit<8> state) {
        describe(OP_RESULT, 0);   /* chunk and run: read into the header (aggregator.p4) */
        hdr.sa.reason = state;   /* worker: read into the header too */
        report_to_cpu();
    }

    /* a clear's report: what the cleared registers hold, as constants (nothing to wait for) */
    action report_cleared() {
        hdr.sa.op = OP_RESULT;
        hdr.sa.reason = SLOT_EMPTY;
        hdr.sa.flags[7:1] = 0;
        hdr.sa.bitmap = 0;
        hdr.sa.count = 0;
        hdr.sa.scale = 0;
        hdr.sa.exp = 0;
        report_to_cpu();
    }

    action to_job(bit<16> group) {
        ig_tm_md.mcast_grp_a = group;
        hdr.bridge.to_job = 1;
    }

    /* the packet carries the new low words only: round the loop for the high */
    action to_loop(bit<4> response) {
        hdr.pass.setValid();
        hdr.pass.response = response;
        hdr.pass.job_index = meta.job_index;
        hdr.pass.lane_index = meta.resub.lane_index;
        hdr.pass.port = ig_intr_md.ingress_port;   /* the reply's port: the sender's */
        ig_tm_md.ucast_egress_port = meta.loop_port;
        hdr.bridge.to_loop = 1;
    }

    /* -- the answers: one action each, chosen by `answer` ----------------------------------- */
    /* pass 1 */
    action p1_bounce() {   /* a TAKEN bounce: the helper is in worker (aggregator.p4) */
        bounce_to_sender();
        reply_to_sender();
        ig_tm_md.ucast_egress_port = ig_intr_md.ingress_port;
    }
    action p1_pending() {   /* to every worker of the job: one question answers them all */
        bounce_to_sender();
        hdr.sa.reason = BOUNCE_PENDING;
        from_switch();
        to_job(hdr.pass.job_group);
    }
    /* the aggregation the lanes' gate is asked about: the generation and the aggregator */
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) gate_id_of;
    action p1_resubmit() {
        meta.resub.setValid();
        meta.resub.lane_op = meta.lane_op;
        meta.resub.response = meta.response;
        meta.resub.gate_id = gate_id_of.get({meta.gen, 3w0, meta.index});
        ig_dprsr_md.resubmit_type = 1;
    }
    /* a chunk whose pool lanes are busy (docs/protocol.md §4.6): taken over by its sender,
     * whose own contribution is the partial, to every worker of the job */
    action p1_partial() {
        hdr.sa.op = OP_PARTIAL;
        hdr.sa.reason = 0;
        hdr.sa.flags[7:1] = 0;
        hdr.sa.bitmap = meta.gate_bits;   /* the sender's bit, in pass 1 */
        hdr.sa.count = 1;
        from_switch();
        to_job(hdr.pass.job_group);
    }
    action helper_result() {
        hdr.sa.op = OP_RESULT;
        hdr.sa.flags[7:1] = (FLAG_HELPER >> 1)[6:0];   /* SET kept, HELPER the only other */
        from_switch();
        to_job(hdr.pass.job_group);
    }
    /* pass 2 */
    action p2_absorb() {
        ig_dprsr_md.drop_ctl = 1;   /* summed, or the lanes still wait for a contribution */
    }
    action p2_result_loop() {
        describe(OP_RESULT, 0);
        from_switch();
        to_loop(RESPOND_RESULT);
    }
    action p2_copy_loop() {
        describe(OP_RESULT, (FLAG_COPY >> 1)[6:0]);
        reply_to_sender();
        to_loop(RESPOND_COPY);
    }
    action p2_partial_loop() {
        describe(OP_PARTIAL, 0);
        from_switch();
        to_loop(RESPOND_PARTIAL);
    }
    action p2_cleared() {
        report_cleared();
        ig_tm_md.ucast_egress_port = ig_intr_md.ingress_port;
        hdr.bridge.to_cpu = 1;
    }
    action p2_report_loop(bit<8> state) {
        report(state);
        to_loop(RESPOND_REPORT);
    }
    /* pass 3: out to where pass 2 addressed it */
    action p3_unicast() {
        ig_tm_md.ucast_egress_port = hdr.pass.port;
        hdr.pass.setInvalid();
    }
    action p3_cpu() {
        ig_tm_md.ucast_egress_port = hdr.pass.port;
        hdr.bridge.to_cpu = 1;
        hdr.pass.setInvalid();
    }
    action p3_job() {
        to_job(hdr.pass.job_group);
        hdr.pass.setInvalid();
    }
    /* The aggregator moved on while the packet was on the loop (another chunk or run claimed
     * it, or another aggregator its pool lanes, or a helper's result was stored over a taken
     * chunk's partial sum): the low words are the sum pass 2 described, the high words
     * perhaps not. A copy becomes the STALE bounce a
     * copy asked for too late gets (the result is at the workers); a result or partial is
     * dropped (the workers ask again). */
    action p3_stale() {
        hdr.sa.op = OP_BOUNCE;
        hdr.sa.reason = BOUNCE_STALE;
        hdr.sa.flags[7:1] = 0;
        p3_unicast();
    }
    action p3_drop() {
        ig_dprsr_md.drop_ctl = 1;
    }

    /* Every answer in one table (a chain of conditions took three stages and more tables than
     * a stage holds). Pass 2 sees what pass 1 decided (response, lanes), and a management
     * request's (REPORT, CLEAR or LOAD); a report reads the slot state from `progress`. A sum
     * leaves only while the aggregator holds the chunk and its lanes hold exactly the
     * contributions the state counts: gate_bits, by then contributors XOR the workers whose
     * lanes were in, is 0, or, for a contribution (GATED, REPAIR), the sender's own bit, which
     * it has just added (one entry per worker: the table cannot compare two fields). So whichever
     * pass 2 brings the last lanes of a complete chunk answers with the result, whatever order
     * the passes 2 came in (docs/tofino.md, 'Order-free sums'), a retransmission's with a
     * copy; the rest is dropped (summed, or waiting for lanes). Pass 3 sees whether the
     * aggregator still holds the chunk as pass 2 described it (run_id, chunk_id, lane_holder,
     * and the phase: a copy's and a result's COMPLETE, a partial's TAKEN). */
    table answer {
        key = { meta.pass: ternary; meta.response: ternary; meta.lane_op: ternary;
                meta.old_progress[17:16]: ternary; hdr.pass.response: ternary;
                meta.run_class: ternary; meta.situation: ternary; meta.lanes_away: ternary;
                meta.gate_bits: ternary; hdr.sa.worker[4:0]: ternary; }
        actions = { p1_bounce; p1_pending; p1_resubmit; p1_partial; helper_result; p2_absorb;
                    p2_result_loop; p2_copy_loop; p2_partial_loop; p2_cleared; p2_report_loop;
                    p3_unicast; p3_cpu; p3_job; p3_stale; p3_drop; NoAction; }
        const entries = {
            (PASS_STATE, RESPOND_BOUNCE, _, _, _, _, _, _, _, _): p1_bounce();
            (PASS_STATE, RESPOND_PENDING, _, _, _, _, _, _, _, _): p1_pending();
            (PASS_STATE, RESPOND_HELPER_RESULT, LANES_KEEP, _, _, _, _, _, _, _): helper_result();
            (PASS_STATE, RESPOND_PARTIAL, LANES_KEEP, _, _, _, _, _, _, _): p1_partial();
            (PASS_STATE, _, LANES_KEEP, _, _, _, _, _, _, _): NoAction();
            (PASS_STATE, _, _, _, _, _, _, _, _, _): p1_resubmit();
            (PASS_LANES, RESPOND_HELPER_RESULT, _, _, _, _, _, _, _, _): helper_result();
            (PASS_LANES, RESPOND_REPORT, LANES_CLEAR, _, _, _, _, _, _, _): p2_cleared();
            (PASS_LANES, RESPOND_REPORT, _, PHASE_AGGREGATING, _, _, _, _, _, _):
                p2_report_loop(SLOT_AGGREGATING);
            (PASS_LANES, RESPOND_REPORT, _, PHASE_COMPLETE, _, _, _, _, _, _):
                p2_report_loop(SLOT_COMPLETE);
            (PASS_LANES, RESPOND_REPORT, _, PHASE_TAKEN, _, _, _, _, _, _):
                p2_report_loop(SLOT_TAKEN);
            (PASS_LANES, RESPOND_REPORT, _, _, _, _, _, _, _, _): p2_report_loop(SLOT_EMPTY);
            (PASS_LANES, RESPOND_COPY, _, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0, _):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000001, 0):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000002, 1):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000004, 2):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000008, 3):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000010, 4):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000020, 5):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000040, 6):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000080, 7):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000100, 8):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000200, 9):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000400, 10):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000800, 11):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00001000, 12):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00002000, 13):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00004000, 14):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00008000, 15):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00010000, 16):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00020000, 17):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00040000, 18):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00080000, 19):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00100000, 20):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00200000, 21):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00400000, 22):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00800000, 23):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x01000000, 24):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x02000000, 25):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x04000000, 26):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x08000000, 27):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x10000000, 28):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x20000000, 29):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x40000000, 30):
                p2_copy_loop();
            (PASS_LANES, RESPOND_COPY, LANES_REPAIR, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x80000000, 31):
                p2_copy_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0, _):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000001, 0):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000002, 1):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000004, 2):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000008, 3):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000010, 4):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000020, 5):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000040, 6):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000080, 7):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000100, 8):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000200, 9):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000400, 10):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00000800, 11):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00001000, 12):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00002000, 13):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00004000, 14):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00008000, 15):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00010000, 16):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00020000, 17):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00040000, 18):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00080000, 19):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00100000, 20):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00200000, 21):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00400000, 22):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x00800000, 23):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x01000000, 24):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x02000000, 25):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x04000000, 26):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x08000000, 27):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x10000000, 28):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x20000000, 29):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x40000000, 30):
                p2_result_loop();
            (PASS_LANES, RESPOND_ABSORB, LANES_GATED, PHASE_COMPLETE, _, RUN_SAME, SIT_HELD, _, 0x80000000, 31):
                p2_result_loop();
            (PASS_LANES, RESPOND_PARTIAL, _, PHASE_TAKEN, _, RUN_SAME, SIT_HELD, _, 0, _):
                p2_partial_loop();
            (PASS_LANES, _, _, _, _, _, _, _, _, _): p2_absorb();
            (PASS_HIGH, _, _, _, RESPOND_REPORT, _, _, _, _, _): p3_cpu();
            (PASS_HIGH, _, _, PHASE_COMPLETE, RESPOND_COPY, RUN_SAME, SIT_HELD, 0, _, _):
                p3_unicast();
            (PASS_HIGH, _, _, _, RESPOND_COPY, _, _, _, _, _): p3_stale();
            (PASS_HIGH, _, _, PHASE_COMPLETE, RESPOND_RESULT, RUN_SAME, SIT_HELD, 0, _, _):
                p3_job();
            (PASS_HIGH, _, _, PHASE_TAKEN, RESPOND_PARTIAL, RUN_SAME, SIT_HELD, 0, _, _):
                p3_job();
            (PASS_HIGH, _, _, _, _, _, _, _, _, _): p3_drop();
        }
        const default_action = NoAction();
    }

    /* In pass 2, the workers the state counts whose lanes the gate did not have: a table of
     * its own after contributors (stage 9), so that it delays only `answer`; pass 1 keeps the
     * sender's bit there for p1_partial. */
    action missing() {
        meta.gate_bits = meta.gate_bits ^ hdr.sa.bitmap;   /* contributors, by now */
    }
    table missing_sel {
        key = { meta.pass: exact; }
        actions = { missing; NoAction; }
        const entries = {
            PASS_LANES: missing();
        }
        const default_action = NoAction();
    }

    apply {
        missing_sel.apply();
        answer.apply();
    }
}

#endif
