/* The answer of pass 1 (docs/protocol.md §4.2-§4.4, in the v1model program's order), from what
 * the aggregator's registers returned: one ternary table with const entries. An addition
 * completes the chunk when limit_add, as the aggregator leaves it (limit_add |-| old progress),
 * is 0, i.e. old progress >= limit_add; a duplicate when moreover old progress is not limit_add
 * itself (at_limit 0): the comparisons are the aggregator's, read by the table. For a borrowed
 * slot, lanes_away (lane_holder's answer) says that the pool's lanes are busy (a chunk that
 * starts) or no longer this aggregator's (a held one; docs/protocol.md §4.6); an own slot's is
 * 0. */
#ifndef SA_ATP_TNA_DECIDE_P4
#define SA_ATP_TNA_DECIDE_P4

control Decide(inout ingress_metadata_t meta,
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
    table decide {
        key = { meta.kind: ternary; meta.situation: ternary; meta.scale_ok: ternary;
                meta.old_progress[17:16]: ternary; meta.is_member: ternary;
                meta.limit_add: ternary; meta.at_limit: ternary;
                meta.start_done: ternary; meta.lanes_away: ternary; }
        actions = { respond; bounce; not_expected; NoAction; }
        const entries = {
            (_, SIT_OLD_RUN, _, _, _, _, _, _, _): bounce(BOUNCE_OLD_RUN);
            (KIND_PROBE, SIT_HELD, _, PHASE_COMPLETE, _, _, _, _, 0):
                respond(RESPOND_COPY, LANES_LOAD);
            (KIND_PROBE, SIT_HELD, _, PHASE_COMPLETE, _, _, _, _, _): bounce(BOUNCE_STALE);
            (KIND_PROBE, SIT_HELD, _, PHASE_TAKEN, _, _, _, _, _): bounce(BOUNCE_TAKEN);
            (KIND_PROBE, SIT_HELD, _, _, _, _, _, _, _): respond(RESPOND_PENDING, LANES_KEEP);
            (KIND_PROBE, SIT_NEWER, _, _, _, _, _, _, _): bounce(BOUNCE_NOT_HELD);
            (KIND_PROBE, _, _, _, _, _, _, _, _): bounce(BOUNCE_STALE);
            (KIND_UNEXPECTED, _, _, _, _, _, _, _, _): not_expected();
            /* the pool's lanes are busy: taken over by the sender, its own lanes the partial */
            (KIND_DATA, SIT_NEWER, _, _, _, _, _, _, 1):
                respond(RESPOND_PARTIAL, LANES_KEEP);
            (KIND_DATA, SIT_NEWER, _, _, _, _, _, 1, _): respond(RESPOND_RESULT, LANES_STORE);
            (KIND_DATA, SIT_NEWER, _, _, _, _, _, _, _): respond(RESPOND_ABSORB, LANES_STORE);
            (KIND_DATA, SIT_OLDER, _, _, _, _, _, _, _): bounce(BOUNCE_STALE);
            (KIND_DATA, _, _, PHASE_TAKEN, _, _, _, _, _): bounce(BOUNCE_TAKEN);
            (KIND_DATA, _, 0, _, _, _, _, _, _): bounce(BOUNCE_SCALE_MISMATCH);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, 0):
                respond(RESPOND_COPY, LANES_LOAD);
            (KIND_DATA, _, _, PHASE_COMPLETE, _, _, _, _, _): bounce(BOUNCE_STALE);
            (KIND_DATA, _, _, _, 1, 0, 0, _, _): respond(RESPOND_RESULT, LANES_LOAD);
            (KIND_DATA, _, _, _, 1, _, _, _, _): respond(RESPOND_PENDING, LANES_KEEP);
            (KIND_DATA, _, _, _, _, 0, _, _, _): respond(RESPOND_RESULT, LANES_ADD);
            (KIND_DATA, _, _, _, _, _, _, _, _): respond(RESPOND_ABSORB, LANES_ADD);
            (KIND_TAKEOVER, SIT_HELD, _, PHASE_COMPLETE, _, _, _, _, 0):
                respond(RESPOND_COPY, LANES_LOAD);
            (KIND_TAKEOVER, SIT_HELD, _, _, _, _, _, _, 0):
                respond(RESPOND_PARTIAL, LANES_LOAD);
            (KIND_TAKEOVER, _, _, _, _, _, _, _, _): bounce(BOUNCE_NOT_HELD);
            (KIND_HELPER_RESULT, SIT_HELD, _, PHASE_TAKEN, _, _, _, _, 1):
                respond(RESPOND_HELPER_RESULT, LANES_KEEP);
            (KIND_HELPER_RESULT, SIT_HELD, _, PHASE_TAKEN, _, _, _, _, _):
                respond(RESPOND_HELPER_RESULT, LANES_STORE);
            (KIND_HELPER_RESULT, _, _, _, _, _, _, _, _): respond(RESPOND_HELPER_RESULT, LANES_KEEP);
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
