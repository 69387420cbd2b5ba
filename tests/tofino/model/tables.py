"""The decisions the TNA program's const-entry tables make (aggregator.p4), as functions of
their keys: which RegisterAction each register's selector runs, what progress_check is set up
to do, and the answer of pass 1 (``decide``).

Written from docs/protocol.md §4 (the order of the v1model program's state machine), not
copied from the const entries; ``tests/tofino/test_tna_source.py`` evaluates the const entries
as a TCAM on every key combination and requires the same action from these functions.
"""

from __future__ import annotations

from protocol import constants as P

PASS_STATE, PASS_LANES, PASS_HIGH = 0, 1, 2
(KIND_NONE, KIND_DATA, KIND_UNEXPECTED, KIND_PROBE, KIND_TAKEOVER, KIND_HELPER_RESULT,
 KIND_MGMT_READ, KIND_MGMT_CLEAR) = range(8)
RUN_NEWER, RUN_SAME, RUN_OLDER = range(3)   # NEWER: also an empty slot's (not compared)
SIT_NEWER, SIT_HELD, SIT_OLDER, SIT_OLD_RUN = range(4)
PHASE_EMPTY, PHASE_COMPLETE, PHASE_TAKEN, PHASE_AGGREGATING = range(4)
(LANES_KEEP, LANES_STORE, LANES_GATED, LANES_LOAD, LANES_HIGH, LANES_CLEAR, LANES_ADD,
 LANES_REPAIR) = range(8)
(RESPOND_NONE, RESPOND_ABSORB, RESPOND_BOUNCE, RESPOND_COPY, RESPOND_RESULT, RESPOND_PARTIAL,
 RESPOND_HELPER_RESULT, RESPOND_REPORT, RESPOND_PENDING) = range(9)
PASS_ONE_KINDS = (KIND_DATA, KIND_UNEXPECTED, KIND_PROBE, KIND_TAKEOVER, KIND_HELPER_RESULT)


HOST_OPS = (P.Op.DATA, P.Op.TAKEOVER, P.Op.HELPER_DATA, P.Op.HELPER_RESULT)
ADMITTED = ("helper_data", "admit", "admit_data")   # what the drop simulator may drop


def admit(m: dict) -> tuple[str, tuple[int, ...]]:
    """The admission of a frame from a port (aggregator.p4's admit_sel, which also runs
    `valid`: occupy for DATA, peek for the other kinds), in the v1model
    program's order (docs/protocol.md §6, §9): malformed, spoofed, not SA-ATP, unknown job,
    transit, op, registration, slot range, helper, the drop simulator; then what the
    aggregator is asked. ``registered``, ``num_slots`` (less the slot), ``loss_left`` and
    ``expected_worker`` count by whether they are 0. Only pass 1 of a frame
    from a port (``port_frame``) is admitted."""
    if not m["port_frame"]:   # passes 2 and 3 and management requests find the aggregator
        return ("do_valid_vacate" if m["kind"] == KIND_MGMT_CLEAR else "locate"), ()   # again
    if m["drop_reason"] == P.DropReason.MALFORMED:
        return "NoAction", ()
    if m["spoofed"]:
        return "spoofed", ()
    if not m["sa_valid"]:
        return "forward", ()
    if not m["job_known"]:
        return "drop", (P.DropReason.UNKNOWN_JOB,)
    if m["transit"]:
        return "forward", ()
    op = m["op"]
    if op not in HOST_OPS:
        return "drop", (P.DropReason.BAD_OP,)
    if not m["registered"]:
        return "drop", (P.DropReason.UNREGISTERED,)
    if m["num_slots"] == 0:
        return "drop", (P.DropReason.SLOT_RANGE,)
    if op == P.Op.HELPER_DATA and not m["helper_known"]:
        return "drop", (P.DropReason.UNREGISTERED,)   # no such helper in the job
    if m["loss_left"]:
        return "drop", (P.DropReason.SIM,)
    if op == P.Op.HELPER_DATA:
        return "helper_data", ()
    if op == P.Op.DATA and m["flags"] & P.Flag.PROBE:
        return "admit", (KIND_PROBE,)
    if op == P.Op.DATA:
        return ("admit_data", ()) if m["expected_worker"] else ("admit", (KIND_UNEXPECTED,))
    if op == P.Op.TAKEOVER:
        return "admit", (KIND_TAKEOVER,)
    return "admit", (KIND_HELPER_RESULT,)


