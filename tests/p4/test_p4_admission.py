"""Job isolation, anti-spoofing, bad input, membership, the drop simulator, L2 forwarding and
the counters: every bad packet is dropped, counted, and touches no aggregator."""

import struct

import numpy as np
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.packet import raw

from control_plane.controls.drop_simulator import loss_threshold
from protocol import constants as P
from protocol.codec import Endpoint, Frame, Header, encode_frame
from tests.p4.packets import PORTS, SWITCH, Job, assert_result_to_all, job_spec

ONES = np.ones(P.LANES, np.int32)


def admitted(target, controller, n=3, job_id=4, **kwargs) -> Job:
    job = Job(job_spec(job_id, n, **kwargs), target)
    controller.admit(job.spec)
    return job


def drops(controller, job_id=None) -> dict:
    return controller.counters(job_id)["ingress"]["drops"]


def all_aggregators_empty(controller, job: Job) -> bool:
    states = [s for slot in range(job.spec.slots) for s in controller.read_slot(job.spec.id, slot)]
    return all(s.state == P.SlotState.EMPTY for s in states)


def with_ip_checksum(buf: bytearray) -> bytes:
    buf[24:26] = b"\0\0"
    total = sum(struct.unpack("!10H", bytes(buf[14:34])))
    total = (total & 0xFFFF) + (total >> 16)
    buf[24:26] = struct.pack("!H", ~total & 0xFFFF)
    return bytes(buf)


def test_admission_entries_read_back_equal_the_spec(target, controller):
    job = admitted(target, controller, n=3, job_id=9, slots=6)
    [cfg] = controller.read_jobs().values()
    placed = controller.jobs[9]
    assert (cfg.job_id, cfg.window, cfg.slots, cfg.fan_in, cfg.expected) == (9, 6, 6, 3, 0b111)
    assert (cfg.slot_base, cfg.job_index, cfg.group) == (placed.slot_base, placed.job_index,
                                                         placed.group)
    workers = controller.read_entries(controller.plan.admission.workers_table)
    assert sorted(dict(e.match)["sm.ingress_port"] for e in workers) == [1, 2, 3]
    replicas = controller.read_entries(controller.plan.replica_rewrite.table)
    assert sorted(dict(e.params)["udp_port"] for e in replicas) == [
        w.udp_port for w in job.spec.workers]
    assert controller.read_groups()[placed.group].replicas == ((1, 0), (2, 1), (3, 2))


def test_unknown_job_is_dropped_and_counted(target, controller):
    job = admitted(target, controller)
    stranger = Job(job_spec(77, 3), target)  # never admitted
    assert stranger.data(0, 0, ONES) == []
    assert drops(controller)["UNKNOWN_JOB"] == 1
    assert all_aggregators_empty(controller, job)


@pytest.mark.parametrize("spoof", ["port", "mac", "ip", "worker"])
def test_a_worker_can_only_speak_from_its_own_port_and_addresses(target, controller, spoof):
    job = admitted(target, controller)
    w = job.spec.worker(0)
    src = Endpoint(w.mac, w.ip, w.udp_port)
    port, worker = w.port, 0
    if spoof == "port":
        port = 2
    elif spoof == "mac":
        src = Endpoint("02:00:00:00:aa:aa", w.ip, w.udp_port)
    elif spoof == "ip":
        src = Endpoint(w.mac, "10.9.9.9", w.udp_port)
    else:
        worker = 1  # claims to be worker 1 from worker 0's port
    frame = encode_frame(Frame(src, SWITCH, Header(op=P.Op.DATA, job=job.spec.id, worker=worker,
                                                   scale=0x8000), ONES))
    assert target.send(port, frame) == []
    assert drops(controller, job.spec.id)["UNREGISTERED"] == 1
    assert all_aggregators_empty(controller, job)


def test_slot_outside_the_jobs_range_is_dropped(target, controller):
    job = admitted(target, controller, slots=4)
    assert job.data(0, 0, ONES, slot=4) == []
    assert drops(controller, job.spec.id)["SLOT_RANGE"] == 1
    assert all_aggregators_empty(controller, job)


