"""Packets and jobs for the P4 program's packet-level tests (see conftest.py): a job's frames
built with the codec, what the switch sends back decoded, and numpy references for its sums."""

from __future__ import annotations

import numpy as np

from protocol import constants as P
from protocol.codec import Endpoint, Frame, Header, decode_frame, encode_frame
from protocol.jobspec import JobSpec, WorkerSpec

PORTS = tuple(range(1, 9))
SWITCH = Endpoint("02:00:00:00:00:fe", "10.0.0.254")


def worker_spec(i: int, job: int = 0) -> WorkerSpec:
    """Worker i of a test job: on port i+1 (jobs > 0 shift the addresses, not the ports)."""
    return WorkerSpec(i, i + 1, f"02:00:00:00:{job:02x}:{i + 1:02x}", f"10.{job}.0.{i + 1}",
                      P.UDP_PORT + i)


def job_spec(job_id: int, n: int, slots: int = 4, **kwargs) -> JobSpec:
    return JobSpec(job_id, slots, tuple(worker_spec(i, job_id % 200) for i in range(n)),
                   switch_mac=SWITCH.mac, switch_ip=SWITCH.ip, **kwargs)


class Job:
    """Builds a job's packets and reads what the switch answers."""

    def __init__(self, spec: JobSpec, target):
        self.spec = spec
        self.target = target

    def endpoint(self, w: int) -> Endpoint:
        ws = self.spec.worker(w)
        return Endpoint(ws.mac, ws.ip, ws.udp_port)

    def frame(self, w: int, op: int, chunk: int, lanes=None, *, slot: int | None = None,
              set_: int | None = None, dst: Endpoint = SWITCH, **fields) -> bytes:
        slots = self.spec.window
        slot = chunk % slots if slot is None else slot
        set_ = (chunk // slots) % 2 if set_ is None else set_
        header = Header(op=op, job=self.spec.id, slot=slot, worker=w, chunk=chunk,
                        flags=set_ | fields.pop("flags", 0), **fields)
        lanes = np.zeros(P.LANES, np.int32) if lanes is None else np.asarray(lanes, np.int32)
        dst = Endpoint(dst.mac, dst.ip, P.UDP_PORT)
        return encode_frame(Frame(self.endpoint(w), dst, header, lanes))

    def send(self, w: int, op: int, chunk: int, lanes=None, **fields) -> list[tuple[int, Frame]]:
        """Send from worker w's port; the decoded frames that leave the switch."""
        raw = self.frame(w, op, chunk, lanes, **fields)
        return [(port, decode_frame(out)) for port, out in
                self.target.send(self.spec.worker(w).port, raw)]

    def data(self, w: int, chunk: int, lanes, **fields):
        return self.send(w, P.Op.DATA, chunk, lanes, scale=fields.pop("scale", 0x8000),
                         **fields)


def random_lanes(rng, n: int) -> np.ndarray:
    """n rows of lanes whose sum cannot wrap (|v| < 2^31 / 8)."""
    return rng.integers(-(2**28), 2**28, (n, P.LANES), dtype=np.int32)


def assert_result_to_all(job: Job, outs, chunk: int, expected_sum, bitmap: int, count: int,
                         exp: int | None = None, flags: int = 0) -> None:
    """One RESULT for every worker of the job, on its port, to its addresses."""
    assert sorted(port for port, _ in outs) == sorted(w.port for w in job.spec.workers)
    for port, f in outs:
        w = next(w for w in job.spec.workers if w.port == port)
        assert f.header.op == P.Op.RESULT and f.header.chunk == chunk
        assert (f.dst.mac, f.dst.ip, f.dst.port) == (job.endpoint(w.id).mac,
                                                    job.endpoint(w.id).ip, w.udp_port)
        assert (f.src.mac, f.src.ip, f.src.port) == (SWITCH.mac, SWITCH.ip, P.UDP_PORT)
        assert f.header.bitmap == bitmap and f.header.count == count
        assert f.header.flags & ~P.Flag.SET == flags
        if exp is not None:
            assert f.header.exp == exp
        np.testing.assert_array_equal(f.lanes, expected_sum)


def wrapping_sum(rows) -> np.ndarray:
    """int32 sum with the switch's modulo-2^32 arithmetic, computed in int64 by numpy."""
    total = np.sum(np.asarray(rows, np.int64), axis=0)
    return ((total + 2**31) % 2**32 - 2**31).astype(np.int32)