def expected_sel(m: dict) -> str:
    """Whether the worker is in the job's expected set (its bit in ``expected``)."""
    return "is_expected" if m["worker"] < 32 and m["expected"] >> m["worker"] & 1 else "NoAction"


def l2_sel(m: dict) -> str:
    """What forwarding does with dmac's outcome (forwarding.p4): known destinations to their
    port; unknown ones flooded, but never a frame to or from SA-ATP's UDP port."""
    if not m["use_l2"]:
        return "NoAction"
    if not m["l2_flood"]:
        return "to_port"
    if m["udp_valid"] and P.UDP_PORT in (m["src_port"], m["dst_port"]):
        return "no_flood"
    return "to_all"


def fan_in_sel(m: dict) -> str:
    """The job's fan-in, or the packet's where the job takes it in band (and it is not 0)."""
    return "inband_fanin" if m["inband_fanin"] == 1 and m["fanin"] != 0 else "NoAction"


def start_sel(m: dict) -> tuple[str, tuple[int, ...]]:
    """The progress word a DATA's claim writes (job_admission.p4's Limits): COMPLETE with a
    count of 1 where a first contribution completes its chunk (fan-in 1, or 0)."""
    if m["kind"] == KIND_HELPER_RESULT:   # COMPLETE_BASE | the packet's count
        return "start_helper_result", ()
    if m["kind"] == KIND_DATA:
        state = 0x10000 if m["fan_in"] <= 1 else 0x30000   # COMPLETE_BASE, AGGREGATING_BASE
        return "start_data", (state | 1,)
    return "NoAction", ()


def lanes_at_sel(m: dict) -> str:
    """Where a frame's lanes are (sa_atp_tna.p4): a borrowed slot's, where nothing is left of
    own_slots - slot, in the pool's; the others in the aggregator's own."""
    if not m["port_frame"]:
        return "NoAction"
    return "pool_lanes" if m["own_slots"] == 0 else "own_lanes"


def _pass_two(m: dict, clear: str, read: str | None, report_only: bool = False) -> str:
    """Pass 2 clears the aggregator for the controller, or reads it to describe it (with
    ``report_only``, only for a management read: run and chunk go into its header)."""
    if m["pass"] != PASS_LANES:
        return "NoAction"
    if m["kind"] == KIND_MGMT_CLEAR:
        return clear
    if report_only and m["kind"] != KIND_MGMT_READ:
        return "NoAction"
    return read or "NoAction"


def _still_held(m: dict) -> bool:
    """Passes 2 and 3 of a frame (no management request): compare run and chunk again, for
    lane_holder's release and pass 3's answer (the aggregator may have moved on)."""
    return m["pass"] == PASS_HIGH or (m["pass"] == PASS_LANES
                                      and m["kind"] not in (KIND_MGMT_READ, KIND_MGMT_CLEAR))


def run_id_sel(m: dict) -> str:
    if _still_held(m):
        return "do_run_id_compare"
    if m["pass"] != PASS_STATE:
        return _pass_two(m, "do_run_id_claim", "do_run_id_read", report_only=True)
    if m["kind"] == KIND_NONE:
        return "NoAction"
    if m["was_valid"] == 0:   # an empty aggregator: nothing to compare
        return "do_run_id_claim" if m["kind"] == KIND_DATA else "NoAction"
    return "do_run_id_compare_claim" if m["kind"] == KIND_DATA else "do_run_id_compare"


