"""One P4Runtime connection to one switch: master arbitration, pipeline, writes, reads and
packet I/O.

Built on the raw ``p4.v1`` gRPC stubs rather than p4runtime-shell: the shell keeps a single
module-level client and P4Info context per process, so it cannot drive two switches (the
two-level topology) or run beside another controller in the same test process, and it hides the
per-update errors of a batch write that reconciliation needs. p4runtime-shell remains useful for
poking at a switch by hand, and works against both targets.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import grpc
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from control_plane.p4info import P4Info, decode, encode

Update = p4runtime_pb2.Update


class SwitchError(RuntimeError):
    """The switch refused a request; ``code`` is the gRPC status code."""

    def __init__(self, message: str, code: grpc.StatusCode | None = None):
        super().__init__(message)
        self.code = code


def serves_p4runtime(channel: grpc.Channel, timeout: float) -> bool:
    """Whether a P4Runtime server answers on ``channel`` within ``timeout`` seconds.

    One unary call that waits for the channel to connect, where ``grpc.channel_ready_future``
    would start a connectivity-polling thread that outlives the future (a future that timed
    out stays subscribed) and fails once the channel is closed ("Cannot invoke RPC: Channel
    closed!")."""
    try:
        p4runtime_pb2_grpc.P4RuntimeStub(channel).Capabilities(
            p4runtime_pb2.CapabilitiesRequest(), timeout=timeout, wait_for_ready=True)
    except grpc.RpcError as exc:   # any answer but "not there (yet)" is a server's
        return exc.code() not in (grpc.StatusCode.UNAVAILABLE,
                                  grpc.StatusCode.DEADLINE_EXCEEDED)
    return True


@dataclass(frozen=True)
class UpdateError:
    index: int
    code: int  # google.rpc.Code
    message: str

    @property
    def code_name(self) -> str:
        return code_pb2.Code.Name(self.code)


class WriteError(SwitchError):
    """A batch write in which some updates failed; ``errors`` names each one."""

    def __init__(self, errors: list[UpdateError]):
        listed = "; ".join(f"update {e.index}: {e.code_name} {e.message}" for e in errors[:5])
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        super().__init__(f"{len(errors)} update(s) failed: {listed}{more}", grpc.StatusCode.UNKNOWN)
        self.errors = errors


@dataclass(frozen=True)
class PacketIn:
    payload: bytes
    metadata: dict[str, int]


class SwitchConnection:
    """A P4Runtime client session with one device.

    Opening it performs master arbitration; writes need this client to be the primary. Without
    ``arbitrate`` it opens no stream and can only read (P4Runtime lets any client read), so it
    never takes the primary role from a controller that writes.
    """

    def __init__(self, address: str, device_id: int = 0, election_id: int = 1,
                 timeout: float = 10.0, arbitrate: bool = True):
        self.address = address
        self.device_id = device_id
        self.election_id = election_id
        self.timeout = timeout
        self.p4info: P4Info | None = None
        self._channel = grpc.insecure_channel(address)
        self._stub = p4runtime_pb2_grpc.P4RuntimeStub(self._channel)
        self._requests: queue.Queue = queue.Queue()
        self._arbitration: queue.Queue = queue.Queue()
        self._packets: queue.Queue = queue.Queue()
        self._primary = threading.Condition()
        self.primary = False  # as the switch's latest arbitration update says
        self._closed = False
        if not serves_p4runtime(self._channel, timeout):
            self._channel.close()
            raise SwitchError(f"no P4Runtime server answers at {address}",
                              grpc.StatusCode.UNAVAILABLE) from None
        if arbitrate:
            self._stream = self._stub.StreamChannel(iter(self._requests.get, None))
            self._reader = threading.Thread(target=self._read_stream, name="p4rt-stream",
                                            daemon=True)
            self._reader.start()
            self._arbitrate()

    # -- stream channel --------------------------------------------------------------------

    def _read_stream(self) -> None:
        try:
            for response in self._stream:
                kind = response.WhichOneof("update")
                if kind == "arbitration":
                    with self._primary:
                        self.primary = response.arbitration.status.code == code_pb2.OK
                        self._primary.notify_all()
                    self._arbitration.put(response.arbitration)
                elif kind == "packet":
                    self._packets.put(response.packet)
        except grpc.RpcError as exc:
            if not self._closed:
                self._arbitration.put(exc)

    def _arbitrate(self) -> None:
        request = p4runtime_pb2.StreamMessageRequest()
        request.arbitration.device_id = self.device_id
        request.arbitration.election_id.high = self.election_id >> 64
        request.arbitration.election_id.low = self.election_id & (2**64 - 1)
        self._requests.put(request)
        try:
            reply = self._arbitration.get(timeout=self.timeout)
        except queue.Empty:
            self.close()
            raise SwitchError(f"{self.address}: no answer to master arbitration") from None
        if isinstance(reply, grpc.RpcError):
            self.close()
            raise SwitchError(f"{self.address}: arbitration failed: {reply.details()}",
                              reply.code())
        if reply.status.code != code_pb2.OK:
            self.close()
            raise SwitchError(f"{self.address}: not primary for device {self.device_id} "
                              f"(election id {self.election_id}): {reply.status.message}",
                              grpc.StatusCode.PERMISSION_DENIED)

    def wait_primary(self, timeout: float | None = None) -> None:
        """Wait until this client is the primary again, after another client with a higher
        election id was for a while (``sa-atp-ctl`` beside a running controller): the switch
        drops a backup's packet-outs and sends its packet-ins to the primary only, and it tells
        every client when the primary changes (P4Runtime spec §5), which may come a moment
        after the other client has closed its stream."""
        with self._primary:
            if not self._primary.wait_for(lambda: self.primary,
                                          self.timeout if timeout is None else timeout):
                raise SwitchError(f"{self.address}: not the primary client again within the "
                                  "timeout", grpc.StatusCode.DEADLINE_EXCEEDED)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._requests.put(None)
            self._channel.close()

    # -- pipeline ---------------------------------------------------------------------------

    def set_pipeline(self, p4info: P4Info, device_config: bytes, cookie: int) -> None:
        """Push a pipeline (bmv2 JSON as device config); resets all switch state."""
        request = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        self._set_election_id(request.election_id)
        request.config.p4info.CopyFrom(p4info.message)
        request.config.p4_device_config = device_config
        request.config.cookie.cookie = cookie
        self._call(self._stub.SetForwardingPipelineConfig, request)
        self.p4info = p4info

    def pipeline_cookie(self) -> int | None:
        """Cookie of the pipeline the switch runs, or None if it runs none."""
        request = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            response_type=p4runtime_pb2.GetForwardingPipelineConfigRequest.COOKIE_ONLY)
        try:
            reply = self._stub.GetForwardingPipelineConfig(request, timeout=self.timeout)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.FAILED_PRECONDITION:
                return None
            raise SwitchError(f"{self.address}: {exc.details()}", exc.code()) from None
        return reply.config.cookie.cookie if reply.config.HasField("cookie") else None

    def use_p4info(self, p4info: P4Info) -> None:
        """Adopt the P4Info of a pipeline already on the switch."""
        self.p4info = p4info

    # -- writes and reads -------------------------------------------------------------------

    def write(self, updates: Iterable[Update], batch: int = 1000) -> None:
        """Apply updates in batches; raises WriteError naming each failed update."""
        updates = list(updates)
        errors: list[UpdateError] = []
        for start in range(0, len(updates), batch):
            request = p4runtime_pb2.WriteRequest(device_id=self.device_id)
            self._set_election_id(request.election_id)
            request.updates.extend(updates[start:start + batch])
            try:
                self._stub.Write(request, timeout=self.timeout)
            except grpc.RpcError as exc:
                errors.extend(self._update_errors(exc, start, len(request.updates)))
        if errors:
            raise WriteError(errors)

    def read(self, *entities: p4runtime_pb2.Entity) -> Iterator[p4runtime_pb2.Entity]:
        """Everything the switch returns for these (possibly wildcard) entities."""
        request = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        request.entities.extend(entities)
        try:
            for reply in self._stub.Read(request, timeout=self.timeout):
                yield from reply.entities
        except grpc.RpcError as exc:
            raise SwitchError(f"{self.address}: read failed: {exc.details()}",
                              exc.code()) from None

    # -- packet I/O -------------------------------------------------------------------------

    def packet_out(self, payload: bytes, **metadata: int) -> None:
        info = self._require_p4info().packet_metadata("packet_out")
        request = p4runtime_pb2.StreamMessageRequest()
        request.packet.payload = payload
        for field in info.metadata:
            value = metadata.pop(field.name, 0)
            request.packet.metadata.add(metadata_id=field.id, value=encode(value, field.bitwidth))
        if metadata:
            raise ValueError(f"packet_out has no metadata {sorted(metadata)}")
        self._requests.put(request)

    def packet_in(self, timeout: float | None = None) -> PacketIn:
        """Next PacketIn from the switch; raises TimeoutError."""
        try:
            packet = self._packets.get(timeout=self.timeout if timeout is None else timeout)
        except queue.Empty:
            raise TimeoutError(f"{self.address}: no PacketIn within the timeout") from None
        info = self._require_p4info().packet_metadata("packet_in")
        names = {m.id: m.name for m in info.metadata}
        return PacketIn(packet.payload, {names[m.metadata_id]: decode(m.value)
                                         for m in packet.metadata})

    # -- helpers ----------------------------------------------------------------------------

    def _require_p4info(self) -> P4Info:
        if self.p4info is None:
            raise SwitchError("no pipeline: push one or adopt the switch's P4Info first")
        return self.p4info

    def _set_election_id(self, field) -> None:
        field.high = self.election_id >> 64
        field.low = self.election_id & (2**64 - 1)

    def _call(self, method, request):
        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise SwitchError(f"{self.address}: {exc.details()}", exc.code()) from None

    @staticmethod
    def _update_errors(exc: grpc.RpcError, offset: int, count: int) -> list[UpdateError]:
        """Per-update errors of a failed batch (P4Runtime spec §12.3: UNKNOWN with one
        p4.v1.Error per update in the status details)."""
        details = []
        for key, value in exc.trailing_metadata() or ():
            if key == "grpc-status-details-bin":
                status = status_pb2.Status.FromString(value)
                for any_detail in status.details:
                    error = p4runtime_pb2.Error()
                    any_detail.Unpack(error)
                    details.append(error)
        if len(details) != count:
            return [UpdateError(offset, exc.code().value[0], exc.details() or str(exc.code()))]
        return [UpdateError(offset + i, e.canonical_code, e.message)
                for i, e in enumerate(details) if e.canonical_code != code_pb2.OK]
