"""The P4Runtime gRPC service: request routing, master arbitration and packet I/O, with the
behaviour of p4lang/PI's server (``proto/server/pi_server.cpp``).

Arbitration: each StreamChannel that sends a MasterArbitrationUpdate is a connection of a device;
the one with the highest election id is the primary.  Only the primary may Write or push a
pipeline (once any connection exists; with none, requests without an election id are accepted, as
PI accepts them), receives PacketIn messages and may send PacketOut.
"""

from __future__ import annotations

import logging
import queue
import threading
from concurrent import futures
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2 as pb
from p4.v1 import p4runtime_pb2_grpc

from .device import DeviceManager
from .pipeline import P4RuntimeError

if TYPE_CHECKING:
    from ..dataplane import Dataplane

log = logging.getLogger("softswitch.p4runtime_server")

P4RUNTIME_API_VERSION = "1.3.0"  # what PI's server reports
MAX_CONNECTIONS = 16
READ_CHUNK = 16384  # entities per ReadResponse message
_GRPC_CODES = {c.value[0]: c for c in grpc.StatusCode}
_END = object()


def _u128(msg: pb.Uint128) -> int:
    return (msg.high << 64) | msg.low


class _Abort(Exception):
    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(eq=False)
class _Connection:
    election_id: int
    outbox: queue.Queue = field(default_factory=queue.Queue)
    device_id: int = 0


class _DeviceConnections:
    """Connections of one device id, primary first."""

    def __init__(self, device_id: int):
        self.device_id = device_id
        self.connections: list[_Connection] = []
        self.configured = False  # a SetForwardingPipelineConfig was received (PI's DeviceMgr)

    @property
    def primary(self) -> _Connection | None:
        return self.connections[0] if self.connections else None

    def is_primary(self, election_id: int) -> bool:
        p = self.primary
        return p is not None and p.election_id == election_id

    def _sort(self) -> None:
        self.connections.sort(key=lambda c: -c.election_id)

    def add(self, conn: _Connection) -> None:
        if len(self.connections) >= MAX_CONNECTIONS:
            raise _Abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "Too many connections")
        if any(c.election_id == conn.election_id for c in self.connections):
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, "Election id already exists")
        self.connections.append(conn)
        self._sort()
        if self.primary is conn:
            self.notify_all()
        else:
            self.notify(conn)

    def update(self, conn: _Connection, election_id: int) -> None:
        if conn.election_id == election_id:
            return
        was_primary = self.primary is conn
        self.connections.remove(conn)
        if any(c.election_id == election_id for c in self.connections):
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, "New election id already exists")
        conn.election_id = election_id
        self.connections.append(conn)
        self._sort()
        if (self.primary is conn) != was_primary:
            self.notify_all()
        else:
            self.notify(conn)

    def remove(self, conn: _Connection) -> None:
        if conn not in self.connections:
            return
        was_primary = self.primary is conn
        self.connections.remove(conn)
        if was_primary:
            self.notify_all()

    def notify(self, conn: _Connection) -> None:
        msg = pb.StreamMessageResponse()
        arb = msg.arbitration
        arb.device_id = self.device_id
        primary = self.primary.election_id
        arb.election_id.high, arb.election_id.low = primary >> 64, primary & ((1 << 64) - 1)
        if conn is self.primary:
            arb.status.code, arb.status.message = code_pb2.OK, "Is primary"
        else:
            arb.status.code, arb.status.message = code_pb2.ALREADY_EXISTS, "Is backup"
        conn.outbox.put(msg)

    def notify_all(self) -> None:
        for conn in self.connections:
            self.notify(conn)


