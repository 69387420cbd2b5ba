"""The requests that program a device, and a device programmed with them in this process: the
code path that serves remote controllers, without gRPC (to measure the switch, or to compare it
with bmv2 programmed with the same requests)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from google.protobuf import text_format
from p4.v1 import p4runtime_pb2 as pb

from .device import DeviceManager

if TYPE_CHECKING:
    from ..dataplane import Dataplane


def pipeline_request(json_text: str, p4info_text: str) -> pb.SetForwardingPipelineConfigRequest:
    """VERIFY_AND_COMMIT, on device 0, of a bmv2 JSON program and its P4Info in text format."""
    req = pb.SetForwardingPipelineConfigRequest(
        device_id=0, action=pb.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
    text_format.Parse(p4info_text, req.config.p4info)
    req.config.p4_device_config = json_text.encode()
    return req


def write_request(updates: Sequence[pb.Update]) -> pb.WriteRequest:
    return pb.WriteRequest(device_id=0, updates=updates)


def programmed_device(dataplane: Dataplane, json_text: str, p4info_text: str,
                      writes: Sequence[pb.WriteRequest] = ()) -> DeviceManager:
    """A device on ``dataplane`` (a fresh one), running the program with ``writes`` applied;
    a failed update raises RuntimeError."""
    manager = DeviceManager(dataplane)
    req = pipeline_request(json_text, p4info_text)
    manager.set_pipeline(0, req.action, req.config)
    for w in writes:
        errors = [e for e in manager.write(w) if e is not None]
        if errors:
            raise RuntimeError(f"write failed: {errors[0].message}")
    return manager
