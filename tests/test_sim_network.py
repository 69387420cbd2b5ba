"""The simulator's collectives against closed forms (sim/collectives.py, sim/aggregation.py):
NCCL-style ring allreduce, the parameter server, streaming through one switch, the window, the
switch's pipeline rate, a leaf-spine hierarchy and retransmission delays. Each expected time is
derived here from first principles (the path of the last packet, the alpha-beta model), not
read from the simulator."""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from sim.aggregation import CallPlan, SwitchAggregation, SwitchPipeline, retransmission_delay
from sim.collectives import ParameterServer, RingAllreduce
from sim.network import Network, SwitchConfig

NET = Network(bandwidth_bps=100e9, latency_s=2.5e-6, step_s=2e-6, host_add_Bps=20e9)


def everyone(n: int, fanin: int | None = None) -> CallPlan:
    return CallPlan(np.ones(n, bool), fanin or n)


def run(engine, ready, plan, joined=None):
    proc = engine.env.process(engine.run(ready, plan, joined))
    engine.env.run()
    return proc.value


@pytest.mark.parametrize("n", [2, 3, 8, 33])
def test_ring_matches_the_alpha_beta_closed_form(n):
    """2(n - 1) steps of S/n bytes, each paying the link latency and the per-step cost:
    bandwidth term 2(n - 1)/n S / bw."""
    size = 25 << 20
    ring = RingAllreduce(simpy.Environment(), n, NET, [size])
    out = run(ring, np.zeros((n, 1)), everyone(n), np.zeros(n))
    expected = 2 * (n - 1) * (size / n / NET.bulk_Bps + NET.latency_s + NET.step_s)
    np.testing.assert_allclose(out.delivered, expected, rtol=1e-12)


def test_ring_finishes_a_full_ring_time_after_its_last_worker_joins():
    n, late, size = 8, 0.01, 1 << 20
    ring = RingAllreduce(simpy.Environment(), n, NET, [size])
    joined = np.zeros(n)
    joined[5] = late
    out = run(ring, np.full((n, 1), np.nan), everyone(n), joined)
    ring_time = 2 * (n - 1) * (size / n / NET.bulk_Bps + NET.latency_s + NET.step_s)
    assert out.delivered.max() == pytest.approx(late + ring_time, rel=1e-12)
    assert out.delivered.min() > late  # nobody has the sum before the last part exists


@pytest.mark.parametrize("servers", [None, 1])
def test_parameter_server_push_sum_pull(servers):
    """Every server receives n shards of S/m bytes, sums them on its host and sends them back
    to n workers (incast both ways when servers are few)."""
    n, size = 4, 8 << 20
    ps = ParameterServer(simpy.Environment(), n, NET, [size], servers=servers)
    out = run(ps, np.zeros((n, 1)), everyone(n), np.zeros(n))
    m = servers or n
    shard_in = n * size / m / NET.bulk_Bps
    push = max(shard_in, size / NET.bulk_Bps + NET.step_s)
    expected = (push + NET.latency_s + n * size / m / NET.host_add_Bps + shard_in
                + NET.step_s + NET.latency_s)
    np.testing.assert_allclose(out.delivered, expected, rtol=1e-12)


def switch_engine(n, nbytes, switch=None, max_blocks=1):
    return SwitchAggregation(simpy.Environment(), n, NET, switch or SwitchConfig(), [nbytes],
                             np.random.default_rng(0), max_blocks=max_blocks)


def test_one_switch_streams_a_bucket_at_line_rate():
    """The last packet: P packet times on the uplink, the latency to the switch, its result's
    packet time on the downlink and the latency back."""
    n, packets = 8, 3000
    engine = switch_engine(n, packets * NET.payload_bytes)
    out = run(engine, np.zeros((n, 1)), everyone(n))
    t = 1 / NET.pps
    np.testing.assert_allclose(out.delivered, (packets + 1) * t + 2 * NET.latency_s, rtol=1e-12)
    assert out.summed.all()


def test_a_one_aggregator_window_is_stop_and_wait():
    packets = 20
    engine = switch_engine(4, packets * NET.payload_bytes, SwitchConfig(slots=1),
                           max_blocks=packets)
    out = run(engine, np.zeros((4, 1)), everyone(4))
    round_trip = 2 / NET.pps + 2 * NET.latency_s
    np.testing.assert_allclose(out.delivered, packets * round_trip, rtol=1e-12)


