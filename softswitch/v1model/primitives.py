"""The primitives p4c emits for v1model's own externs, as simple_switch runs them: ``mark_to_drop``
(standard_metadata), ``clone_ingress_pkt_to_egress`` / ``clone_egress_pkt_to_egress``,
``resubmit``, ``recirculate`` (with their field lists), ``truncate``, ``random``
(``modify_field_rng_uniform``) and ``hash`` (``modify_field_with_hash_based_offset``, over the
core's calculations).

The clone, resubmit, recirculate and truncate requests are kept in the packet instance's own
slots (:class:`~softswitch.v1model.runtime.V1Packet`); the switch acts on them when ingress or
egress ends.  ``_DROP_PORT``, ``_MIRROR_SESSION_VALID`` and ``_randint`` are globals the switch
binds (switch.py).
"""

from __future__ import annotations

from ..core.codegen import PrimitiveGenerator
from ..core.errors import ProgramError
from ..core.expressions import DATA, Expr, normalize_code, store_code


class V1ModelPrimitives(PrimitiveGenerator):
    def _p_mark_to_drop(self, ec, prim, hdr):
        h = self.header_of(hdr, prim)
        names = {f.name: f for f in h.fields}
        if "egress_spec" not in names:
            raise ProgramError(f"mark_to_drop: header {h.name!r} has no egress_spec field", prim)
        spec = names["egress_spec"]
        drop = normalize_code(Expr("_DROP_PORT", DATA), spec.width, spec.signed)
        lines = [f"F[{spec.index}] = {drop}"]
        if "mcast_grp" in names:
            lines.append(f"F[{names['mcast_grp'].index}] = 0")
        return lines

    def _clone(self, ec, prim, session, field_list):
        s = self.gen.data_param(ec, session, prim)
        fl = self._field_list(field_list, prim)
        return [f"p.clone_session = ({s.code} & 0xffff) | _MIRROR_SESSION_VALID",
                f"p.clone_field_list = {fl}"]

    def _p_clone_ingress_pkt_to_egress(self, ec, prim, session, field_list):
        return self._clone(ec, prim, session, field_list)

    def _p_clone_egress_pkt_to_egress(self, ec, prim, session, field_list):
        return self._clone(ec, prim, session, field_list)

    def _field_list(self, param: dict, prim: dict) -> int:
        """The id of the field list whose fields the copy keeps (0: none)."""
        fl = self.gen.const_param(param, prim)
        if fl and fl not in self.gen.field_lists:
            raise ProgramError(f"unknown field list id {fl}", prim)
        return fl & 0xFFFF

    def _p_resubmit(self, ec, prim, field_list):
        return [f"p.resubmit = {self._field_list(field_list, prim)}"]

    def _p_recirculate(self, ec, prim, field_list):
        return [f"p.recirculate = {self._field_list(field_list, prim)}"]

    def _p_truncate(self, ec, prim, length):
        n = self.gen.data_param(ec, length, prim)
        return [f"_l = {n.code}", "if _l < p.truncated_length:", "    p.truncated_length = _l"]

    def _p_modify_field_rng_uniform(self, ec, prim, dst, lo, hi):
        f = self.gen.field_of(dst, prim)
        a, b = self.gen.data_param(ec, lo, prim), self.gen.data_param(ec, hi, prim)
        value = Expr("_randint(_lo, _hi)", DATA, 64)
        return [f"_lo = {a.code} & 0xffffffffffffffff", f"_hi = {b.code} & 0xffffffffffffffff",
                "if _lo <= _hi:", f"    F[{f.index}] = {store_code(f, value)}"]

    def _p_modify_field_with_hash_based_offset(self, ec, prim, dst, base, calc, size):
        f = self.gen.field_of(dst, prim)
        if calc.get("type") != "calculation" or calc["value"] not in self.gen.calculations:
            raise ProgramError("modify_field_with_hash_based_offset needs a known calculation",
                               prim)
        c = self.gen.calculations[calc["value"]]
        b, s = self.gen.data_param(ec, base, prim), self.gen.data_param(ec, size, prim)
        if s.const is not None:
            modulus = str(s.const or 1)
        else:
            modulus = f"({s.code} or 1)"
        value = Expr(f"(({c.gname}(F, V, p) % {modulus}) + {b.code})", DATA)
        return [f"F[{f.index}] = {store_code(f, value)}"]
