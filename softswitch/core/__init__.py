"""The core of the software switch: what runs any bmv2 JSON program whatever its architecture, as
bmv2's ``bm_sim`` does.  It loads the JSON (header types and instances, parsers, deparsers,
checksums, calculations, actions, tables, conditionals, register and counter arrays, field lists)
against what a target declares (:class:`~softswitch.core.program.Architecture`), generates and
compiles the program's code, and holds its runtime objects: tables, registers, counters and the
packet replication engine (:class:`~softswitch.core.switch.Switch`).

It imports no target: a target (``softswitch/v1model``) declares its metadata, pipelines and
primitives to the loader and drives packets through a :class:`~softswitch.core.switch.Switch`
subclass.  Where a rule is bmv2's general behaviour rather than simple_switch's (how a table
matches, how an expression truncates, the parser's error codes), it is here.
"""
