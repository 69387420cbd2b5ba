/* The answer of pass 1 (docs/protocol.md §4.2-§4.4, in the v1model program's order), from what
 * the aggregator's registers returned: one ternary table with const entries. A duplicate
 * completes the chunk (its fan-in lowered) when limit_add, as the aggregator leaves it
 * (limit_add |-| old progress), is 0 and old progress is not limit_add itself (at_limit 0):
 * the comparisons are the aggregator's, read by the table. For a borrowed
 * slot, lanes_away (lane_holder's answer) says that the pool's lanes are busy (a chunk that
 * starts) or no longer this aggregator's (a held one; docs/protocol.md §4.6); an own slot's is
 * 0. */
#ifndef SA_ATP_TNA_DECIDE_P4
#define SA_ATP_TNA_DECIDE_P4

control Decide(inout headers_t hdr, inout ingress_metadata_t meta,
               inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    action respond(bit<4> response, bit<3> lane_op) {
        meta.response = response;
        meta.lane_op = lane_op;
    }
    action bounce(bit<8> reason) {
        meta.response = RESPOND_BOUNCE;
        meta.bounce_reason = reason;
    }
    action not_expected() {
        meta.drop_reason = DROP_NOT_EXPECTED;
        ig_dprsr_md.drop_ctl = 1;   /* the other drop reasons are known before the aggregator */
    }
    /* Every contribution goes to pass 2 to be summed (ABSORB, GATED): the lanes' gate adds
     * each worker's lanes once, whatever order the passes 2 come in, and pass 2 answers with
     * the result if that makes the lanes of a complete chunk whole (respond.p4). So does a
     * retransmission to a complete chunk from a worker it counts (its bit in contributors,
     * matched worker by worker: a stateful ALU cannot test a bit), which brings its lanes
     * again in case its pass 2 was lost (REPAIR: never into cells of another aggregation),
     * and gets a copy; any other worker's gets a copy of the lanes as they are. A duplicate while the chunk aggregates is answered PENDING here,
     * with its own lanes. */
    table decide {
        key = { meta.kind: ternary; meta.situation: ternary; meta.scale_ok: ternary;
                meta.old_progress[17:16]: ternary; meta.is_member: ternary;
                meta.limit_add: ternary; meta.at_limit: ternary; meta.lanes_away: ternary;
                hdr.sa.worker[4:0]: ternary; hdr.sa.bitmap: ternary; }
        actions = { respond; bounce; not_expected; NoAction; }
        const entries = {
            (_, SIT_OLD_RUN, _, _, _, _, _, _, _, _): bounce(BOUNCE_OLD_RUN);
            (KIND_PROBE, SIT_HELD, _, PHASE_COMPLETE, _, _, _, 0, _, _):
                respond(RESPOND_COPY, LANES_LOAD);
            (KIND_PROBE, SIT_HELD, _, PHASE_COMPLETE, _, _, _, _, _, _): bounce(BOUNCE_STALE);
            (KIND_PROBE, SIT_HELD, _, PHASE_TAKEN, _, _, _, _, _, _): bounce(BOUNCE_TAKEN);
            (KIND_PROBE, SIT_HELD, _, _, _, _, _, _, _, _): respond(RESPOND_PENDING, LANES_KEEP);
            (KIND_PROBE, SIT_NEWER, _, _, _, _, _, _, _, _): bounce(BOUNCE_NOT_HELD);
            (KIND_PROBE, _, _, _, _, _, _, _, _, _): bounce(BOUNCE_STALE);
            (KIND_UNEXPECTED, _, _, _, _, _, _, _, _, _): not_expected();
            /* the pool's lanes are busy: taken over by the sender, its own lanes the partial */
            (KIND_DATA, SIT_NEWER, _, _, _, _, _, 1, _, _): respond(RESPOND_PARTIAL, LANES_KEEP);
            (KIND_DATA, SIT_NEWER, _, _, _, _, _, _, _, _): respond(RESPOND_ABSORB, LANES_GATED);
            (KIND_DATA, SIT_OLDER, _, _, _, _, _, _, _, _): bounce(BOUNCE_STALE);
            (KIND_DATA, _, _, PHASE_TAKEN, _, _, _, _, _, _): bounce(BOUNCE_TAKEN);
            (KIND_DATA, _, 0, _, _, _, _, _, _, _): bounce(BOUNCE_SCALE_MISMATCH);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, 1, _, _): bounce(BOUNCE_STALE);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 0, 0x00000001 &&& 0x00000001):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 1, 0x00000002 &&& 0x00000002):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 2, 0x00000004 &&& 0x00000004):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 3, 0x00000008 &&& 0x00000008):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 4, 0x00000010 &&& 0x00000010):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 5, 0x00000020 &&& 0x00000020):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 6, 0x00000040 &&& 0x00000040):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 7, 0x00000080 &&& 0x00000080):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 8, 0x00000100 &&& 0x00000100):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 9, 0x00000200 &&& 0x00000200):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 10, 0x00000400 &&& 0x00000400):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 11, 0x00000800 &&& 0x00000800):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 12, 0x00001000 &&& 0x00001000):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 13, 0x00002000 &&& 0x00002000):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 14, 0x00004000 &&& 0x00004000):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 15, 0x00008000 &&& 0x00008000):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 16, 0x00010000 &&& 0x00010000):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 17, 0x00020000 &&& 0x00020000):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 18, 0x00040000 &&& 0x00040000):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 19, 0x00080000 &&& 0x00080000):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 20, 0x00100000 &&& 0x00100000):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 21, 0x00200000 &&& 0x00200000):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 22, 0x00400000 &&& 0x00400000):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 23, 0x00800000 &&& 0x00800000):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 24, 0x01000000 &&& 0x01000000):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 25, 0x02000000 &&& 0x02000000):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 26, 0x04000000 &&& 0x04000000):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 27, 0x08000000 &&& 0x08000000):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 28, 0x10000000 &&& 0x10000000):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 29, 0x20000000 &&& 0x20000000):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 30, 0x40000000 &&& 0x40000000):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 31, 0x80000000 &&& 0x80000000):
                respond(RESPOND_COPY, LANES_REPAIR);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, _, _): respond(RESPOND_COPY, LANES_LOAD);
            /* a duplicate completes the chunk if the fan-in was lowered, else PENDING */
            (KIND_DATA, _, _, _, 1, 0, 0, _, _, _): respond(RESPOND_ABSORB, LANES_GATED);
            (KIND_DATA, _, _, _, 1, _, _, _, _, _): respond(RESPOND_PENDING, LANES_KEEP);
            (KIND_DATA, _, _, _, _, _, _, _, _, _): respond(RESPOND_ABSORB, LANES_GATED);
            (KIND_TAKEOVER, SIT_HELD, _, PHASE_COMPLETE, _, _, _, 0, _, _):
                respond(RESPOND_COPY, LANES_LOAD);
            (KIND_TAKEOVER, SIT_HELD, _, _, _, _, _, 0, _, _): respond(RESPOND_PARTIAL, LANES_LOAD);
            (KIND_TAKEOVER, _, _, _, _, _, _, _, _, _): bounce(BOUNCE_NOT_HELD);
            (KIND_HELPER_RESULT, SIT_HELD, _, PHASE_TAKEN, _, _, _, 1, _, _):
                respond(RESPOND_HELPER_RESULT, LANES_KEEP);
            (KIND_HELPER_RESULT, SIT_HELD, _, PHASE_TAKEN, _, _, _, _, _, _):
                respond(RESPOND_HELPER_RESULT, LANES_STORE);
            (KIND_HELPER_RESULT, _, _, _, _, _, _, _, _, _):
                respond(RESPOND_HELPER_RESULT, LANES_KEEP);
        }
        const default_action = NoAction();
    }

    apply {
        if (meta.pass == PASS_STATE && meta.kind != KIND_NONE) {
            decide.apply();
        }
    }
}

#endif
