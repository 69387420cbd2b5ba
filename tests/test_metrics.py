"""Prometheus metrics, scraped over HTTP: each worker's per-call statistics (the communicator's
``metrics_listen`` option) against the CallStats its calls returned, and the switch's counters
(``sa-atp-ctl metrics``) against the same counters read through the controller; the two sides
agree with each other on the packets the workers sent."""

from __future__ import annotations

import subprocess
import sys
import urllib.request

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from host_lib.engine.rounds import COUNTS, CallStats
from protocol import constants as P
from topologies.local import LocalCluster, local_job

N = 2
CALLS = 3


def scrape(host: str, port: int) -> dict[tuple[str, frozenset], float]:
    """{(sample name, labels): value} of a /metrics page."""
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=30) as page:
        text = page.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def sample(page: dict, name: str, **labels) -> float:
    return page[(name, frozenset(labels.items()))]


def calls_then_scrape(comm, _arg):
    stats = []
    for call in range(CALLS):
        x = np.random.default_rng((comm.config.worker, call)).standard_normal(5000)
        stats.append(comm.allreduce_async(x.astype(np.float32)).result()[1])
    page = scrape(*comm.metrics.address)
    comm.close()
    return stats, page


def test_worker_and_switch_metrics_match_what_they_count(tmp_path):
    with LocalCluster([local_job(1, N, slots=16)], tmp_path) as cluster:
        cluster.controller.set_loss(0.05, direction="egress")  # retransmissions, copies
        results = cluster.run_workers(calls_then_scrape, {1: [None] * N},
                                      metrics_listen="127.0.0.1:0")
        exporter = subprocess.Popen(
            [sys.executable, "-m", "control_plane.cli", "--switch", cluster.switch.grpc_address,
             "--ports", "1-2", "--state", str(tmp_path / "ctl.json"), "metrics", "--listen",
             "127.0.0.1:0"], stdout=subprocess.PIPE, text=True)
        try:
            address = exporter.stdout.readline().split("http://")[1].split("/")[0]
            switch_page = scrape(*address.rsplit(":", 1))
        finally:
            exporter.terminate()
            exporter.wait(timeout=30)
        want = {job: cluster.controller.counters(job) for job in (None, 1)}

    sent = 0
    for w in range(N):
        stats, page = results[(1, w)]
        ids = {"job": "1", "worker": str(w)}
        total = CallStats()
        for s in stats:
            total.add(s)
        assert sample(page, "sa_atp_calls_total", **ids) == CALLS
        assert sample(page, "sa_atp_fallbacks_total", **ids) == \
            sum(s.fallback is not None for s in stats)
        for name in COUNTS:
            assert sample(page, f"sa_atp_{name}_total", **ids) == getattr(total, name), name
        for reason in P.Bounce:
            if reason.value:
                assert sample(page, "sa_atp_bounces_total", reason=reason.name, **ids) == \
                    total.bounces[reason.name]
        assert sample(page, "sa_atp_call_seconds_count", **ids) == CALLS
        assert sample(page, "sa_atp_call_seconds_sum", **ids) == pytest.approx(total.elapsed_s)
        assert total.retransmissions > 0  # the loss made the counters worth checking
        sent += total.packets_sent

    for job, counters in want.items():
        label = "none" if job is None else str(job)
        for direction in ("ingress", "egress"):
            for op in ["OTHER", *(op.name for op in P.Op)]:
                assert sample(switch_page, "sa_atp_switch_packets_total", job=label,
                              direction=direction, op=op) == \
                    counters[direction]["packets"].get(op, 0), (job, direction, op)
            for reason in P.DropReason:
                if reason.value:
                    assert sample(switch_page, "sa_atp_switch_drops_total", job=label,
                                  direction=direction, reason=reason.name) == \
                        counters[direction]["drops"].get(reason.name, 0)
    assert sample(switch_page, "sa_atp_switch_evictions_total", job="1") == want[1]["evictions"]
    # Every DATA frame the workers counted reached the switch (the loss is at egress).
    assert sample(switch_page, "sa_atp_switch_packets_total", job="1", direction="ingress",
                  op="DATA") == sent
    assert want[1]["egress"]["drops"]["SIM"] > 0
