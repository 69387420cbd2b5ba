"""A reference model of the TNA program (p4src/tofino/) that runs packets on a FakeSwitch.

It follows sa_atp_tna.p4 control by control and pass by pass (in one module, about 450 lines, so
that it reads side by side with the program's apply blocks): the tables look up what the
controller wrote to the FakeSwitch over BF Runtime, the registers are the FakeSwitch's cells and
change only through the RegisterActions of ``register_actions`` that the selector functions of
``tables`` pick, one per register per pass (checked as it runs). A packet's passes run one
after another, as a switch without other traffic in flight would run them.
"""

from __future__ import annotations

import random
from collections import defaultdict

from protocol import constants as P
from tests.tofino.fake_switch import FakeSwitch
from tests.tofino.model import register_actions, tables
from tests.tofino.model import tables as T
from tests.tofino.model.packet import Packet, deparse_egress, parse_egress, parse_ingress
from tests.tofino.model.respond import respond

AGGREGATING_BASE, COMPLETE_BASE = 0x30000, 0x10000


class RandomDraws:
    """The drop simulator's 32-bit random numbers."""

    def __init__(self, seed: int | None = None):
        self.rng = random.Random(seed)

    def lost(self, direction: str, threshold: int, **_) -> bool:
        """Whether a draw falls below ``threshold``; the keywords (port, job_index, and the
        copy's bytes at egress) let a test take the draws from another target."""
        return self.rng.getrandbits(32) < threshold


class Phv:
    """What one pass carries: the parsed packet and the metadata the program sets."""

    def __init__(self, packet: Packet, port: int, passno: int):
        self.packet, self.hdr, self.ingress_port, self.passno = packet, packet.hdr, port, passno
        self.meta = defaultdict(int, {"pass": passno})
        self.bridge = defaultdict(int, {"sa": int(packet.valid("sa")), "ingress_port": port})
        self.tm = {"ucast": None, "mcast": 0, "drop": False, "resubmit": None}

    def __getattr__(self, name):   # the fields RegisterActions read: meta.x, hdr.sa, hdr.lanes
        if name == "sa":
            return self.hdr["sa"]
        if name == "lanes":
            return self.hdr["lanes"]
        return self.meta[name]