@pytest.mark.parametrize("damage", ["truncated", "version", "checksum", "short_header"])
def test_malformed_packets_are_dropped(target, controller, damage):
    job = admitted(target, controller)
    buf = bytearray(job.frame(0, P.Op.DATA, 0, ONES, scale=0x8000))
    if damage == "truncated":
        buf = buf[:P.FRAME_LEN - 10]
    elif damage == "short_header":
        buf = buf[:P.ETH_LEN + P.IPV4_LEN + P.UDP_LEN + 10]
    elif damage == "version":
        buf[42] = (P.VERSION + 1) << 4 | P.Op.DATA
    else:
        buf[24] ^= 0xFF
    assert target.send(1, bytes(buf)) == []
    assert drops(controller)["MALFORMED"] == 1
    assert all_aggregators_empty(controller, job)


@pytest.mark.parametrize("op", [P.Op.RESULT, P.Op.BOUNCE, P.Op.PARTIAL, 0, 9])
def test_ops_only_the_switch_may_send_are_dropped(target, controller, op):
    job = admitted(target, controller)
    buf = bytearray(job.frame(0, P.Op.DATA, 0, ONES))
    buf[42] = (P.VERSION << 4) | op
    assert target.send(1, bytes(buf)) == []
    assert drops(controller, job.spec.id)["BAD_OP"] == 1


def test_fan_in_change_takes_effect_on_the_next_packet(target, controller):
    job = admitted(target, controller, n=3)
    job.data(0, 0, ONES)
    job.data(1, 0, 2 * ONES)
    controller.set_membership(job.spec.id, fan_in=2)  # k-of-n: 2 of 3
    outs = job.data(1, 0, 2 * ONES)  # a retransmission now completes the chunk
    assert_result_to_all(job, outs, 0, 3 * ONES, 0b011, 2)
    [(_, late)] = job.data(2, 0, 4 * ONES)  # the third worker gets the sum without it
    assert late.header.flags & P.Flag.COPY and late.header.bitmap == 0b011
    np.testing.assert_array_equal(late.lanes, 3 * ONES)
    outs = job.data(0, 1, ONES)
    assert outs == []
    outs = job.data(2, 1, 4 * ONES)
    assert_result_to_all(job, outs, 1, 5 * ONES, 0b101, 2)


def test_excluded_worker_is_dropped_and_the_rest_aggregate(target, controller):
    job = admitted(target, controller, n=3)
    controller.set_membership(job.spec.id, fan_in=2, expected=0b011)  # DPAR-style exclusion
    assert job.data(2, 0, ONES) == []
    assert drops(controller, job.spec.id)["NOT_EXPECTED"] == 1
    job.data(0, 0, ONES)
    outs = job.data(1, 0, ONES)
    assert_result_to_all(job, outs, 0, 2 * ONES, 0b011, 2)
    controller.set_membership(job.spec.id, fan_in=3, expected=0b111)  # readmitted
    job.data(2, 1, ONES)
    job.data(0, 1, ONES)
    outs = job.data(1, 1, ONES)
    assert_result_to_all(job, outs, 1, 3 * ONES, 0b111, 3)


def test_inband_fan_in_only_where_the_job_allows_it(target, controller):
    allowed = admitted(target, controller, n=3, job_id=4, inband_fanin=True)
    allowed.data(0, 0, ONES, fanin=2)
    outs = allowed.data(2, 0, ONES, fanin=2)
    assert_result_to_all(allowed, outs, 0, 2 * ONES, 0b101, 2)
    strict = admitted(target, controller, n=3, job_id=6)
    strict.data(0, 0, ONES, fanin=2)
    assert strict.data(2, 0, ONES, fanin=2) == []  # still waits for all three


