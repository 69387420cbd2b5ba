"""Everything one rank needs to aggregate through the switch, built from a job spec and where the
switch is: a UDP tunnel port map (the embedded switch, ``softswitch-grpc --udp-port-file``) or a
network interface (raw Ethernet, as on Mininet hosts).

    dist.init_process_group("gloo")                      # under torchrun
    state = hook_state("job.toml", udp_ports="ports.json")
    ddp_model.register_comm_hook(state, sa_atp_hook)

:func:`communicator` is the common part (also used by the ``sa_atp`` torch.distributed backend):
the rank's worker of the job, its link, and a communicator with the given fallback group. It
holds the job's ``torch.distributed`` store while it builds, so values every worker must agree on
before the first packet (the job spec itself, today) are settled there.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

import torch.distributed as dist
from torch.distributed.distributed_c10d import _get_default_store

from host_lib.communicator import CommunicatorConfig, SwitchCommunicator
from host_lib.engine.links import RawEthernetLink, UdpTunnelLink
from host_lib.engine.runs import agree_run_id
from host_lib.pytorch.ddp_hook import SaAtpHookState
from host_lib.pytorch.fallback import FallbackGroup
from protocol.jobspec import JobSpec, load_spec

SPEC_KEY = "sa_atp/job{}/spec"


def hook_state(job_spec: str | Path | JobSpec, *, udp_ports: str | Path | dict | None = None,
               interface: str | None = None, mean: bool = True, fallback: bool = True,
               **config) -> SaAtpHookState:
    """The DDP hook state of this rank (``torch.distributed`` initialised, any backend; rank r
    is worker r of the job). ``mean`` averages the buckets as DDP's default hook does (False:
    the plain sum). With ``fallback`` a new gloo group is created (every rank must call this)
    so a call the switch cannot complete goes through gloo. ``config``: CommunicatorConfig
    fields (silence_timeout, metrics_listen, ...)."""
    world = dist.get_world_size()
    group = FallbackGroup.create() if fallback else None
    comm = communicator(job_spec, dist.get_rank(), world, _get_default_store(), group,
                      udp_ports=udp_ports, interface=interface, **config)
    return SaAtpHookState(comm, weights=[1.0] * world if mean else None)


def communicator(job_spec: str | Path | JobSpec, rank: int, world: int, store: dist.Store,
               fallback: FallbackGroup | None, *, udp_ports: str | Path | dict | None = None,
               interface: str | None = None, **config) -> SwitchCommunicator:
    """The communicator of worker ``rank`` of the job, after every rank checked through
    ``store`` that they all run the same job spec."""
    spec = job_spec if isinstance(job_spec, JobSpec) else load_spec(job_spec)
    if len(spec.workers) != world:
        raise ValueError(f"job {spec.id} has {len(spec.workers)} workers but the process group "
                         f"has {world} ranks: rank r runs worker r")
    agree_on_spec(store, rank, spec)
    run = agree_run_id(store, rank, spec.id)
    return SwitchCommunicator(CommunicatorConfig.from_spec(spec, rank, run, **config),
                              switch_link(spec, rank, udp_ports, interface), fallback)


def switch_link(spec: JobSpec, worker: int, udp_ports: str | Path | dict | None = None,
                interface: str | None = None) -> UdpTunnelLink | RawEthernetLink:
    """Worker ``worker``'s link: the tunnel to its switch port in ``udp_ports`` (the JSON file
    ``softswitch-grpc --udp-port-file`` writes, or its contents), or raw frames on
    ``interface``."""
    if (udp_ports is None) == (interface is None):
        raise ValueError("say where the switch is: udp_ports (a UDP tunnel port map) or "
                         "interface (raw Ethernet), not both")
    w = spec.worker(worker)
    if interface is not None:
        return RawEthernetLink(interface, w.ip, w.udp_port)
    ports = udp_ports if isinstance(udp_ports, dict) else json.loads(Path(udp_ports).read_text())
    if str(w.port) not in ports:
        raise ValueError(f"worker {worker} sits on switch port {w.port}, which the port map "
                         f"does not have (ports {sorted(ports, key=int)})")
    host, port = ports[str(w.port)]
    return UdpTunnelLink((host, int(port)))


def agree_on_spec(store: dist.Store, rank: int, spec: JobSpec) -> None:
    """Rank 0 publishes the spec's digest; every other rank waits for it and compares, so ranks
    started with different specs fail here instead of summing into each other's slots."""
    digest = hashlib.sha256(json.dumps(asdict(spec), sort_keys=True).encode()).hexdigest()
    key = SPEC_KEY.format(spec.id)
    if rank == 0:
        store.set(key, digest)
    elif store.get(key).decode() != digest:
        raise ValueError(f"rank {rank}'s spec of job {spec.id} differs from rank 0's")
