"""The v1model target: what bmv2's ``simple_switch`` adds to the core (``softswitch/core``), as
bmv2 keeps ``targets/simple_switch`` apart from ``bm_sim``.

The cut: whatever names v1model's metadata or externs, or follows simple_switch's packet path, is
here; whatever any bmv2 JSON program needs whatever its architecture (loading, code generation,
tables, register and counter arrays, the replication engine) is in the core, which imports
nothing from here.  So the target is

* ``architecture.py``: the metadata fields simple_switch reads and writes (``standard_metadata``
  and the intrinsic and queueing metadata), the parser, deparser and pipelines it runs, and
  :func:`load_program`, the core's loader with those;
* ``primitives.py``: the primitives of v1model's externs (``mark_to_drop``, clone, resubmit,
  recirculate, truncate, random, hash);
* ``runtime.py``: the per-packet registers simple_switch keeps outside the PHV, instance types
  and clone session ids;
* ``switch.py``: :class:`V1Switch`, the pipeline driver (parser, ingress, replication engine,
  egress, deparser, and the copies a packet spawns).

A second architecture (PSA, PNA, a TNA model) would be a sibling package with the same parts.
"""

from .architecture import V1MODEL, load_program
from .switch import DEFAULT_DROP_PORT, V1Switch

__all__ = ["DEFAULT_DROP_PORT", "V1MODEL", "V1Switch", "load_program"]