class TnaModel:
    def __init__(self, switch: FakeSwitch, draws=None, actions=None, pipe_of=None):
        self.switch = switch
        self.pipe_of = pipe_of or (lambda port: port >> 7)   # Tofino: bits 8:7 of a port
        self.draws = draws or RandomDraws()
        self.actions = actions or register_actions.registry()
        self.touched: set[tuple[str, int]] = set()    # (register, index) of the last packet
        self.counted: set[tuple[str, int]] = set()    # (counter, index) of the last packet
        self.looped: list[tuple[int, bytes]] = []     # (loop port, frame) held before pass 3
        self.resubmitted: list[tuple[int, bytes, dict]] = []   # held before pass 2

    # -- a packet -------------------------------------------------------------------------------

    def process(self, port: int, frame: bytes, hold: bool = False,
                hold_resubmit: bool = False) -> list[tuple[int, bytes]]:
        """A frame's passes and what leaves the switch. With ``hold``, a frame sent round the
        loop port waits there (``looped``) until ``release``: other packets can go through
        between its passes 2 and 3, as on a switch. With ``hold_resubmit``, a resubmitted frame
        waits (``resubmitted``) before its pass 2 until ``release_resubmitted``: nothing
        Intel publishes says resubmission keeps packets in order or never drops one."""
        self.touched, self.counted = set(), set()
        self._ingress_length = len(frame)
        phv = self._ingress(port, frame, None)
        if phv.tm["resubmit"] is not None:
            if hold_resubmit:
                self.resubmitted.append((port, frame, phv.tm["resubmit"]))
                return []
            phv = self._ingress(port, frame, phv.tm["resubmit"])
        return self._after_pass_two(phv, hold)

    def release_resubmitted(self, index: int = 0, hold: bool = False) -> list[tuple[int, bytes]]:
        """Pass 2 (and 3, unless ``hold`` keeps it on the loop) of the ``index``-th held
        resubmitted frame, and what leaves."""
        port, frame, resub = self.resubmitted.pop(index)
        self.touched, self.counted = set(), set()
        self._ingress_length = len(frame)
        return self._after_pass_two(self._ingress(port, frame, resub), hold)

    def _after_pass_two(self, phv: Phv, hold: bool) -> list[tuple[int, bytes]]:
        if phv.tm["drop"]:
            return []
        if phv.bridge["to_loop"]:   # round the loop port: its egress passes it on untouched
            if hold:
                self.looped.append((phv.tm["ucast"], phv.packet.emit()))
                return []
            phv = self._ingress(phv.tm["ucast"], phv.packet.emit(), None)
            if phv.tm["drop"]:
                return []
        return self._leave(phv)

    def release(self, index: int = 0) -> list[tuple[int, bytes]]:
        """Pass 3 of the ``index``-th frame held on a loop port (0: the one held longest), and
        what leaves the switch: frames on different loop ports of a pipe may come back in any
        order."""
        self.touched, self.counted = set(), set()
        port, frame = self.looped.pop(index)
        phv = self._ingress(port, frame, None)
        return [] if phv.tm["drop"] else self._leave(phv)

    def _leave(self, phv: Phv) -> list[tuple[int, bytes]]:
        frame_out = phv.packet.emit()
        if phv.tm["mcast"]:
            copies = [(p, rid) for p, rid in self.switch.group(phv.tm["mcast"])]
        else:
            copies = [(phv.tm["ucast"], 0)] if phv.tm["ucast"] is not None else []
        outputs = []
        for out_port, rid in copies:
            out = self._egress(out_port, rid, frame_out, phv.bridge.copy())
            if out is not None:
                outputs.append((out_port, out))
        return outputs

    # -- ingress ---------------------------------------------------------------------------------

    def _ingress(self, port: int, frame: bytes, resub: dict | None) -> Phv:
        packet = parse_ingress(frame, port, resub is not None,
                               self.switch.value_set("pipe.SaAtpIngressParser.cpu_port"),
                               self.switch.value_set("pipe.SaAtpIngressParser.loop_ports"))
        passno = T.PASS_LANES if resub is not None else (
            T.PASS_HIGH if packet.valid("pass") else T.PASS_STATE)
        phv = Phv(packet, port, passno)
        if packet.valid("sa") and not packet.bad_version and passno != T.PASS_HIGH:
            sa = packet.hdr["sa"]   # the parser's gate_w<k> states, and gate_helper
            phv.meta["gate_bits"] = (sa["bitmap"] if sa["op"] == P.Op.HELPER_RESULT
                                     else 1 << (sa["worker"] & 31))
        self._executed: set[str] = set()
        m, hdr = phv.meta, phv.hdr
        rx_op, use_l2, received = 0, False, False
        if passno == T.PASS_STATE and not packet.valid("packet_out"):
            received = True
            m["port_frame"] = 1
            rx_op = hdr["sa"]["op"] if packet.valid("sa") else 0
            if packet.parser_error or packet.bad_version or packet.checksum_err:
                m["drop_reason"] = P.DropReason.MALFORMED
            m["spoofed"] = int(self._hit("SaAtpIngress.source_guard.switch_sources",
                                         {"hdr.ethernet.src_addr": hdr["ethernet"]["src_addr"]}))
            use_l2 = self._pass_one(phv, port)
        elif passno == T.PASS_STATE:
            phv.tm["resubmit"] = {}   # management: handled in pass 2
        elif passno == T.PASS_LANES and packet.valid("packet_out"):
            self._management(phv)
        elif passno == T.PASS_LANES:
            m.update(lane_op=resub["lane_op"], response=resub["response"],
                     lane_index=resub["lane_index"], gate_id=resub["gate_id"])
            self._job_again(phv)
        else:
            route = hdr["pass"]
            m.update(lane_op=T.LANES_HIGH, job_index=route["job_index"],
                     lane_index=route["lane_index"], pass_response=route["response"])
            self._job_again(phv)
        self._aggregator(phv)
        self._lanes(phv, T.LANES_KEEP if passno == T.PASS_STATE else m["lane_op"])
        if passno == T.PASS_LANES:   # the workers counted whose lanes the gate did not have
            m["gate_bits"] ^= phv.hdr["sa"]["bitmap"]   # (respond.p4's missing_sel)
        action, data, _ = self.switch.lookup("pipe.SaAtpIngress.passes.loop_port",
                                             {"ig_intr_md.ingress_port": port})
        if action == "SaAtpIngress.passes.to_loop":
            m["loop_port"] = data["port"]
        respond(phv)
        if use_l2:
            self._l2(phv)
        if received:
            self._stats("SaAtpIngress.stats", m["job_index"], rx_op, m["drop_reason"], True)
        if m["drop_reason"]:
            phv.tm["drop"] = True
        phv.bridge["transit"], phv.bridge["job_index"] = m["transit"], m["job_index"]
        return phv

    def _pass_one(self, phv: Phv, port: int) -> bool:
        """The admission's lookups, then ``admit`` (a drop reason, forwarding, HELPER_DATA on
        to its helper, or what the aggregator is asked); True if the packet is forwarded like
        any other traffic."""
        m, hdr = phv.meta, phv.hdr
        m["sa_valid"] = int(phv.packet.valid("sa"))
        sa = hdr["sa"] if m["sa_valid"] else {"op": 0, "flags": 0, "slot": 0}
        if m["drop_reason"] == 0 and m["sa_valid"]:   # only a well-formed SA-ATP frame
            self._lookups(phv, port)
        m["num_slots"] = max(m["num_slots"] - sa["slot"], 0)
        if tables.expected_sel(defaultdict(int, m, worker=sa.get("worker", 0))) == "is_expected":
            m["expected_worker"] = 1
        keys = defaultdict(int, m, op=sa["op"], flags=sa["flags"])
        action, args = tables.admit(keys)
        # the drop simulator's draw: taken only where the v1model program draws, i.e. where
        # the packet would otherwise be admitted (admit then drops it as DROP_SIM)
        if action in tables.ADMITTED and self._lost("SaAtpIngress.drop_sim", "ingress", port,
                                                   m["job_index"]):
            keys["loss_left"] = m["loss_left"] = 1
            action, args = tables.admit(keys)
        if action == "forward":
            m["use_l2"] = 1
            return True
        if action == "drop":
            m["drop_reason"] = args[0]
        elif action == "spoofed":
            m["drop_reason"], m["job_index"] = P.DropReason.SPOOFED, 0
        elif action == "helper_data":   # on to its helper, from the switch's address
            hdr["ethernet"]["src_addr"] = hdr["ethernet"]["dst_addr"]
            hdr["ipv4"]["src_addr"] = hdr["ipv4"]["dst_addr"]
            hdr["udp"]["src_port"], hdr["udp"]["checksum"] = P.UDP_PORT, 0
            phv.tm["ucast"] = m["helper_port"]
            phv.bridge["to_worker"] = 1   # to the helper the SA-ATP header's reason names
        elif action in ("admit", "admit_data"):
            m["kind"] = args[0] if args else T.KIND_DATA
        if m["sa_valid"]:
            self._prepare(phv)
        if action in tables.ADMITTED and action != "helper_data":   # the first register
            self._execute(phv, "valid", "valid_occupy" if action == "admit_data" else "valid_peek")
        return False

    def _lookups(self, phv: Phv, port: int) -> None:
        m, sa, hdr = phv.meta, phv.hdr["sa"], phv.hdr
        job = self.switch.lookup("pipe.SaAtpIngress.admission.jobs", {"hdr.sa.job": sa["job"]})
        if job[0] == "SaAtpIngress.admission.set_job":
            m.update({k: v for k, v in job[1].items() if k != "group"}, job_group=job[1]["group"])
        elif job[0] == "SaAtpIngress.admission.transit":
            m["transit"] = 1
        m["job_known"] = int(job[2])
        worker = self.switch.lookup("pipe.SaAtpIngress.admission.workers", {
            "hdr.sa.job": sa["job"], "hdr.sa.worker": sa["worker"],
            "ig_intr_md.ingress_port": port, "hdr.ethernet.src_addr": hdr["ethernet"]["src_addr"],
            "hdr.ipv4.src_addr": hdr["ipv4"]["src_addr"]})
        if worker[2]:   # its bit is the parser's (gate_bits)
            m["registered"] = 1
        helper = self.switch.lookup("pipe.SaAtpIngress.admission.worker_ports",
                                    {"hdr.sa.job": sa["job"], "hdr.sa.reason": sa["reason"]})
        if helper[2]:
            m["helper_known"], m["helper_port"] = 1, helper[1]["port"]

    def _job_again(self, phv: Phv) -> None:
        """Passes 2 and 3 look the job up again: the aggregator (admit_sel's locate), and
        whether the slot is a borrowed one (what is left of own_slots - slot)."""
        if phv.packet.valid("sa"):
            m, sa = phv.meta, phv.hdr["sa"]
            job = self.switch.lookup("pipe.SaAtpIngress.admission.jobs", {"hdr.sa.job": sa["job"]})
            if job[0] == "SaAtpIngress.admission.set_job":
                m["job_index"], m["job_group"] = job[1]["job_index"], job[1]["group"]
                m["slot_base"] = job[1]["slot_base"]
                m["own_slots"] = max(job[1]["own_slots"] - sa["slot"], 0)
            m["index"] = (((m["slot_base"] + sa["slot"]) & 0xFFF) << 1) | (sa["flags"] & P.Flag.SET)

    def _prepare(self, phv: Phv) -> None:
        """The values the aggregator's registers take (the P4 computes them for every SA-ATP
        frame; only an admitted one reads them)."""
        m, sa = phv.meta, phv.hdr["sa"]
        if tables.fan_in_sel(defaultdict(int, m, fanin=sa["fanin"])) == "inband_fanin":
            m["fan_in"] = sa["fanin"]
        slot = (m["slot_base"] + sa["slot"]) & 0xFFF
        m["index"] = (slot << 1) | (sa["flags"] & P.Flag.SET)
        # job_admission.p4: pool_base less own_slots, then own_slots less the slot (saturating)
        m["pool_base"] = (m["pool_base"] - m["own_slots"]) & 0xFFFF
        m["own_slots"] = max(m["own_slots"] - sa["slot"], 0)
        m["lane_index"] = m["index"]
        if tables.lanes_at_sel(m) == "pool_lanes":   # a borrowed slot: the pool's lanes
            pool_slot = (m["pool_base"] + sa["slot"]) & 0xFFF
            m["lane_index"] = (pool_slot << 1) | (sa["flags"] & P.Flag.SET)
        m["member_index"] = m["index"] * P.MAX_WORKERS + (sa["worker"] & 0x1F)
        m["limit_add"] = (AGGREGATING_BASE + m["fan_in"] - 1) & 0xFFFF_FFFF
        action, args = tables.start_sel(m)
        if action == "start_helper_result":
            m["progress_in"] = COMPLETE_BASE | sa["count"]
        elif action == "start_data":
            m["progress_in"] = args[0]

    def _management(self, phv: Phv) -> None:
        m, out = phv.meta, phv.hdr["packet_out"]
        known = out["opcode"] in (P.MGMT_READ_AGGREGATOR, P.MGMT_CLEAR_AGGREGATOR)
        if not (known and not phv.packet.parser_error and phv.packet.valid("lanes")
                and out["aggregator"] < P.NUM_AGGREGATORS):
            phv.tm["drop"] = True
            return
        m["index"], m["response"] = out["aggregator"], T.RESPOND_REPORT
        m["lane_index"] = out["aggregator"]
        clear = out["opcode"] == P.MGMT_CLEAR_AGGREGATOR
        m["kind"] = T.KIND_MGMT_CLEAR if clear else T.KIND_MGMT_READ
        if clear:   # what the claims write, and what the report says
            phv.hdr["sa"].update(run=0, chunk=0, scale=0, exp=0, worker=0, bitmap=0)
        m["lane_op"] = T.LANES_CLEAR if clear else T.LANES_LOAD

    # -- the aggregator and the lanes -------------------------------------------------------------

    def _aggregator(self, phv: Phv) -> None:
        m = phv.meta
        if not m["port_frame"] and tables.admit(m)[0] == "do_valid_vacate":   # pass 2's clear
            self._execute(phv, "valid", "valid_vacate")
        for name, select in tables.SELECTORS.items():
            m["phase"] = (m["old_progress"] >> 16) & 3
            action = select(m)
            if name == "progress_check_sel":
                if action != "NoAction":   # what it subtracts, in progress_in (aggregator.p4)
                    m["progress_in"] = {"check_duplicate": 0x20000, "check_takeover": 0x10000,
                                        "check_nothing": 0, "start_taken": 0x20001}[action]
                if action == "check_takeover":
                    m["limit_add"] = AGGREGATING_BASE - 1
                continue
            if action in ("situation_newer", "situation_old_run"):
                m["situation"] = T.SIT_NEWER if action == "situation_newer" else T.SIT_OLD_RUN
            elif action != "NoAction":
                self._execute(phv, name.removesuffix("_sel"), action.removeprefix("do_"))
        m["add_done"] = int(m["old_progress"] >= m["limit_add"])
        m["dup_done"] = int(m["old_progress"] > m["limit_add"])
        if m["pass"] == T.PASS_STATE and m["kind"] != T.KIND_NONE:
            sa = phv.hdr["sa"]   # decide keys on the header's worker and bitmap
            kind, args = tables.decide({**m, "bitmap": sa["bitmap"], "worker": sa["worker"]})
            if kind == "respond":
                m["response"], m["lane_op"] = args
            elif kind == "bounce":
                m["response"], m["bounce_reason"] = T.RESPOND_BOUNCE, args[0]
            elif kind == "not_expected":
                m["drop_reason"] = P.DropReason.NOT_EXPECTED
            if (m["kind"] == T.KIND_DATA and m["situation"] == T.SIT_NEWER
                    and (m["old_progress"] >> 16) & 3 == T.PHASE_AGGREGATING):
                self._count("pipe.SaAtpIngress.aggregator.evictions", m["job_index"])
        if m["kind"] in (T.KIND_MGMT_READ, T.KIND_MGMT_CLEAR):
            self._count("pipe.SaAtpIngress.aggregator.management",
                        phv.hdr["packet_out"]["opcode"])

    # what each RegisterAction's P4 action does with the value it returns
    RESULTS = {"valid_occupy": "was_valid", "valid_peek": "was_valid",
               "run_id_compare": "run_class", "run_id_compare_claim": "run_class",
               "chunk_id_compare": "situation", "chunk_id_compare_claim": "situation",
               "generation_bump": "gen", "generation_read": "gen",
               "agreed_scale_compare": "scale_ok", "agreed_scale_read": "rd_scale",
               "member_join": "is_member", "lane_holder_peek": "lanes_away",
               "lane_holder_claim_held": "lanes_away",
               "lane_holder_release": "lanes_away"}

    INTO_HEADER = {"run_id_read": "run", "chunk_id_read": "chunk", "helper_id_read": "worker",
                   "contributors_claim": "bitmap", "contributors_join": "bitmap",
                   "contributors_read": "bitmap", "contributors_helper": "bitmap",
                   "max_exp_read": "exp"}

    def _execute(self, phv: Phv, register: str, action: str) -> None:
        m = phv.meta
        index = {"member": m["member_index"], "lane_holder": m["lane_index"]}.get(register,
                                                                                   m["index"])
        rv = self._run(phv, f"pipe.SaAtpIngress.aggregator.{register}", register, action, index)
        if register == "progress":
            m["old_progress"] = rv
        elif action in self.RESULTS:
            m[self.RESULTS[action]] = rv
        elif action in self.INTO_HEADER:   # a report; a TAKEN bounce (its helper)
            phv.hdr["sa"][self.INTO_HEADER[action]] = rv
        if action == "chunk_id_claim":
            m["situation"] = T.SIT_NEWER

    def _lanes(self, phv: Phv, lane_op: int) -> None:
        """The lanes' gate, then the lane registers (lanes.p4), on the parser's operation."""
        m, sa = phv.meta, phv.hdr.get("sa") or {"worker": 0}
        keys = {"lanes_valid": int(phv.packet.valid("lanes")), "lane_op": lane_op,
                "worker": sa["worker"]}
        gate = tables.lanes_gate_op(keys)
        if gate != "NoAction":   # its answer in place of the workers it took
            action = gate.replace("_do_", "_")
            m["gate_bits"] = self._run(phv, "pipe.SaAtpIngress.lanes.lanes_gate",
                                       "lanes_gate", action, m["lane_index"]) or 0
        kind = tables.lane_op({**keys, "gate_bits": m["gate_bits"]})
        if kind == "NoAction":
            return
        half = P.LANES // 2
        for i in range(half):
            name = f"lanes_{i:02d}"
            rv = self._run(phv, f"pipe.SaAtpIngress.lanes.{name}", name, f"{name}_{kind}",
                           m["lane_index"])
            if kind in ("add", "read_lo"):
                phv.hdr["lanes"][i] = rv
            elif kind == "read_hi":
                phv.hdr["lanes"][i + half] = rv

    def _run(self, phv: Phv, table: str, register: str, action: str, index: int):
        """One RegisterAction on one cell, at most one per register per pass."""
        assert register not in self._executed, f"{register} executed twice in one pass"
        self._executed.add(register)
        pipe = self.pipe_of(phv.ingress_port)
        fields = self.switch.schema[table].actions[None]
        cell = [self.switch.register(table, pipe, index)[f] for f in fields]
        new, rv = self.actions[register][action](cell[0] if len(cell) == 1 else tuple(cell), phv)
        new = (new,) if len(fields) == 1 else new
        self.switch.set_register(table, pipe, index, dict(zip(fields, new, strict=True)))
        self.touched.add((register, index))
        return rv

    # -- the rest of ingress ----------------------------------------------------------------------

    def _hit(self, table: str, key: dict) -> bool:
        return self.switch.lookup(f"pipe.{table}", key)[2]

    def _lost(self, control: str, direction: str, port: int, job_index: int,
              packet: Packet | None = None) -> bool:
        _, data, _ = self.switch.lookup(f"pipe.{control}.loss", {"port": port})
        threshold = data.get("loss_threshold", 0)
        if threshold == 0:
            return False
        copy = None if packet is None else deparse_egress(_copied(packet))
        return self.draws.lost(direction, threshold, port=port, job_index=job_index, copy=copy)

    def _l2(self, phv: Phv) -> None:
        """dmac, then l2_sel (forwarding.p4)."""
        hdr, m = phv.hdr, phv.meta
        action, data, _ = self.switch.lookup("pipe.SaAtpIngress.l2.dmac",
                                             {"hdr.ethernet.dst_addr": hdr["ethernet"]["dst_addr"]})
        if action == "SaAtpIngress.l2.forward":
            m["l2_port"] = data["port"]
        else:
            m["l2_flood"] = 1
        udp = hdr.get("udp") or {"src_port": 0, "dst_port": 0}
        chosen = tables.l2_sel(defaultdict(int, m, udp_valid=int("udp" in hdr),
                                           src_port=udp["src_port"], dst_port=udp["dst_port"]))
        if chosen == "to_port":
            phv.tm["ucast"] = m["l2_port"]
        elif chosen == "no_flood":
            m["drop_reason"] = P.DropReason.NO_FLOOD
        elif chosen == "to_all":
            phv.tm["mcast"], phv.bridge["flood"] = P.FLOOD_GROUP, 1

    def _stats(self, control: str, job_index: int, op: int, reason: int, dropped_count: bool):
        if reason == 0 or dropped_count:
            self._count(f"pipe.{control}.packets", job_index * P.STATS_PER_JOB + op)
        if reason != 0:
            self._count(f"pipe.{control}.drops", job_index * P.STATS_PER_JOB + reason)

    def _count(self, counter: str, index: int) -> None:
        self.switch.count(counter, index, self._ingress_length)
        self.counted.add((counter, index))

    # -- egress ----------------------------------------------------------------------------------

    def _egress(self, port: int, rid: int, frame: bytes, bridge: dict) -> bytes | None:
        packet = parse_egress(frame, bridge)
        if bridge["to_loop"] or bridge["to_cpu"]:
            return deparse_egress(packet)
        m = {"drop_reason": 0, "dest_worker": 0}
        rewrite = pruned = False
        if bridge["to_job"]:
            m["dest_worker"], rewrite = rid & 0xFF, True
        elif bridge["to_worker"]:
            m["dest_worker"], rewrite = packet.hdr["sa"]["reason"], True
        elif bridge["flood"] and port == bridge["ingress_port"]:
            pruned = True
        hdr = packet.hdr
        if rewrite:
            action, data, _ = self.switch.lookup(
                "pipe.SaAtpEgress.replica_rewrite.replicas",
                {"hdr.sa.job": hdr["sa"]["job"], "meta.dest_worker": m["dest_worker"]})
            if action == "SaAtpEgress.replica_rewrite.to_worker":
                hdr["ethernet"]["dst_addr"], hdr["ipv4"]["dst_addr"] = data["mac"], data["ip"]
                hdr["udp"]["dst_port"] = data["udp_port"]
            else:
                m["drop_reason"] = P.DropReason.NO_REPLICA
        if pruned:
            return None
        tx_op = 0
        if packet.valid("sa") and not bridge["transit"]:
            tx_op = hdr["sa"]["op"]
            if not m["drop_reason"] and self._lost("SaAtpEgress.drop_sim", "egress", port,
                                                   bridge["job_index"], packet):
                m["drop_reason"] = P.DropReason.SIM
        self._stats("SaAtpEgress.stats", bridge["job_index"], tx_op, m["drop_reason"], False)
        return None if m["drop_reason"] else deparse_egress(packet)


def _copied(packet: Packet) -> Packet:
    return Packet({n: (list(h) if isinstance(h, list) else dict(h)) for n, h in packet.hdr.items()},
                  packet.payload)
