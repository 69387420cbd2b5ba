"""The resource summary of the compiled TNA program, from the artifacts the Tofino compiler
wrote (``p4src/tofino/compiled/resources.json`` and ``context.json``): per MAU stage, the tables
of each pipeline, the SRAM, map RAM and TCAM blocks, the stateful ALUs, gateways and VLIW
instruction slots in use, out of what a Tofino 1 stage has; then the PHV containers in use.

``docs/tofino.md`` carries this table between two markers; ``--update-docs`` rewrites it there,
and a test requires the two to agree, so the document always describes the committed compile.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMPILED = ROOT / "p4src" / "tofino" / "compiled"
DOC = ROOT / "docs" / "tofino.md"
BEGIN = "<!-- tofino-resources:begin (tools/tofino_resources.py --update-docs) -->"
END = "<!-- tofino-resources:end -->"

# Per stage: (label, how the stage's record counts it, where its capacity comes from).
_UNITS = (
    ("SRAM", lambda s: len(s["rams"]["srams"]),
     lambda s: s["rams"]["nRows"] * s["rams"]["nColumns"]),
    ("map RAM", lambda s: len(s["map_rams"]["maprams"]),
     lambda s: s["map_rams"]["nRows"] * s["map_rams"]["nUnits"]),
    ("TCAM", lambda s: len(s["tcams"]["tcams"]),
     lambda s: s["tcams"]["nRows"] * s["tcams"]["nColumns"]),
    ("stateful ALU", lambda s: len(s["meter_alus"]["meters"]), lambda s: s["meter_alus"]["nAlus"]),
    ("gateway", lambda s: len(s["gateways"]["gateways"]),
     lambda s: s["gateways"]["nRows"] * s["gateways"]["nUnits"]),
    ("VLIW slot", lambda s: len(s["vliw"]["instructions"]), lambda s: 32),
)


def _gress_of_tables(stage: dict) -> dict[str, str]:
    """Which pipeline each table of a stage belongs to, from its actions' VLIW records (a
    table without actions, such as a gateway, goes by its name)."""
    gress = {}
    for instruction in stage["vliw"]["instructions"]:
        for color in instruction["color_usages"]:
            for usage in color["usages"]:
                gress[usage["used_by"]] = color["gress"]
    for table in stage["logical_tables"]["ids"]:
        name = table["table_name"]
        gress.setdefault(name, "egress" if "Egress" in name else "ingress")
    return gress


def stage_rows(resources: dict) -> list[dict]:
    rows = []
    for stage in sorted(resources["resources"]["mau"]["mau_stages"],
                        key=lambda s: s["stage_number"]):
        gress = _gress_of_tables(stage)
        tables = [t["table_name"] for t in stage["logical_tables"]["ids"]]
        row = {"stage": stage["stage_number"],
               "ingress": sum(gress[t] == "ingress" for t in tables),
               "egress": sum(gress[t] == "egress" for t in tables)}
        for label, used, capacity in _UNITS:
            row[label] = (used(stage), capacity(stage))
        rows.append(row)
    return rows


def phv_use(resources: dict, context: dict) -> dict[int, tuple[int, int]]:
    """Containers in use (in any stage, either pipeline) against those there are, by width."""
    width_of, total = {}, {}
    for kind in resources["resources"]["phv_containers"].values():
        for group in kind:
            for address in group["addresses"]:
                width_of[address] = group["width"]
            total[group["width"]] = total.get(group["width"], 0) + group["units"]
    used = {record["phv_number"]
            for stage in context["phv_allocation"]
            for gress in ("ingress", "egress")
            for record in stage.get(gress, [])}
    return {w: (sum(width_of[a] == w for a in used), total[w]) for w in sorted(total)}


def summary(compiled: Path = COMPILED) -> str:
    resources = json.loads((compiled / "resources.json").read_text())
    context = json.loads((compiled / "context.json").read_text())
    rows = stage_rows(resources)
    labels = [label for label, _, _ in _UNITS]
    lines = ["| stage | ingress tables | egress tables | " + " | ".join(labels) + " |",
             "|---:" * (3 + len(labels)) + "|"]
    for row in rows:
        cells = [str(row["stage"]), str(row["ingress"]), str(row["egress"])]
        cells += [f"{row[label][0]}/{row[label][1]}" for label in labels]
        lines.append("| " + " | ".join(cells) + " |")
    totals = ["all", str(sum(r["ingress"] for r in rows)), str(sum(r["egress"] for r in rows))]
    totals += [f"{sum(r[label][0] for r in rows)}/{sum(r[label][1] for r in rows)}"
               for label in labels]
    lines.append("| " + " | ".join(f"**{c}**" for c in totals) + " |")
    used_by = {g: sum(1 for r in rows if r[g]) for g in ("ingress", "egress")}
    phv = ", ".join(f"{u}/{t} of {w}-bit" for w, (u, t) in phv_use(resources, context).items())
    lines += ["",
              f"Compiler {resources['compiler_version']}, target {context['target']}: "
              f"{len(rows)} MAU stages, {used_by['ingress']} with ingress tables and "
              f"{used_by['egress']} with egress tables. PHV containers in use: {phv}."]
    return "\n".join(lines) + "\n"


def _block(text: str) -> tuple[int, int]:
    """Where the summary lies in docs/tofino.md's text, markers excluded."""
    return text.index(BEGIN) + len(BEGIN), text.index(END)


def docs_block(text: str) -> str:
    """The summary as docs/tofino.md carries it now."""
    start, end = _block(text)
    return text[start:end].strip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update-docs", action="store_true",
                        help=f"rewrite the summary in {DOC.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    table = summary()
    if not args.update_docs:
        sys.stdout.write(table)
        return 0
    text = DOC.read_text()
    start, end = _block(text)
    DOC.write_text(text[:start] + "\n" + table + text[end:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
