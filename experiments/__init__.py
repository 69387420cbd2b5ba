"""The testbed harness: the policy experiments that ``make harness``, ``make bench`` and the
simulator's calibration run. Straggler profiles and slowdown schedules (``stragglers``), emulated
host links (``emulated_link``), the digits workload (``digits``), the torchrun worker
(``train``), the methods and how one run is launched (``launch``), the scenario matrix
(``harness``) and the readers of its logs (``results``). ``examples/`` builds on it; nothing here
imports ``examples``."""
