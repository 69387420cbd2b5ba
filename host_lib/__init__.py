"""The SA-ATP host library: what a training process links to aggregate through the switch.

In layers, each importing only those below it (tests/test_layering.py):

* ``communicator`` — :class:`~host_lib.communicator.SwitchCommunicator`, the object a training
  process calls (``allreduce``), with its configuration and per-call ``metrics``;
* ``pytorch/`` — the PyTorch glue: the DDP comm hook (``ddp_hook``), building a rank's
  communicator from a job spec (``connect``), the ``sa_atp`` torch.distributed backend
  (``c10d_backend``), GPU quantization and staging, the gloo fallback;
* ``scheduling/`` — straggler policies (``policies/``), work stealing and the global-batch
  sampler: who computes what, and how each worker takes part in a call;
* ``engine/`` — the protocol engine, numpy and numba only: the quantizer, the streaming
  transport and its rounds (compiled in their common case, split over the worker's cores), slot
  takeover, loss recovery, the frame filter, run identities and the links to the switch.

docs/protocol.md is the wire contract; the wire format itself is ``protocol/``.
"""
