"""Job specs (TOML file or Python) and their validation: the contract between the controller,
the hosts and the topologies on what a job is (its id, slots, workers and their addresses).

The controller admits a spec (``control_plane/allocation.py`` gives it switch resources), the
host library builds a worker's configuration from it, and the topologies write it. A spec is
validated completely before anyone acts on it: a bad spec is rejected with a message that names
the offending field, and the switch is left untouched.

Spec file::

    [job]
    id = 7                     # 0..65535, the job field of every packet
    slots = 64                 # slots of the switch the job owns
    borrow = 0                 # optional: more slots borrowed per chunk from the shared pool;
                               # the window W is slots + borrow (docs/protocol.md §4.6)
    fan_in = 4                 # optional: contributions that complete a chunk (default: all)
    inband_fanin = false       # optional: accept a per-packet fan-in (group policies)
    switch_mac = "02:00:00:00:00:fe"   # the address workers send to
    switch_ip = "10.0.0.254"

    [[workers]]
    id = 0                     # 0..31, the worker's bit in bitmaps
    port = 1                   # its switch port
    mac = "02:00:00:00:00:01"
    ip = "10.0.0.1"
    udp_port = 23162           # optional: where it receives results
"""

from __future__ import annotations

import ipaddress
import tomllib
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from protocol import constants as P
from protocol.codec import mac_bytes, mac_str


class SpecError(ValueError):
    """A job spec that cannot be admitted; the message says why."""


@dataclass(frozen=True)
class WorkerSpec:
    id: int
    port: int
    mac: str
    ip: str
    udp_port: int = P.UDP_PORT

    @property
    def bit(self) -> int:
        return 1 << self.id


@dataclass(frozen=True)
class JobSpec:
    id: int
    slots: int
    workers: tuple[WorkerSpec, ...]
    switch_mac: str = "02:00:00:00:00:fe"
    switch_ip: str = "10.0.0.254"
    fan_in: int | None = None
    expected: int | None = None  # bitmap of workers that may contribute (default: all)
    inband_fanin: bool = False
    borrow: int = 0  # slots of the switch's shared pool the job may borrow, per chunk

    @property
    def window(self) -> int:
        """W: the chunks a worker keeps in flight, one per slot, own and borrowed."""
        return self.slots + self.borrow

    @property
    def effective_fan_in(self) -> int:
        return len(self.workers) if self.fan_in is None else self.fan_in

    @property
    def all_workers(self) -> int:
        return sum(w.bit for w in self.workers)

    @property
    def effective_expected(self) -> int:
        return self.all_workers if self.expected is None else self.expected

    def worker(self, worker_id: int) -> WorkerSpec:
        for w in self.workers:
            if w.id == worker_id:
                return w
        raise SpecError(f"job {self.id} has no worker {worker_id}")

    def with_membership(self, fan_in: int | None = None, expected: int | None = None) -> JobSpec:
        changed = replace(self, fan_in=self.fan_in if fan_in is None else fan_in,
                          expected=self.expected if expected is None else expected)
        changed.validate()
        return changed

    def to_dict(self) -> dict:
        d = asdict(self)
        d["workers"] = [asdict(w) for w in self.workers]
        return d

    def to_toml(self) -> str:
        """The spec in the file format :func:`parse_spec` reads."""
        def value(v) -> str:
            return str(v).lower() if isinstance(v, bool) else (
                f'"{v}"' if isinstance(v, str) else str(v))
        job = {k: v for k, v in asdict(self).items() if k != "workers" and v is not None}
        lines = ["[job]"] + [f"{k} = {value(v)}" for k, v in job.items()]
        for w in self.workers:
            lines += ["", "[[workers]]"] + [f"{k} = {value(v)}" for k, v in asdict(w).items()]
        return "\n".join(lines) + "\n"

    @classmethod
    def from_dict(cls, d: dict) -> JobSpec:
        d = dict(d)
        d["workers"] = tuple(WorkerSpec(**w) for w in d["workers"])
        return cls(**d)

    def validate(self, known_ports: set[int] | None = None) -> None:
        """Raise SpecError naming the first problem, if any."""
        check_int("job.id", self.id, 0, 0xFFFF)
        check_int("job.slots", self.slots, 1, P.NUM_SLOTS)
        check_int("job.borrow", self.borrow, 0, P.NUM_SLOTS - self.slots)
        _check_mac("job.switch_mac", self.switch_mac)
        _check_ip("job.switch_ip", self.switch_ip)
        if not self.workers:
            raise SpecError(f"job {self.id}: no workers")
        if len(self.workers) > P.MAX_WORKERS:
            raise SpecError(f"job {self.id}: {len(self.workers)} workers, at most {P.MAX_WORKERS}")
        seen_ids: set[int] = set()
        seen_addr: set[tuple] = set()
        for i, w in enumerate(self.workers):
            where = f"workers[{i}]"
            check_int(f"{where}.id", w.id, 0, P.MAX_WORKERS - 1)
            check_int(f"{where}.port", w.port, 0, 510)
            _check_mac(f"{where}.mac", w.mac)
            _check_ip(f"{where}.ip", w.ip)
            check_int(f"{where}.udp_port", w.udp_port, 1, 65535)
            if w.id in seen_ids:
                raise SpecError(f"job {self.id}: worker id {w.id} appears twice")
            seen_ids.add(w.id)
            addr = (mac_str(mac_bytes(w.mac)), w.ip, w.udp_port)
            if addr in seen_addr:
                raise SpecError(f"job {self.id}: two workers share MAC/IP/UDP port {addr}")
            seen_addr.add(addr)
            if known_ports is not None and w.port not in known_ports:
                raise SpecError(f"job {self.id}: {where}.port {w.port} is not a port of the "
                                f"switch (ports: {sorted(known_ports)})")
        n = len(self.workers)
        if self.fan_in is not None:
            check_int("job.fan_in", self.fan_in, 1, n)
        if self.expected is not None:
            if self.expected & ~self.all_workers or not self.expected:
                raise SpecError(f"job {self.id}: expected set {self.expected:#x} must be a "
                                f"non-empty subset of the workers {self.all_workers:#x}")
            if self.effective_fan_in > bin(self.expected).count("1"):
                raise SpecError(f"job {self.id}: fan-in {self.effective_fan_in} exceeds the "
                                f"{bin(self.expected).count('1')} expected workers")


