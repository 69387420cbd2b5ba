"""Minimal libpcap file writer (what ``simple_switch --pcap DIR`` produces per interface), and a
reader for the files it and bmv2 write."""

from __future__ import annotations

import struct
import threading
import time
from pathlib import Path

_GLOBAL_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)  # Ethernet


class PcapWriter:
    def __init__(self, path: str | Path):
        self._file = open(path, "wb")  # noqa: SIM115 -- closed by close()
        self._file.write(_GLOBAL_HEADER)
        self._file.flush()
        self._lock = threading.Lock()

    def write(self, frame: bytes, timestamp: float | None = None) -> None:
        ts = time.time() if timestamp is None else timestamp
        sec = int(ts)
        usec = int((ts - sec) * 1e6)
        with self._lock:
            self._file.write(struct.pack("<IIII", sec, usec, len(frame), len(frame)))
            self._file.write(frame)
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


def read_pcap_records(path: str | Path) -> list[tuple[float, bytes]]:
    """The (timestamp, frame) records of a pcap file; a file whose header is not written yet
    (libpcap buffers it until the first packet) has none, and a record still being written is
    left out."""
    data = Path(path).read_bytes()
    if len(data) < 24:
        return []
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    records, offset = [], 24
    while offset + 16 <= len(data):
        sec, usec, incl, _ = struct.unpack(endian + "IIII", data[offset:offset + 16])
        if offset + 16 + incl > len(data):
            break
        records.append((sec + usec / 1e6, data[offset + 16:offset + 16 + incl]))
        offset += 16 + incl
    return records


def read_pcap(path: str | Path) -> list[bytes]:
    """The frames of a pcap file (see :func:`read_pcap_records`)."""
    return [frame for _, frame in read_pcap_records(path)]
