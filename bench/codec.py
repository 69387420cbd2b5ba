"""Vectorised frame encoding in packets/s, against the scalar encoder as a reference point."""

from __future__ import annotations

import numpy as np

from bench.timing import interleaved_best
from protocol import constants as P
from protocol.codec import Endpoint, Frame, FrameBatch, Header, encode_frame


def run(packets: int = 16384) -> dict:
    src = Endpoint("02:00:00:00:00:01", "10.0.0.1")
    dst = Endpoint("02:00:00:00:00:fe", "10.0.0.254")
    batch = FrameBatch(src, dst)
    chunk = np.arange(packets, dtype=np.uint32)
    slot = (chunk % 128).astype(np.uint16)
    lanes = np.random.default_rng(0).integers(-2**31, 2**31, (packets, P.LANES), dtype=np.int32)
    out = batch.empty(packets)
    sample = 512

    def scalar():
        for c in range(sample):
            encode_frame(Frame(src, dst, Header(op=P.Op.DATA, job=1, slot=int(slot[c]),
                                                chunk=c), lanes[c]))

    times = interleaved_best({
        "vectorised": lambda: batch.encode(op=P.Op.DATA, job=1, worker=0, slot=slot,
                                           chunk=chunk, lanes=lanes, out=out),
        "scalar": scalar,
    }, repeat=7)
    vec_pps = packets / times["vectorised"]
    scalar_pps = sample / times["scalar"]
    return {"packets": packets, "vectorised_pps": vec_pps, "scalar_pps": scalar_pps,
            "speedup": vec_pps / scalar_pps}


def summary(r: dict) -> list[str]:
    return [f"vectorised encode: {r['vectorised_pps'] / 1e6:.2f} M packets/s "
            f"({r['speedup']:.0f}x the scalar encoder's {r['scalar_pps'] / 1e3:.0f} k packets/s)"]
