"""control Respond (p4src/tofino/respond.p4): how each pass answers, on the model's Phv."""

from __future__ import annotations

from protocol import constants as P
from tests.tofino.model import tables as T

STATES = {T.PHASE_EMPTY: P.SlotState.EMPTY, T.PHASE_COMPLETE: P.SlotState.COMPLETE,
          T.PHASE_TAKEN: P.SlotState.TAKEN, T.PHASE_AGGREGATING: P.SlotState.AGGREGATING}


def respond(phv) -> None:
    if phv.passno == T.PASS_STATE:
        _pass_one(phv)
    elif phv.passno == T.PASS_LANES and phv.meta["response"] != T.RESPOND_NONE:
        _pass_two(phv)
    elif phv.passno == T.PASS_HIGH:
        _pass_three(phv)


def _pass_one(phv) -> None:
    m, sa = phv.meta, phv.hdr.get("sa")
    if m["response"] == T.RESPOND_BOUNCE:
        _bounce(phv)   # a TAKEN bounce: helper_id_read put the helper in worker
        _reply_to_sender(phv)
        phv.tm["ucast"] = phv.ingress_port
    elif m["response"] == T.RESPOND_PENDING:   # to every worker: one question answers all
        _bounce(phv)
        sa["reason"] = P.Bounce.PENDING
        _from_switch(phv)
        _to_job(phv, m["job_group"])
    elif m["lane_op"] != T.LANES_KEEP:   # the aggregation the lanes' gate is asked about
        phv.tm["resubmit"] = {"lane_op": m["lane_op"], "response": m["response"],
                              "lane_index": m["lane_index"],
                              "gate_id": m["gen"] << 16 | m["index"]}
    elif m["response"] == T.RESPOND_HELPER_RESULT:
        sa["op"] = P.Op.RESULT
        sa["flags"] = (sa["flags"] & P.Flag.SET) | P.Flag.HELPER
        _from_switch(phv)
        _to_job(phv, m["job_group"])
    elif m["response"] == T.RESPOND_PARTIAL:   # pool lanes busy: the sender's own, to the job
        sa.update(op=P.Op.PARTIAL, reason=0, flags=sa["flags"] & P.Flag.SET,
                  bitmap=m["gate_bits"], count=1)   # the sender's bit, in pass 1
        _from_switch(phv)
        _to_job(phv, m["job_group"])


def _pass_two(phv) -> None:
    """What ``tables.pass_two`` picks: a sum round the loop, a report, or nothing."""
    m, sa = phv.meta, phv.hdr["sa"]
    action = T.pass_two({**m, "phase": (m["old_progress"] >> 16) & 3, "worker": sa["worker"]})
    if action == "p2_absorb":
        phv.tm["drop"] = True
        return
    response = {"p2_copy_loop": T.RESPOND_COPY, "p2_partial_loop": T.RESPOND_PARTIAL,
                "p2_result_loop": T.RESPOND_RESULT}.get(action, m["response"])
    if action in ("p2_copy_loop", "p2_partial_loop", "p2_result_loop"):
        _describe(phv, P.Op.PARTIAL if response == T.RESPOND_PARTIAL else P.Op.RESULT)
        if response == T.RESPOND_COPY:
            sa["flags"] |= P.Flag.COPY
            _reply_to_sender(phv)
        else:
            _from_switch(phv)
    elif action == "helper_result":
        sa["op"] = P.Op.RESULT
        sa["flags"] = (sa["flags"] & P.Flag.SET) | P.Flag.HELPER
        _from_switch(phv)
        _to_job(phv, m["job_group"])
        return
    elif action == "p2_cleared":
        m["old_progress"] = m["rd_scale"] = 0
        sa.update(bitmap=0, exp=0)
        _report(phv, P.SlotState.EMPTY)
        phv.tm["ucast"], phv.bridge["to_cpu"] = phv.ingress_port, 1
        return
    else:
        _report(phv, STATES[(m["old_progress"] >> 16) & 3])
    # round the loop for the high words
    phv.hdr["pass"] = {"response": response, "_pad0": 0, "job_index": m["job_index"],
                       "job_group": m["job_group"], "_pad1": 0, "port": phv.ingress_port,
                       "_pad3": 0, "lane_index": m["lane_index"]}
    phv.tm["ucast"] = m["loop_port"]
    phv.bridge["to_loop"] = 1


def _pass_three(phv) -> None:
    """Out to where pass 2 addressed it, if the aggregator still holds the chunk
    (``tables.pass_three``)."""
    m, route = phv.meta, phv.hdr.pop("pass")
    action = T.pass_three({**m, "pass_response": route["response"],
                           "phase": (m["old_progress"] >> 16) & 3})
    if action == "p3_drop":
        phv.tm["drop"] = True
    elif action == "p3_job":
        _to_job(phv, route["job_group"])
    else:   # p3_unicast, p3_cpu, p3_stale: back to the port pass 2 named
        if action == "p3_stale":
            sa = phv.hdr["sa"]
            sa.update(op=P.Op.BOUNCE, reason=P.Bounce.STALE, flags=sa["flags"] & P.Flag.SET)
        phv.tm["ucast"] = route["port"]
        phv.bridge["to_cpu"] = int(action == "p3_cpu")


def _bounce(phv) -> None:
    m, sa = phv.meta, phv.hdr["sa"]
    sa.update(op=P.Op.BOUNCE, reason=m["bounce_reason"],   # bitmap: read into the header
              count=m["old_progress"] & 0xFF)


def _describe(phv, op: int) -> None:
    m, sa = phv.meta, phv.hdr["sa"]
    sa.update(op=op, reason=0, flags=sa["flags"] & P.Flag.SET,   # bitmap, exp: in the header
              count=m["old_progress"] & 0xFF, scale=m["rd_scale"])


def _report(phv, state: int) -> None:
    sa = phv.hdr["sa"]
    _describe(phv, P.Op.RESULT)
    sa["reason"] = state   # run, chunk and worker: read into the header
    phv.hdr["packet_in"] = {"ingress_port": phv.ingress_port, "_pad": 0,
                            "opcode": phv.hdr["packet_out"]["opcode"],
                            "aggregator": phv.hdr["packet_out"]["aggregator"]}
    del phv.hdr["packet_out"]


def _reply_to_sender(phv) -> None:
    eth, ip, udp = phv.hdr["ethernet"], phv.hdr["ipv4"], phv.hdr["udp"]
    eth["dst_addr"], eth["src_addr"] = eth["src_addr"], eth["dst_addr"]
    ip["dst_addr"], ip["src_addr"] = ip["src_addr"], ip["dst_addr"]
    udp["dst_port"], udp["src_port"] = udp["src_port"], udp["dst_port"]
    udp["checksum"] = 0


def _from_switch(phv) -> None:
    eth, ip, udp = phv.hdr["ethernet"], phv.hdr["ipv4"], phv.hdr["udp"]
    eth["src_addr"], ip["src_addr"] = eth["dst_addr"], ip["dst_addr"]
    udp["src_port"], udp["checksum"] = P.UDP_PORT, 0


def _to_job(phv, group: int) -> None:
    phv.tm["mcast"] = group
    phv.bridge["to_job"] = 1
