"""v1model as simple_switch declares it to the loader: the standard, intrinsic and queueing
metadata it reads and writes by name, the parser, deparser and pipelines it runs, and its
primitives."""

from __future__ import annotations

from ..core.program import Architecture, Program
from ..core.program import load_program as load_for
from .primitives import V1ModelPrimitives

# Metadata simple_switch reads or writes (after field aliases are applied).
REQUIRED_FIELDS = ("standard_metadata.ingress_port", "standard_metadata.packet_length",
                   "standard_metadata.instance_type", "standard_metadata.egress_spec",
                   "standard_metadata.egress_port")
OPTIONAL_FIELDS = ("standard_metadata.parser_error", "standard_metadata.checksum_error",
                   "intrinsic_metadata.ingress_global_timestamp",
                   "intrinsic_metadata.egress_global_timestamp", "intrinsic_metadata.mcast_grp",
                   "intrinsic_metadata.egress_rid", "intrinsic_metadata.priority",
                   "queueing_metadata.enq_timestamp", "queueing_metadata.enq_qdepth",
                   "queueing_metadata.deq_timedelta", "queueing_metadata.deq_qdepth",
                   "queueing_metadata.qid")

V1MODEL = Architecture("simple_switch", REQUIRED_FIELDS, OPTIONAL_FIELDS, parsers=("parser",),
                       deparsers=("deparser",), pipelines=("ingress", "egress"),
                       primitives=V1ModelPrimitives)


def load_program(source: dict | str | bytes) -> Program:
    """Load the bmv2 JSON ``p4c-bm2-ss`` produces (a parsed dict, or JSON text) and compile it.
    Raises :class:`~softswitch.core.errors.UnsupportedConstruct` for any construct this target
    does not run."""
    return load_for(source, V1MODEL)
