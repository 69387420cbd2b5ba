"""A communicator's per-call statistics as Prometheus metrics (text format, ``prometheus_client``).

``CommunicatorConfig(metrics_listen="127.0.0.1:9400")`` (or ``hook_state(..., metrics_listen=...)``)
serves ``http://127.0.0.1:9400/metrics``; port 0 takes a free port (``comm.metrics.address``).
Every integer field of :class:`~host_lib.engine.rounds.CallStats` becomes a counter
``sa_atp_<field>_total`` summed over calls, beside ``sa_atp_calls_total``,
``sa_atp_fallbacks_total``, ``sa_atp_bounces_total{reason}`` (every bounce reason of the protocol,
zeros included) and the histogram ``sa_atp_call_seconds``; all labelled with job and worker.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

from host_lib.engine.rounds import COUNTS, CallStats
from protocol import constants as P


def serve(listen: str, registry: CollectorRegistry):
    """An HTTP server for ``registry`` on ``HOST:PORT`` (``:PORT``: every address), in a daemon
    thread; returns the server (``server_address``, ``shutdown()``)."""
    host, _, port = listen.rpartition(":")
    server, _thread = start_http_server(int(port), host or "0.0.0.0", registry)
    return server


class CallMetrics:
    def __init__(self, job: int, worker: int):
        self.registry = CollectorRegistry()
        self.server = None
        labels = ("job", "worker")
        self._ids = (str(job), str(worker))

        def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> Counter:
            return Counter(f"sa_atp_{name}", doc, labels + extra, registry=self.registry)

        self.calls = counter("calls", "allreduce calls completed").labels(*self._ids)
        self.fallbacks = counter("fallbacks", "calls completed through gloo instead of the "
                                 "switch").labels(*self._ids)
        self.summed = {name: counter(name, f"CallStats.{name}, summed over calls")
                       .labels(*self._ids) for name in COUNTS}
        self.bounces = counter("bounces", "BOUNCE packets received, per reason", ("reason",))
        for reason in P.Bounce:
            if reason.value:
                self.bounces.labels(*self._ids, reason.name)
        self.seconds = Histogram("sa_atp_call_seconds", "time of an allreduce call", labels,
                                 registry=self.registry).labels(*self._ids)

    def observe(self, stats: CallStats) -> None:
        self.calls.inc()
        self.fallbacks.inc(stats.fallback is not None)
        for name, metric in self.summed.items():
            metric.inc(getattr(stats, name))
        for reason, n in stats.bounces.items():
            self.bounces.labels(*self._ids, reason).inc(n)
        self.seconds.observe(stats.elapsed_s)

    def serve(self, listen: str) -> CallMetrics:
        self.server = serve(listen, self.registry)
        return self

    @property
    def address(self) -> tuple[str, int]:
        return self.server.server_address[:2]

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
