"""The PyTorch glue: the DDP comm hook (``ddp_hook``), a rank's communicator from a job spec
(``connect``), the ``sa_atp`` torch.distributed backend (``c10d_backend``), quantization and
staging on the GPU (``quantize_torch``, ``device_staging``) and the gloo fallback
(``fallback``). The communicator below knows none of it: it declares what it needs of a staged
bucket and a fallback group as protocols (host_lib/communicator.py)."""
