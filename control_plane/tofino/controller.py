"""The SA-ATP controller over BF Runtime: the TNA program on a Tofino switch.

The same job API as the P4Runtime controller (``control_plane.switch_controller``'s
``SwitchController``), the same plan; what is Tofino's own: the switch runs the program
bf_switchd loaded (nothing is pushed), ports come from a config file (``config.py``), multicast
groups are ``$pre`` nodes, a job's workers must share a pipe (its aggregators are that pipe's
registers), and registers and counters are read and written directly, without the management
packets of the v1model program.
"""

from __future__ import annotations

import logging

from control_plane.allocation import AdmittedJob
from control_plane.contracts import Write
from control_plane.desired_state import DesiredState
from control_plane.entries import MulticastGroup, TableEntry
from control_plane.switch_controller import SwitchController
from control_plane.tofino import names, pre
from control_plane.tofino.bfrt import BfrtConnection, BfrtEntry
from control_plane.tofino.config import SwitchConfig, pipe_of
from control_plane.tofino.controls.aggregator import Aggregator
from control_plane.tofino.controls.loop_ports import LoopPorts
from control_plane.tofino.controls.packet_stats import PacketStats
from control_plane.tofino.ports import port_changes, port_entries
from protocol.jobspec import JobSpec, SpecError

log = logging.getLogger(__name__)


class TofinoController(SwitchController):
    """Drives one Tofino switch over BF Runtime; ``client`` replaces the SDE's bfrt_grpc module
    (tests pass a fake); ``client_id`` is the writer's BF Runtime client id (default: from the
    process id)."""

    def __init__(self, address: str, config: SwitchConfig, device_id: int = 0,
                 program: str = names.PROGRAM, client=None, client_id: int | None = None):
        config.validate()
        super().__init__(DesiredState(ports=config.data_ports))
        self.address = address
        self.config = config
        self.device_id = device_id
        self.program = program
        self.client = client
        self.client_id = client_id
        self.aggregator = Aggregator()
        self.ingress_stats = PacketStats("SaAtpIngress.stats")
        self.egress_stats = PacketStats("SaAtpEgress.stats")
        self.loop_ports = LoopPorts()
        self.conn: BfrtConnection | None = None

    def connect(self, read_only: bool = False) -> TofinoController:
        """Open the BF Runtime session; ``read_only`` does not bind the program: one client
        binds it, and writes; any number of others (the metrics exporter, the read commands)
        only read, naming the program in each read (``bfrt.BfrtConnection``)."""
        self.close()
        self.conn = BfrtConnection(self.address, self.program, self.device_id, client=self.client,
                                   bind=not read_only, client_id=self.client_id)
        return self

    def load_pipeline(self, force: bool = False) -> bool:
        """bf_switchd loads the compiled program when it starts (docs/tofino.md); there is
        nothing to push, so this only checks that the switch runs it (connect binds to it)."""
        self._connection()
        return False

    def reconcile(self) -> dict[str, int]:
        """Ports, parser value sets and loop ports first (the switch's base state), then jobs,
        hosts and groups as on every backend."""
        conn = self._connection()
        ports = port_changes(port_entries(self.config), conn.read(names.PORT))
        if ports:
            conn.write(ports)
        counts = {"ports": len(ports),
                  "loop_ports": self._sync_bfrt(self.loop_ports.tables,
                                                self.loop_ports.entries(self.config))}
        counts.update(super().reconcile())
        return counts

    def pipe_of(self, spec: JobSpec) -> int:
        """Its workers' pipe (admission refuses a job whose workers are in several)."""
        return pipe_of(spec.workers[0].port)

    def status(self) -> dict:
        return {"switch": self.address, "device_id": self.device_id, "program": self.program,
                **super().status(),
                "pipes": {jid: self.pipe_of(j.spec) for jid, j in sorted(self.jobs.items())}}

    # -- the BF Runtime side of the backend ---------------------------------------------------

    def _admission_writes(self, spec: JobSpec) -> tuple[AdmittedJob, list[Write]]:
        pipes = {pipe_of(w.port) for w in spec.workers}
        if len(pipes) > 1:
            raise SpecError(f"job {spec.id}: its workers are in pipes {sorted(pipes)}; the "
                            f"aggregators of a job are one pipe's, so all its workers must be "
                            f"on ports of one pipe")
        return super()._admission_writes(spec)

    def _write(self, writes: list[Write]) -> None:
        ops: list[tuple[str, BfrtEntry]] = []
        for kind, item in writes:
            if isinstance(item, MulticastGroup):
                ops += self._group_ops(kind, item)
            else:
                ops.append((kind, names.to_bfrt(item)))
        self._connection().write(ops)

    def _group_ops(self, kind: str, group: MulticastGroup) -> list[tuple[str, BfrtEntry]]:
        """A group's nodes are written before its mgid entry and deleted after it; a changed
        group is deleted (with the nodes it has on the switch) and written again."""
        nodes, mgid = pre.group_entries(group)
        if kind == "insert":
            return [("insert", n) for n in nodes] + [("insert", mgid)]
        have = self._connection().read(names.PRE_MGID, keys=[pre.mgid_key(group.group_id)])
        ops = [("delete", mgid)] + [("delete", node) for node in pre.nodes_of(have)]
        return ops if kind == "delete" else ops + self._group_ops("insert", group)

    def _read_table(self, table: str) -> list[TableEntry]:
        conn = self._connection()
        found = conn.read(names.table(table))
        default = conn.read_default(names.table(table))
        return [names.from_bfrt(e) for e in found + ([default] if default else [])]

    def read_groups(self) -> dict[int, MulticastGroup]:
        conn = self._connection()
        return pre.groups_from(conn.read(names.PRE_MGID), conn.read(names.PRE_NODE))

    def _sync_bfrt(self, tables, desired: list[BfrtEntry]) -> int:
        """Bring tables of the program that only this controller writes to ``desired`` by
        difference."""
        conn = self._connection()
        ops = []
        for table in tables:
            want = {e.ident: e for e in desired if e.table == table}
            have = {e.ident: e for e in conn.read(table)}
            ops += [("insert", e) for k, e in want.items() if k not in have]
            ops += [("modify", e) for k, e in want.items() if k in have and have[k] != e]
            ops += [("delete", e) for k, e in have.items() if k not in want]
        if ops:
            conn.write(ops)
        return len(ops)
