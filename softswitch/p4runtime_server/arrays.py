"""P4Runtime's CounterEntry and RegisterEntry on the switch's counter and register arrays, with
the checks, status codes and messages of PI's ``DeviceMgr``.  Register entries go beyond PI, which
answers UNIMPLEMENTED: here they follow the P4Runtime specification unless ``register_access``
is off."""

from __future__ import annotations

from typing import TYPE_CHECKING

from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2 as pb

from ..core.errors import StateError
from .pipeline import (
    COUNTER,
    REGISTER,
    PipelineIndex,
    Unit,
    check_id,
    check_update_type,
    failed,
    invalid,
    invalid_id,
    new_entity,
    set_counter_data,
    to_bytes,
    to_int,
)

if TYPE_CHECKING:
    from ..dataplane import Dataplane

Update = pb.Update


class ArrayEntries:
    """The counter and register entries of one device, on the switch its dataplane runs."""

    def __init__(self, dataplane: Dataplane, register_access: bool = True):
        self.dataplane = dataplane
        self.register_access = register_access
        self.index: PipelineIndex | None = None

    def reset(self, index: PipelineIndex) -> None:
        self.index = index

    # -- write ----------------------------------------------------------------------------------

    def write_counter(self, kind: int, entry: pb.CounterEntry) -> None:
        c = self._counter(entry.counter_id)
        if not entry.HasField("index"):
            raise failed(code_pb2.UNIMPLEMENTED,
                         "Wildcard write is not supported for indirect counters yet")
        index = entry.index.index
        if index < 0:
            raise invalid("A negative number is not a valid index value")
        check_update_type(kind)
        if kind == Update.INSERT:
            raise invalid("INSERT update type not supported for counters")
        ctr = self.dataplane.switch.counters[c.name]
        try:
            if kind == Update.DELETE:
                ctr.write(index, 0, 0)
                return
            old_packets, old_bytes = ctr.read(index)
            packets = entry.data.packet_count if c.unit in (Unit.PACKETS, Unit.BOTH) \
                else old_packets
            nbytes = entry.data.byte_count if c.unit in (Unit.BYTES, Unit.BOTH) else old_bytes
            ctr.write(index, packets, nbytes)
        except StateError:
            raise failed(code_pb2.UNKNOWN, "Error when writing to counter") from None

    def _counter(self, counter_id: int):
        check_id(counter_id, COUNTER)
        c = self.index.counters.get(counter_id)
        if c is None:
            raise invalid_id()
        return c

    def write_register(self, kind: int, entry: pb.RegisterEntry) -> None:
        if not self.register_access:
            raise failed(code_pb2.UNIMPLEMENTED, "Register writes are not supported yet")
        r = self._register(entry.register_id)
        check_update_type(kind)
        if kind != Update.MODIFY:
            raise invalid("Only MODIFY updates are supported for registers")
        if entry.data.WhichOneof("data") != "bitstring":
            raise invalid("Register data must be a bitstring")
        value = to_int(entry.data.bitstring, r.bitwidth)
        reg = self.dataplane.switch.registers[r.name]
        if not entry.HasField("index"):
            reg.values[:] = [value] * reg.size
            return
        if not 0 <= entry.index.index < r.size:
            raise failed(code_pb2.OUT_OF_RANGE, "Register index is out of range")
        reg.write(entry.index.index, value)

    def _register(self, register_id: int):
        check_id(register_id, REGISTER)
        r = self.index.registers.get(register_id)
        if r is None:
            raise invalid_id()
        return r

    # -- read -----------------------------------------------------------------------------------

    def read_counter(self, request: pb.CounterEntry, out: list[pb.Entity]) -> None:
        index = self.index
        counters = list(index.counters.values()) if request.counter_id == 0 else \
            [self._counter(request.counter_id)]
        for c in counters:
            ctr = self.dataplane.switch.counters[c.name]
            if request.HasField("index"):
                if request.index.index < 0:
                    raise invalid("A negative number is not a valid index value")
                indices = [request.index.index]
            else:
                indices = range(c.size)
            for i in indices:
                try:
                    packets, nbytes = ctr.read(i)
                except StateError:
                    raise failed(code_pb2.UNKNOWN,
                                 "Error when reading counter from target") from None
                msg = new_entity(out).counter_entry
                msg.counter_id = c.id
                msg.index.index = i
                set_counter_data(msg.data, packets, nbytes)

    def read_register(self, request: pb.RegisterEntry, out: list[pb.Entity]) -> None:
        if not self.register_access:
            raise failed(code_pb2.UNIMPLEMENTED, "Register reads are not supported yet")
        index = self.index
        registers = list(index.registers.values()) if request.register_id == 0 else \
            [self._register(request.register_id)]
        for r in registers:
            values = self.dataplane.switch.registers[r.name].values
            if request.HasField("index"):
                i = request.index.index
                if not 0 <= i < r.size:
                    raise failed(code_pb2.OUT_OF_RANGE, "Register index is out of range")
                cells = [(i, values[i])]
            else:
                cells = list(enumerate(values))
            for i, v in cells:
                msg = new_entity(out).register_entry
                msg.register_id = r.id
                msg.index.index = i
                msg.data.bitstring = to_bytes(v)
