"""Intel's SDE where one is installed: its BF Runtime client and the stubs generated from its
bfruntime.proto (``$SDE_INSTALL/lib/python3*/site-packages/tofino/bfrt_grpc``), and its fixed
tables' JSON (``$SDE_INSTALL/share/bf_rt_shared``), found as the controller finds them
(``control_plane.tofino.bfrt.import_bfrt_grpc``). Tests that need them skip without an SDE,
as the bmv2 tests skip without bmv2; docs/tofino.md says how to install one for them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from control_plane.tofino.bfrt import BfrtUnavailable, import_bfrt_grpc


@dataclass
class Sde:
    client: ModuleType      # bfrt_grpc.client, unmodified
    pb2: ModuleType         # bfrt_grpc.bfruntime_pb2
    pb2_grpc: ModuleType    # bfrt_grpc.bfruntime_pb2_grpc
    fixed_dir: Path         # share/bf_rt_shared: bf_rt_*_tf1.json


def sde_or_skip() -> Sde:
    try:
        client = import_bfrt_grpc()
    except BfrtUnavailable as exc:
        pytest.skip(f"no SDE BF Runtime client: {exc}")
    import bfrt_grpc.bfruntime_pb2 as pb2
    import bfrt_grpc.bfruntime_pb2_grpc as pb2_grpc

    fixed_dir = Path(os.environ.get("SDE_INSTALL", "")) / "share" / "bf_rt_shared"
    if not any(fixed_dir.glob("*_tf1.json")):
        pytest.skip(f"no fixed-table JSON under {fixed_dir}")
    return Sde(client, pb2, pb2_grpc, fixed_dir)