def test_the_hosts_turnaround_lengthens_each_round_trip_of_the_window():
    """Stop-and-wait again, the next packet sent a turnaround after the result came; and a
    block of many packets through a small window streams ``slots`` packets a round trip."""
    packets, turnaround = 20, 40e-6
    net = Network(bandwidth_bps=100e9, latency_s=2.5e-6, turnaround_s=turnaround)
    engine = SwitchAggregation(simpy.Environment(), 4, net, SwitchConfig(slots=1),
                               [packets * net.payload_bytes], np.random.default_rng(0),
                               max_blocks=packets)
    out = run(engine, np.zeros((4, 1)), everyone(4))
    round_trip = 2 / net.pps + 2 * net.latency_s
    np.testing.assert_allclose(out.delivered, packets * round_trip + (packets - 1) * turnaround,
                               rtol=1e-12)
    slots, packets = 8, 800
    engine = SwitchAggregation(simpy.Environment(), 4, net, SwitchConfig(slots=slots),
                               [packets * net.payload_bytes], np.random.default_rng(0),
                               max_blocks=1)
    out = run(engine, np.zeros((4, 1)), everyone(4))
    stream = packets * (round_trip + turnaround) / slots  # the window's pace, not the link's
    expected = stream + net.latency_s + 1 / net.pps + net.latency_s  # the last one's result
    np.testing.assert_allclose(out.delivered, expected, rtol=1e-12)


def test_jobs_on_one_switch_share_its_pipeline():
    """Two jobs' calls reach the switch together: its pipeline sums one's contributions after
    the other's, so the second finishes a whole call's pipeline time after the first; alone,
    each takes one."""
    n, packets, agg, done = 4, 38, 95e3, 55e3
    switch = SwitchConfig(pipeline_pps=agg, complete_pps=done)
    env, pipeline = simpy.Environment(), SwitchPipeline()
    engines = [SwitchAggregation(env, n, NET, switch, [packets * NET.payload_bytes],
                                 np.random.default_rng(0), max_blocks=1, pipeline=pipeline)
               for _ in range(2)]
    procs = [env.process(e.run(np.zeros((n, 1)), everyone(n))) for e in engines]
    env.run()
    t, work = 1 / NET.pps, (n - 1) * packets / agg + packets / done
    ends = sorted(float(p.value.delivered.max()) for p in procs)
    np.testing.assert_allclose(ends, [t + NET.latency_s + k * work + t + NET.latency_s
                                      for k in (1, 2)], rtol=1e-12)


def test_the_switch_pipeline_rate_bounds_an_allreduce():
    """Contributions arriving together are summed one after another: n - 1 at the aggregating
    rate, the last (completing, multicast) at the completing rate."""
    n, packets, agg, done = 4, 38, 95e3, 55e3
    engine = switch_engine(n, packets * NET.payload_bytes,
                           SwitchConfig(pipeline_pps=agg, complete_pps=done))
    out = run(engine, np.zeros((n, 1)), everyone(n))
    t = 1 / NET.pps
    expected = t + NET.latency_s + (n - 1) * packets / agg + packets / done + t + NET.latency_s
    np.testing.assert_allclose(out.delivered, expected, rtol=1e-12)


def test_a_leaf_spine_hierarchy_adds_the_spine_hops():
    """Two racks: the last packet also crosses a leaf-spine link up and down."""
    packets, spine_bw, spine_lat = 500, 400e9, 1e-6
    switch = SwitchConfig(rack_size=2, spine_bandwidth_bps=spine_bw, spine_latency_s=spine_lat)
    engine = switch_engine(4, packets * NET.payload_bytes, switch)
    out = run(engine, np.zeros((4, 1)), everyone(4))
    t, t_spine = 1 / NET.pps, 8 * NET.frame_bytes / spine_bw
    expected = (packets + 1) * t + 2 * t_spine + 2 * NET.latency_s + 2 * spine_lat
    np.testing.assert_allclose(out.delivered, expected, rtol=1e-12)


def test_one_rack_is_the_flat_switch():
    flat = run(switch_engine(32, 1 << 20), np.zeros((32, 1)), everyone(32))
    racked = run(switch_engine(32, 1 << 20, SwitchConfig(rack_size=32)), np.zeros((32, 1)),
                 everyone(32))
    np.testing.assert_array_equal(flat.delivered, racked.delivered)


def test_retransmission_delays_follow_the_loss_rate():
    """A stream of p packets needs at least one retransmission with probability
    1 - (1 - q)^p, two in a row with 1 - (1 - q^2)^p; each doubles the timeout."""
    p, q, rto = 50, 0.01, 1e-3
    delays = retransmission_delay(p, q, rto, np.random.default_rng(1), 200_000)
    assert set(np.unique(delays)) <= {0.0, rto, 3 * rto, 7 * rto}
    assert np.mean(delays > 0) == pytest.approx(1 - (1 - q) ** p, rel=0.02)
    assert np.mean(delays > rto) == pytest.approx(1 - (1 - q * q) ** p, rel=0.2)