def chunk_id_sel(m: dict) -> str:
    if _still_held(m):
        return "do_chunk_id_compare"
    if m["pass"] != PASS_STATE:
        return _pass_two(m, "do_chunk_id_claim", "do_chunk_id_read", report_only=True)
    if m["kind"] == KIND_NONE:
        return "NoAction"
    if m["was_valid"] == 1 and m["run_class"] == RUN_OLDER:
        return "situation_old_run"
    if m["was_valid"] == 1 and m["run_class"] == RUN_SAME:
        return "do_chunk_id_compare_claim" if m["kind"] == KIND_DATA else "do_chunk_id_compare"
    # empty, or holding an older run: as good as empty
    return "do_chunk_id_claim" if m["kind"] == KIND_DATA else "situation_newer"


def _data(m: dict, situation: int) -> bool:
    return m["pass"] == PASS_STATE and m["kind"] == KIND_DATA and m["situation"] == situation


def generation_sel(m: dict) -> str:
    """Bumped by every aggregation begun; read by every pass 1 of a held chunk: the
    aggregation that the lanes' gate is asked about in pass 2."""
    if _data(m, SIT_NEWER):
        return "do_generation_bump"
    if m["pass"] == PASS_STATE and m["situation"] == SIT_HELD:
        return "do_generation_read"
    return _pass_two(m, "do_generation_bump", None)


def agreed_scale_sel(m: dict) -> str:
    if _data(m, SIT_NEWER):
        return "do_agreed_scale_claim"
    if _data(m, SIT_HELD):
        return "do_agreed_scale_compare"
    return _pass_two(m, "do_agreed_scale_claim", "do_agreed_scale_read")


def lane_holder_sel(m: dict) -> str:
    """A borrowed slot's pool lanes (docs/protocol.md §4.6): pass 1 claims them, held, for a
    chunk that starts, and asks about them for one held; pass 2 releases them for a stored
    HELPER_RESULT (and a management clear clears them); pass 3 releases them once a result or
    a partial has its high words, and asks for every answer whether they were still this
    aggregator's (a release touches no other's)."""
    borrowed = m["own_slots"] == 0   # nothing left of own_slots - slot, in every pass
    # passes 2 and 3 release only while the aggregator still holds the chunk: its next chunk
    # may hold the lanes by now
    held = m["situation"] == SIT_HELD and m["run_class"] == RUN_SAME
    if m["pass"] == PASS_STATE:
        if not borrowed:
            return "NoAction"
        if _data(m, SIT_NEWER):
            return "do_lane_holder_claim_held"
        if m["situation"] == SIT_HELD and m["kind"] in (KIND_DATA, KIND_PROBE, KIND_TAKEOVER,
                                                         KIND_HELPER_RESULT):
            return "do_lane_holder_peek"
        return "NoAction"
    if m["pass"] == PASS_LANES:
        if m["kind"] == KIND_MGMT_CLEAR:
            return "do_lane_holder_clear"
        stored = m["response"] == RESPOND_HELPER_RESULT and m["lane_op"] == LANES_STORE
        return "do_lane_holder_release" if borrowed and stored and held else "NoAction"
    if borrowed and held and m["pass_response"] in (RESPOND_RESULT, RESPOND_PARTIAL,
                                                     RESPOND_COPY):
        return "do_lane_holder_release"
    return "NoAction"


def pass_three(m: dict) -> str:
    """Where pass 3 sends an answer (respond.p4's ``answer`` in pass 3): out as pass 2
    addressed it if the aggregator still holds the chunk as pass 2 described it (run, chunk,
    for a borrowed slot the pool lanes, and the phase: COMPLETE for a copy or a result, TAKEN
    for a partial, which a helper's stored result would have made COMPLETE); else a copy
    becomes a STALE bounce and a result or a partial is dropped, since its high words may be
    another sum's. A report goes to the CPU port."""
    held = m["run_class"] == RUN_SAME and m["situation"] == SIT_HELD and not m["lanes_away"]
    if m["pass_response"] == RESPOND_REPORT:
        return "p3_cpu"
    if m["pass_response"] == RESPOND_COPY:
        return "p3_unicast" if held and m["phase"] == PHASE_COMPLETE else "p3_stale"
    described = {RESPOND_RESULT: PHASE_COMPLETE, RESPOND_PARTIAL: PHASE_TAKEN}
    return "p3_job" if held and m["phase"] == described.get(m["pass_response"]) else "p3_drop"


