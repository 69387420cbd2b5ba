"""The switch's counters in Prometheus' text format (``sa-atp-ctl metrics --listen HOST:PORT``).

Each scrape reads the counters (over P4Runtime or BF Runtime, whichever the controller's backend
speaks) for every job the switch's jobs table holds, and for traffic that matched no job
(``job="none"``), with every op and drop reason of ``protocol.constants`` present, zeros
included:

    sa_atp_switch_packets_total{job, direction, op}       direction: ingress (in) or egress (out)
    sa_atp_switch_drops_total{job, direction, reason}
    sa_atp_switch_evictions_total{job}
"""

from __future__ import annotations

import signal
import threading

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily

from control_plane.switch_controller import SwitchController


class SwitchCollector:
    """A prometheus_client collector that reads the switch at every scrape."""

    def __init__(self, controller: SwitchController):
        self.controller = controller
        self._lock = threading.Lock()  # one read of the switch at a time, scrapes may overlap

    def collect(self):
        with self._lock:
            counters = self.controller.all_counters()
        packets = CounterMetricFamily(
            "sa_atp_switch_packets", "SA-ATP packets per job, direction and op (OTHER: not "
            "SA-ATP)", labels=["job", "direction", "op"])
        drops = CounterMetricFamily("sa_atp_switch_drops", "packets dropped per job, direction "
                                    "and drop reason", labels=["job", "direction", "reason"])
        evictions = CounterMetricFamily("sa_atp_switch_evictions", "unfinished aggregations "
                                        "overwritten by a newer chunk", labels=["job"])
        for job_id, job in counters.items():
            job_label = "none" if job_id is None else str(job_id)
            for direction in ("ingress", "egress"):
                for op, n in job[direction]["packets"].items():
                    packets.add_metric([job_label, direction, op], n)
                for reason, n in job[direction]["drops"].items():
                    drops.add_metric([job_label, direction, reason], n)
            if "evictions" in job:
                evictions.add_metric([job_label], job["evictions"])
        yield from (packets, drops, evictions)


def export(controller: SwitchController, listen: str) -> None:
    """Serve the switch's counters on ``listen`` until SIGINT or SIGTERM."""
    registry = CollectorRegistry()
    registry.register(SwitchCollector(controller))
    stop = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)  # the server's threads inherit the mask
    host, _, port = listen.rpartition(":")
    server, _thread = start_http_server(int(port), host or "0.0.0.0", registry)
    host, port = server.server_address[:2]
    print(f"serving the switch's counters on http://{host}:{port}/metrics", flush=True)
    signal.sigwait(stop)
    server.shutdown()
    server.server_close()