class P4RuntimeService(p4runtime_pb2_grpc.P4RuntimeServicer):
    def __init__(self, dataplane: Dataplane, register_access: bool = True):
        self.dataplane = dataplane
        self.manager = DeviceManager(dataplane, register_access)
        self._devices: dict[int, _DeviceConnections] = {}
        self._lock = threading.RLock()
        dataplane.set_packet_in(self.packet_in)

    def _device(self, device_id: int) -> _DeviceConnections:
        with self._lock:
            dev = self._devices.get(device_id)
            if dev is None:
                dev = self._devices[device_id] = _DeviceConnections(device_id)
            return dev

    # -- status helpers -------------------------------------------------------------------------

    @staticmethod
    def _fail(context, error: P4RuntimeError, details: list | None = None) -> None:
        """Report a device error the way PI does: the google.rpc.Status also goes in the
        ``grpc-status-details-bin`` trailer."""
        status = status_pb2.Status(code=error.code, message=error.message)
        for d in details or []:
            status.details.add().CopyFrom(d)
        context.set_trailing_metadata((("grpc-status-details-bin",
                                        status.SerializeToString()),))
        context.set_code(_GRPC_CODES.get(error.code, grpc.StatusCode.UNKNOWN))
        context.set_details(error.message)

    def _check_primary(self, dev: _DeviceConnections, request, context) -> bool:
        with self._lock:
            n = len(dev.connections)
            if (n == 0 and request.HasField("election_id")) or \
                    (n > 0 and not dev.is_primary(_u128(request.election_id))):
                context.set_code(grpc.StatusCode.PERMISSION_DENIED)
                context.set_details("Not primary")
                return False
            return True

    def _ready(self, device_id: int, context) -> bool:
        if device_id != self.dataplane.device_id or self.manager.pipeline is None:
            context.set_code(grpc.StatusCode.FAILED_PRECONDITION)
            context.set_details("No forwarding pipeline config set for this device")
            return False
        return True

    # -- RPCs -----------------------------------------------------------------------------------

    def Write(self, request, context):
        dev = self._device(request.device_id)
        if not self._check_primary(dev, request, context):
            return pb.WriteResponse()
        if not self._ready(request.device_id, context):
            return pb.WriteResponse()
        try:
            results = self.manager.write(request)
        except P4RuntimeError as exc:
            self._fail(context, exc)
            return pb.WriteResponse()
        if any(r is not None for r in results):
            details = []
            for r in results:
                err = pb.Error(code=0) if r is None else pb.Error(
                    canonical_code=r.code, message=r.message, space="ALL-sswitch-p4org")
                packed = any_pb2.Any()
                packed.Pack(err)
                details.append(packed)
            self._fail(context, P4RuntimeError(code_pb2.UNKNOWN, ""), details)
        return pb.WriteResponse()

    def Read(self, request, context):
        if not self._ready(request.device_id, context):
            return
        entities, error = self.manager.read(request)
        for start in range(0, max(len(entities), 1), READ_CHUNK):
            yield pb.ReadResponse(entities=entities[start:start + READ_CHUNK])
        if error is not None:
            self._fail(context, error)

    def SetForwardingPipelineConfig(self, request, context):
        dev = self._device(request.device_id)
        if not self._check_primary(dev, request, context):
            return pb.SetForwardingPipelineConfigResponse()
        dev.configured = True
        try:
            self.manager.set_pipeline(request.device_id, request.action, request.config)
        except P4RuntimeError as exc:
            self._fail(context, exc)
        return pb.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request, context):
        dev = self._device(request.device_id)
        if not dev.configured:
            context.set_code(grpc.StatusCode.FAILED_PRECONDITION)
            context.set_details("No forwarding pipeline config set for this device")
            return pb.GetForwardingPipelineConfigResponse()
        response = pb.GetForwardingPipelineConfigResponse()
        if request.device_id != self.dataplane.device_id:
            return response
        try:
            response.config.CopyFrom(self.manager.get_pipeline(request.response_type))
        except P4RuntimeError as exc:
            self._fail(context, exc)
        return response

    def Capabilities(self, request, context):
        return pb.CapabilitiesResponse(p4runtime_api_version=P4RUNTIME_API_VERSION)

    def StreamChannel(self, request_iterator, context):
        conn = _Connection(0)
        state = {"device": None}
        context.add_callback(lambda: conn.outbox.put(_END))
        reader = threading.Thread(target=self._read_stream, name="p4rt-stream",
                                  args=(request_iterator, conn, state), daemon=True)
        reader.start()
        while True:
            item = conn.outbox.get()
            if item is _END:
                break
            if isinstance(item, _Abort):
                context.abort(item.code, item.message)
            yield item

    def _read_stream(self, request_iterator, conn: _Connection, state: dict) -> None:
        try:
            for request in request_iterator:
                which = request.WhichOneof("update")
                if which == "arbitration":
                    self._arbitration(request.arbitration, conn, state)
                elif which == "packet" and state["device"] is not None:
                    self._packet_out(state["device"], conn, request.packet)
        except _Abort as exc:
            conn.outbox.put(exc)
        except grpc.RpcError:
            pass  # the client went away
        finally:
            dev = state["device"]
            if dev is not None:
                with self._lock:
                    dev.remove(conn)
            conn.outbox.put(_END)

    def _arbitration(self, arb: pb.MasterArbitrationUpdate, conn: _Connection,
                     state: dict) -> None:
        election_id = _u128(arb.election_id)
        with self._lock:
            dev = state["device"]
            if dev is None:
                dev = self._device(arb.device_id)
                conn.election_id = election_id
                dev.add(conn)
                state["device"] = dev
            elif dev.device_id != arb.device_id:
                raise _Abort(grpc.StatusCode.FAILED_PRECONDITION, "Invalid device id")
            else:
                try:
                    dev.update(conn, election_id)
                except _Abort:
                    state["device"] = None
                    raise

    def _packet_out(self, dev: _DeviceConnections, conn: _Connection,
                    packet: pb.PacketOut) -> None:
        with self._lock:
            if dev.primary is not conn:
                return
        if dev.device_id != self.dataplane.device_id or self.manager.pipeline is None:
            return
        meta = self.manager.pipeline.index.packet_out
        frame = packet.payload
        if meta is not None:
            known = {fid: width for fid, _, width in meta.fields}
            values = {}
            for m in packet.metadata:
                if m.metadata_id not in known:
                    log.error("PacketOut: unknown metadata id %d", m.metadata_id)
                    return
                value = int.from_bytes(m.value, "big")
                if value >> known[m.metadata_id]:
                    log.error("PacketOut: metadata %d does not fit in %d bits", m.metadata_id,
                              known[m.metadata_id])
                    return
                values[m.metadata_id] = value
            frame = meta.pack(values) + frame
        self.dataplane.packet_out(frame)

    def packet_in(self, frame: bytes) -> None:
        """A frame left on the CPU port: deliver it to the device's primary connection."""
        pipeline = self.manager.pipeline
        msg = pb.StreamMessageResponse()
        meta = pipeline.index.packet_in if pipeline is not None else None
        if meta is not None:
            parsed = meta.unpack(frame)
            if parsed is None:
                log.error("PacketIn shorter than its packet_in header; dropped")
                return
            values, payload = parsed
            for fid, value in values:
                m = msg.packet.metadata.add()
                m.metadata_id = fid
                m.value = value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")
            msg.packet.payload = payload
        else:
            msg.packet.payload = frame
        with self._lock:
            dev = self._devices.get(self.dataplane.device_id)
            primary = dev.primary if dev is not None else None
        if primary is not None:
            primary.outbox.put(msg)


class P4RuntimeServer:
    """A P4Runtime server for one dataplane.  ``address`` ``host:0`` binds an ephemeral port;
    :attr:`port` is the port actually bound once :meth:`start` returns."""

    def __init__(self, dataplane: Dataplane, address: str = "127.0.0.1:9559",
                 register_access: bool = True, max_workers: int = 32):
        self.dataplane = dataplane
        self.address = address
        self.service = P4RuntimeService(dataplane, register_access)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers,
                                                              thread_name_prefix="p4rt"))
        p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(self.service, self._server)
        self.port = 0

    def start(self) -> int:
        self.port = self._server.add_insecure_port(self.address)
        if self.port == 0:
            raise OSError(f"cannot bind the P4Runtime server to {self.address}")
        self._server.start()
        host = self.address.rpartition(":")[0]
        log.info("P4Runtime server listening on %s:%d", host, self.port)
        return self.port

    def stop(self, grace: float | None = 0.5) -> None:
        self._server.stop(grace).wait()