def pass_two(m: dict) -> str:
    """How pass 2 answers (respond.p4's ``answer`` in pass 2). A sum leaves only while the
    aggregator holds the chunk (run and chunk compared again) and the lanes hold exactly the
    contributions ``contributors`` counts (contributors XOR the workers whose lanes the gate
    had is 0, or, for a contribution, its own bit, which it has just added): the first pass 2
    to find a complete chunk so, whatever order the passes 2 came in, answers with the
    result, a retransmission's with a copy; the rest is dropped (summed, or waiting for
    lanes)."""
    response, phase = m["response"], m["phase"]
    if response == RESPOND_HELPER_RESULT:
        return "helper_result"
    if response == RESPOND_REPORT:
        if m["lane_op"] == LANES_CLEAR:
            return "p2_cleared"
        return "p2_report_loop"
    missing = m["gate_bits"]   # by now contributors XOR the workers whose lanes were in
    own = 1 << (m["worker"] & 31)
    held = m["run_class"] == RUN_SAME and m["situation"] == SIT_HELD
    whole = held and missing == 0
    own_last = held and missing == own   # its own lanes, just added, were the last
    if response == RESPOND_COPY and phase == PHASE_COMPLETE and (
            whole or (own_last and m["lane_op"] == LANES_REPAIR)):
        return "p2_copy_loop"
    if response == RESPOND_PARTIAL and whole and phase == PHASE_TAKEN:
        return "p2_partial_loop"
    if response == RESPOND_ABSORB and m["lane_op"] == LANES_GATED and phase == PHASE_COMPLETE \
            and (whole or own_last):
        return "p2_result_loop"
    return "p2_absorb"


def lanes_gate_op(m: dict) -> str:
    """What the lanes' gate does in a pass (lanes.p4): a contribution joins it (and claims
    cells of another aggregation), a retransmission's lanes join and a helper's result
    replaces its workers only in cells of their own aggregation, a read of the low words
    asks it."""
    if not m["lanes_valid"]:
        return "NoAction"
    return {LANES_GATED: "lanes_gate_do_join", LANES_REPAIR: "lanes_gate_do_join_same",
            LANES_STORE: "lanes_gate_do_replace_same", LANES_LOAD: "lanes_gate_do_read"}.get(
                m["lane_op"], "NoAction")


def lane_op(m: dict) -> str:
    """What a lane register does (lanes.p4's ``lanes_<i>_op``, as store, add, read_lo or
    read_hi) on the gate's answer (gate_bits): in cells of another aggregation (0) a
    contribution stores, a retransmission's lanes only read, a helper's result does nothing;
    in this aggregation's, a worker whose lanes are in reads, another adds, a helper's result
    stores."""
    if not m["lanes_valid"]:
        return "NoAction"
    op, answer = m["lane_op"], m["gate_bits"]
    if op in (LANES_GATED, LANES_REPAIR):
        if answer == 0:
            return "store" if op == LANES_GATED else "read_lo"
        return "read_lo" if answer >> (m["worker"] & 31) & 1 else "add"
    if op == LANES_STORE:
        return "store" if answer else "NoAction"
    return {LANES_CLEAR: "store", LANES_LOAD: "read_lo", LANES_HIGH: "read_hi",
            LANES_ADD: "add"}.get(op, "NoAction")


def lanes_gate_resolve(m: dict) -> tuple[str, tuple[int, ...]]:
    """A contribution's operation as the gate chose it (``lane_op`` above), for the lanes
    after stage 1 (lanes.p4)."""
    if m["lane_op"] not in (LANES_GATED, LANES_REPAIR, LANES_STORE):
        return "NoAction", ()
    chosen = lane_op({**m, "lanes_valid": 1})
    return "resolve", ({"store": LANES_STORE, "read_lo": LANES_LOAD, "add": LANES_ADD,
                        "NoAction": LANES_KEEP}[chosen],)