def test_drop_simulator_drops_sa_atp_only_and_counts(target, controller):
    job = admitted(target, controller, n=2)
    controller.set_loss(1.0)
    assert job.data(0, 0, ONES) == []
    assert drops(controller, job.spec.id)["SIM"] == 1
    arp = raw(Ether(src="02:00:00:00:04:01", dst="ff:ff:ff:ff:ff:ff") / ARP(pdst="10.4.0.2"))
    assert sorted(p for p, _ in target.send(1, arp)) == [p for p in PORTS if p != 1]
    controller.set_loss(0.0)
    job.data(0, 0, ONES)
    assert_result_to_all(job, job.data(1, 0, ONES), 0, 2 * ONES, 0b11, 2)


def test_drop_simulator_loses_about_the_configured_fraction(target, controller):
    job = admitted(target, controller, n=2, slots=1)
    controller.set_loss(0.3)
    sent = 400
    duplicate = job.frame(0, P.Op.DATA, 0, ONES, scale=0x8000)  # a bounce unless dropped
    for _ in range(sent // 40):
        target.send_many(1, [duplicate] * 40)
    dropped = drops(controller, job.spec.id)["SIM"]
    # two-sided binomial bounds, p = 0.3, n = 400: mean 120, sd 9.2; 5 sd either way
    assert 120 - 46 < dropped < 120 + 46
    assert loss_threshold(0.3) == round(0.3 * 2**32)


def test_egress_drop_simulator_on_one_port(target, controller):
    job = admitted(target, controller, n=2)
    controller.set_loss(1.0, port=2, direction="egress")
    job.data(0, 0, ONES)
    outs = job.data(1, 0, ONES)
    assert [p for p, _ in outs] == [1]  # worker 1's copy of the result was lost
    assert controller.counters(job.spec.id)["egress"]["drops"]["SIM"] == 1


def test_l2_forwarding_of_ordinary_traffic(target, controller):
    job = admitted(target, controller, n=3)
    a, b = job.endpoint(0), job.endpoint(2)
    tcp_like = raw(Ether(src=a.mac, dst=b.mac) / IP(src=a.ip, dst=b.ip) / UDP(dport=29500))
    [(port, out)] = target.send(1, tcp_like)
    assert port == 3 and out == tcp_like
    unknown = raw(Ether(src=a.mac, dst="02:99:99:99:99:99") / IP(src=a.ip, dst="10.9.9.9"))
    assert sorted(p for p, _ in target.send(1, unknown)) == [p for p in PORTS if p != 1]


def test_counters_follow_the_traffic(target, controller):
    job = admitted(target, controller, n=2)
    job.data(0, 0, ONES)
    job.data(0, 0, ONES)  # pending duplicate -> bounce, to both workers
    job.data(1, 0, ONES)  # completes -> 2 results
    job.send(0, P.Op.TAKEOVER, 0)  # complete -> copy
    c = controller.counters(job.spec.id)
    assert c["ingress"]["packets"] == {"DATA": 3, "TAKEOVER": 1}
    assert c["egress"]["packets"] == {"BOUNCE": 2, "RESULT": 3}
    assert c["ingress"]["drops"] == {} and c["evictions"] == 0


def test_transit_jobs_are_forwarded_not_aggregated(target, controller):
    """On a switch that does not aggregate a job (the leaf of a two-level topology), any of its
    packets, results included, is forwarded by destination MAC and touches no aggregator."""
    job = Job(job_spec(12, 2), target)
    controller.add_transit(12)
    controller.add_host(job.endpoint(1).mac, 2)
    uplink = 8
    spine = Endpoint("02:00:00:00:00:fe", "10.0.0.254")
    controller.add_host(spine.mac, uplink)
    [(port, out)] = job.data(0, 0, ONES)
    assert port == uplink and out.header.op == P.Op.DATA
    result = job.frame(0, P.Op.RESULT, 0, ONES, dst=job.endpoint(1))
    [(port, out)] = target.send(uplink, result)
    assert port == 2 and out == result
    assert drops(controller) == {} and controller.read_jobs() == {}