def check_int(name: str, value, lo: int, hi: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise SpecError(f"{name} must be an integer in {lo}..{hi}, got {value!r}")


def _check_mac(name: str, value) -> None:
    try:
        mac_bytes(value)
    except (ValueError, TypeError, AttributeError):
        raise SpecError(f"{name} is not a MAC address: {value!r}") from None


def _check_ip(name: str, value) -> None:
    try:
        ipaddress.IPv4Address(value)
    except (ValueError, TypeError):
        raise SpecError(f"{name} is not an IPv4 address: {value!r}") from None


_JOB_KEYS = {"id", "slots", "borrow", "fan_in", "expected", "inband_fanin", "switch_mac",
             "switch_ip"}
_WORKER_KEYS = {"id", "port", "mac", "ip", "udp_port"}


def parse_spec(text: str, source: str = "<spec>") -> JobSpec:
    """Parse a TOML job spec; unknown or missing keys are errors."""
    doc = parse_toml(text, source)
    job = doc.get("job")
    if not isinstance(job, dict):
        raise SpecError(f"{source}: missing [job] table")
    workers = doc.get("workers")
    if not isinstance(workers, list) or not all(isinstance(w, dict) for w in workers):
        raise SpecError(f"{source}: missing [[workers]] entries")
    extra = set(doc) - {"job", "workers"}
    if extra:
        raise SpecError(f"{source}: unknown top-level keys {sorted(extra)}")
    _check_keys(f"{source}: [job]", job, _JOB_KEYS, {"id", "slots"})
    for i, w in enumerate(workers):
        _check_keys(f"{source}: workers[{i}]", w, _WORKER_KEYS, {"id", "port", "mac", "ip"})
    spec = JobSpec(workers=tuple(WorkerSpec(**w) for w in workers), **job)
    spec.validate()
    return spec


def load_spec(path: str | Path) -> JobSpec:
    return parse_spec(read_file(path, "job spec"), str(path))


def parse_toml(text: str, source: str) -> dict:
    """A TOML document (a spec or a switch config), or a SpecError naming ``source``."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{source}: not valid TOML: {exc}") from None


def read_file(path: str | Path, what: str) -> str:
    """A spec or config file's text, or a SpecError that says which file could not be read."""
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise SpecError(f"cannot read {what} {path}: {exc.strerror}") from None


def _check_keys(where: str, table: dict, allowed: set[str], required: set[str]) -> None:
    unknown = set(table) - allowed
    if unknown:
        raise SpecError(f"{where}: unknown keys {sorted(unknown)} (allowed: {sorted(allowed)})")
    missing = required - set(table)
    if missing:
        raise SpecError(f"{where}: missing keys {sorted(missing)}")
