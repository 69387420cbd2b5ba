"""Generate one Python module per program: actions, parser, deparser, calculations, table keys and
conditionals become plain functions over the packet header vector (``F``, ``V``) and the packet
instance ``p``.  The module is compiled once per program and executed once per switch, with the
switch's state objects (registers, counters, tables) and the names its target's primitives use
bound as its globals.

Every construct the generator does not translate raises :class:`UnsupportedConstruct` here, at
load time, naming the JSON node.

One module per part of the program, as bmv2 keeps them apart: ``module`` (what the parts share,
and their order), ``primitives`` (actions, and the primitives every target has; a target adds
its own in a subclass), ``parser``, ``deparser`` (with checksums),
``calculations`` (hashes), ``controlflow`` (tables and conditionals), ``source`` (the text).
"""

from .controlflow import ControlFlowGenerator
from .module import ModuleGenerator
from .primitives import ActionInfo, CounterInfo, PrimitiveGenerator, RegisterInfo

__all__ = ["ActionInfo", "ControlFlowGenerator", "CounterInfo", "ModuleGenerator",
           "PrimitiveGenerator", "RegisterInfo"]