def member_sel(m: dict) -> str:
    if _data(m, SIT_NEWER) or (_data(m, SIT_HELD) and m["scale_ok"] == 1):
        return "do_member_join"
    return "NoAction"


def progress_check_sel(m: dict) -> str:
    """The delta progress_check adds, in progress_in, where no claim needs progress_in; or,
    for a chunk whose pool lanes are busy, the word its claim writes (TAKEN, count 1)."""
    away = m["lanes_away"]   # a start: busy; a held chunk: no longer its lanes (§4.6)
    if _data(m, SIT_NEWER):
        return "start_taken" if away else "NoAction"
    if m["pass"] == PASS_STATE and m["kind"] == KIND_HELPER_RESULT and m["situation"] == SIT_HELD:
        return "check_nothing" if away else "NoAction"
    if _data(m, SIT_HELD) and m["scale_ok"] == 1:
        return "check_duplicate"
    if (m["pass"] == PASS_STATE and m["kind"] == KIND_TAKEOVER
            and m["situation"] == SIT_HELD and not m["lanes_away"]):
        return "check_takeover"
    return "check_nothing"


def progress_sel(m: dict) -> str:
    if m["pass"] == PASS_HIGH:   # a read (progress_in is 0): the phase, for the answer
        return "do_progress_check"
    if m["pass"] != PASS_STATE:
        return _pass_two(m, "do_progress_claim", "do_progress_check")
    if m["kind"] == KIND_NONE:
        return "NoAction"
    if _data(m, SIT_NEWER):
        return "do_progress_claim"
    if _data(m, SIT_HELD) and m["scale_ok"] == 1 and m["is_member"] == 0:
        return "do_progress_add"
    if m["kind"] == KIND_HELPER_RESULT and m["situation"] == SIT_HELD:
        return "do_progress_check" if m["lanes_away"] else "do_progress_helper"
    return "do_progress_check"


def contributors_sel(m: dict) -> str:
    if m["pass"] != PASS_STATE:
        return _pass_two(m, "do_contributors_helper", "do_contributors_read")
    if m["kind"] == KIND_NONE:
        return "NoAction"
    if _data(m, SIT_NEWER):
        return "do_contributors_claim"
    if m["kind"] == KIND_HELPER_RESULT:   # the helper's bitmap, if stored; a bounce's reads;
        stored = m["situation"] == SIT_HELD and m["phase"] == PHASE_TAKEN and not m["lanes_away"]
        if stored:                          # else the helper's own bitmap stays
            return "do_contributors_helper"
        return "do_contributors_read" if m["situation"] == SIT_OLD_RUN else "NoAction"
    if _data(m, SIT_HELD) and m["scale_ok"] == 1 and m["phase"] == PHASE_AGGREGATING:
        return "do_contributors_join"
    return "do_contributors_read"


def max_exp_sel(m: dict) -> str:
    if _data(m, SIT_NEWER):
        return "do_max_exp_claim"
    if (m["pass"] == PASS_STATE and m["kind"] == KIND_HELPER_RESULT
            and m["situation"] == SIT_HELD and m["phase"] == PHASE_TAKEN):
        return "NoAction" if m["lanes_away"] else "do_max_exp_claim"
    if (_data(m, SIT_HELD) and m["scale_ok"] == 1 and m["phase"] == PHASE_AGGREGATING
            and m["is_member"] == 0):
        return "do_max_exp_raise"
    return _pass_two(m, "do_max_exp_claim", "do_max_exp_read")


def helper_id_sel(m: dict) -> str:
    held = m["pass"] == PASS_STATE and m["situation"] == SIT_HELD
    if _data(m, SIT_NEWER) and m["lanes_away"]:   # busy: the sender, as its helper
        return "do_helper_id_write"
    if (held and m["kind"] == KIND_TAKEOVER and m["phase"] in (PHASE_AGGREGATING, PHASE_TAKEN)
            and not m["lanes_away"]):
        return "do_helper_id_write"
    if held and m["kind"] in (KIND_DATA, KIND_PROBE) and m["phase"] == PHASE_TAKEN:
        return "do_helper_id_read"
    return _pass_two(m, "do_helper_id_write", "do_helper_id_read", report_only=True)


def decide(m: dict) -> tuple[str, tuple[int, ...]]:
    """Pass 1's answer, in the order of docs/protocol.md §4.2-§4.4 and §4.6 (``kept``: the
    lanes are still this aggregator's, always so for an own slot)."""
    kind, sit, phase = m["kind"], m["situation"], m["phase"]
    kept = not m["lanes_away"]
    if sit == SIT_OLD_RUN:
        return "bounce", (P.Bounce.OLD_RUN,)
    if kind == KIND_PROBE:
        if sit == SIT_HELD and phase == PHASE_COMPLETE:
            return ("respond", (RESPOND_COPY, LANES_LOAD)) if kept else (
                "bounce", (P.Bounce.STALE,))
        if sit == SIT_HELD and phase == PHASE_TAKEN:
            return "bounce", (P.Bounce.TAKEN,)
        if sit == SIT_HELD:
            return "respond", (RESPOND_PENDING, LANES_KEEP)
        return "bounce", (P.Bounce.NOT_HELD if sit == SIT_NEWER else P.Bounce.STALE,)
    if kind == KIND_UNEXPECTED:
        return "not_expected", ()
    if kind == KIND_DATA:
        return _decide_data(m)
    if kind == KIND_TAKEOVER:
        if sit != SIT_HELD or not kept:
            return "bounce", (P.Bounce.NOT_HELD,)
        if phase == PHASE_COMPLETE:
            return "respond", (RESPOND_COPY, LANES_LOAD)
        return "respond", (RESPOND_PARTIAL, LANES_LOAD)
    if kind == KIND_HELPER_RESULT:
        stored = sit == SIT_HELD and phase == PHASE_TAKEN and kept
        return "respond", (RESPOND_HELPER_RESULT, LANES_STORE if stored else LANES_KEEP)
    return "NoAction", ()


def _decide_data(m: dict) -> tuple[str, tuple[int, ...]]:
    sit, phase = m["situation"], m["phase"]
    if sit == SIT_NEWER and m["lanes_away"]:   # busy: its own lanes are the partial
        return "respond", (RESPOND_PARTIAL, LANES_KEEP)
    if sit == SIT_NEWER:
        return "respond", (RESPOND_ABSORB, LANES_GATED)
    if sit == SIT_OLDER:
        return "bounce", (P.Bounce.STALE,)
    if phase == PHASE_TAKEN:
        return "bounce", (P.Bounce.TAKEN,)
    if m["scale_ok"] == 0:
        return "bounce", (P.Bounce.SCALE_MISMATCH,)
    if phase == PHASE_COMPLETE:
        if m["lanes_away"]:   # the result's pool lanes went on
            return "bounce", (P.Bounce.STALE,)
        # a worker the chunk counts brings its lanes again (its pass 2 may have been lost);
        # any other gets the lanes as they are
        counted = m["bitmap"] >> (m["worker"] & 31) & 1   # contributors, read into the header
        return "respond", (RESPOND_COPY, LANES_REPAIR if counted else LANES_LOAD)
    # every contribution goes to the lanes' gate
    if m["is_member"] and not m["dup_done"]:   # PENDING (own lanes), unless the fan-in was
        return "respond", (RESPOND_PENDING, LANES_KEEP)  # lowered: then it completes the chunk
    return "respond", (RESPOND_ABSORB, LANES_GATED)


SELECTORS = {
    "run_id_sel": run_id_sel, "chunk_id_sel": chunk_id_sel,
    "generation_sel": generation_sel, "agreed_scale_sel": agreed_scale_sel,
    "lane_holder_sel": lane_holder_sel, "member_sel": member_sel,
    "progress_check_sel": progress_check_sel,
    "progress_sel": progress_sel, "contributors_sel": contributors_sel,
    "max_exp_sel": max_exp_sel, "helper_id_sel": helper_id_sel,
}
