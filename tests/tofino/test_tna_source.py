"""What the TNA program's text shows, checked without a Tofino compiler (docs/tofino.md):
Tofino's rules for stateful ALUs, the lanes, and that the reference model is the program's."""

import itertools
import re

import pytest

from protocol import constants as P
from tests.tofino import p4_text
from tests.tofino.model import register_actions, tables

CONTROLS = p4_text.controls()
STATEFUL = {name: c for name, c in CONTROLS.items() if c.registers}
REGISTERS = [(c, r) for c in STATEFUL.values() for r in c.registers]
PROGRAM = p4_text.program_text()


def actions_of(control, register: str) -> list[str]:
    return [n for n, (reg, _, _) in control.register_actions.items() if reg == register]


def executing(control, register_action: str) -> list[str]:
    """The P4 actions that execute a RegisterAction."""
    return [a for a, (_, body) in control.actions.items()
            if re.search(rf"\b{register_action}\.execute\(", body)]


@pytest.mark.parametrize("control, register", REGISTERS, ids=[r for _, r in REGISTERS])
def test_at_most_four_register_actions_per_register(control, register):
    assert 1 <= len(actions_of(control, register)) <= 4


@pytest.mark.parametrize("control, register", REGISTERS, ids=[r for _, r in REGISTERS])
def test_each_register_executes_once_per_pass(control, register):
    """Its RegisterActions run only from actions of one table, applied once in the program,
    and no action runs two of them: a pass runs at most one per register."""
    runners = [a for ra in actions_of(control, register) for a in executing(control, ra)]
    assert len(runners) == len(set(runners)), f"an action runs two RegisterActions of {register}"
    assert all(len(executing(control, ra)) == 1 for ra in actions_of(control, register))
    selectors = [t for t in control.tables.values() if set(runners) & set(t.actions)]
    assert len(selectors) == 1, f"{register} is run from {[t.name for t in selectors]}"
    assert set(runners) <= set(selectors[0].actions)
    assert len(re.findall(rf"\b{selectors[0].name}\.apply\(\)", PROGRAM)) == 1
    assert not re.search(r"\.execute\(", control.body.split("apply {")[-1]), \
        "a RegisterAction executed outside an action"


def test_each_stateful_control_is_instantiated_once():
    paths = p4_text.instance_paths()
    for name in STATEFUL:
        assert list(paths.values()).count(name) == 1, name


@pytest.mark.parametrize("control, register", REGISTERS, ids=[r for _, r in REGISTERS])
def test_register_cells_are_one_word_or_a_pair(control, register):
    """A stateful ALU reads and writes one 32-bit word or a pair of them per execution."""
    cell, _ = control.registers[register]
    assert cell in ("bit<8>", "bit<16>", "bit<32>", "lane_pair_t", "holder_pair_t")


@pytest.mark.parametrize("name, spec", [(n, s) for c in STATEFUL.values()
                                         for n, s in c.register_actions.items()],
                         ids=[n for c in STATEFUL.values() for n in c.register_actions])
def test_register_actions_compare_at_most_twice(name, spec):
    """Tofino 1's stateful ALU has two comparators."""
    body = re.sub(r"\w+<\d+>", "T", spec[2])   # casts and types hold no comparison
    conditions = re.findall(r"\bif\s*\((.*?)\)\s*\{", body)
    assert sum(len(re.findall(r"==|!=|>=|<=|<|>", c)) for c in conditions) <= 2, conditions


LANE_REGISTERS = [r for r in CONTROLS["Lanes"].registers if re.fullmatch(r"lanes_\d\d", r)]


def test_lanes_are_pairs_of_two_words_covering_every_lane_once():
    lanes = CONTROLS["Lanes"]
    assert len(LANE_REGISTERS) == P.LANES // 2
    assert set(lanes.registers) == {*LANE_REGISTERS, "lanes_gate"}
    used = []
    for register in LANE_REGISTERS:
        store = lanes.register_actions[f"{register}_store"][2]
        used += re.findall(r"hdr\.lanes\.v(\d\d)", store)
    assert sorted(int(v) for v in used) == list(range(P.LANES))
    header = PROGRAM[PROGRAM.index("header lanes_h"):]
    assert len(re.findall(r"bit<32> v\d\d;", header[:header.index("}")])) == P.LANES


def test_the_lanes_act_only_on_a_frame_whose_lanes_are_whole():
    """The lanes run in stage 0 on the parser's word alone, before the apply block's checks of
    a management request: a request cut short must find every lane table missing."""
    lanes = CONTROLS["Lanes"]
    stateful = [t for t in lanes.tables.values()
                if any(re.search(r"\.execute\(", lanes.actions[a][1]) for a in t.actions
                       if a in lanes.actions)]
    assert len(stateful) == P.LANES // 2 + 1   # the lane pairs and the gate
    for table in stateful:
        assert [k for k, _ in table.keys][:2] == ["lane_op", "hdr.lanes.$valid"], table.name
        assert table.const_entries and table.default == "NoAction()", table.name
        assert all(values[1] == "true" for values, _ in table.const_entries), table.name


def test_the_model_has_every_register_action_of_the_source():
    model = register_actions.registry()
    source = {r: sorted(actions_of(c, r)) for c, r in REGISTERS}
    assert {r: sorted(a) for r, a in model.items()} == source


def test_the_models_codes_are_the_programs():
    consts = p4_text.constants()
    for name in dir(tables):
        if name.split("_")[0] in ("PASS", "KIND", "RUN", "SIT", "PHASE", "LANES", "RESPOND") \
                and isinstance(getattr(tables, name), int):
            assert consts[name] == getattr(tables, name), name


DOMAINS = {"meta.pass": range(3), "meta.kind": range(8), "meta.was_valid": range(2),
           "meta.run_class": range(4), "meta.situation": range(4), "meta.scale_ok": range(2),
           "meta.is_member": range(2), "meta.old_progress[17:16]": range(4),
           "meta.limit_add": range(2), "meta.at_limit": range(2),
           # admit_sel: zero tests as 0 and 1, the ops and flags as they come
           "meta.drop_reason": (0, 1), "meta.spoofed": range(2), "meta.sa_valid": range(2),
           "meta.job_known": range(2), "meta.transit": range(2), "hdr.sa.op": (*range(9), 15),
           "meta.registered": range(2), "meta.num_slots": range(2),
           "meta.expected_worker": range(2), "hdr.sa.worker": (0, 1, 5, 31, 32, 255),
           "meta.helper_known": range(2), "meta.loss_left": range(2),
           "hdr.sa.flags": (0, 0x10, 0x11),
           "meta.expected": (0, 1, 2, 0x20, 0x80000000, 0xFFFFFFFF),
           "meta.port_frame": range(2),
           # l2_sel, fan_in_sel, start_sel
           "meta.use_l2": range(2), "meta.l2_flood": range(2), "meta.udp_valid": range(2),
           "hdr.udp.src_port": (0, 80, P.UDP_PORT), "hdr.udp.dst_port": (0, 80, P.UDP_PORT),
           "meta.inband_fanin": range(2), "hdr.sa.fanin": (0, 1, 2, 7),
           "meta.fan_in": (0, 1, 2, 3, 32),
           # the shared pool: lanes_at_sel, lane_holder_sel and what lane_holder answers
           "meta.own_slots": (0, 1, 7), "meta.lanes_away": range(2),
           "meta.response": range(9), "meta.lane_op": range(8), "hdr.pass.response": range(9),
           # the lanes' gate: what it answered, and contributors beside a worker's bit
           "hdr.sa.worker[4:0]": (0, 5, 31), "hdr.sa.bitmap": (0, 0x21, 0x80000000),
           "lane_op": range(8), "hdr.lanes.$valid": range(2),
           "gate_bits": (0, 1, 0x20, 0x80000021)}


def tcam(table, values: dict, consts: dict):
    """The action call of the first const entry matching ``values`` (or the default)."""
    for key, call in table.const_entries:
        if all(_matches(v, values[k], consts) for v, (k, _) in zip(key, table.keys, strict=True)):
            return call
    return table.default


def _matches(text: str, value: int, consts: dict) -> bool:
    """A const entry's key value (``_``, a value, or ``value &&& mask``) against ``value``."""
    if text == "_":
        return True
    want, _, mask = text.partition("&&&")
    mask_value = _value(mask.strip(), consts) if mask else -1
    return value & mask_value == _value(want.strip(), consts) & mask_value


def _value(text: str, consts: dict) -> int:
    if text in ("true", "false"):
        return int(text == "true")
    return consts[text] if text in consts else int(text, 0)


def _call(call: str, consts: dict):
    name, _, args = call.partition("(")
    return name, tuple(_value(a.strip(), consts) for a in args.rstrip(")").split(",") if a.strip())


def _model_name(key: str) -> str:
    """A table key as the model's functions name it."""
    if key == "hdr.lanes.$valid":
        return "lanes_valid"
    if key == "hdr.pass.response":
        return "pass_response"
    if key.startswith(("hdr.", "meta.resub.")):
        return key.split(".")[-1].split("[")[0]
    return key.removeprefix("meta.")


def _named(function):
    return lambda m: (function(m), ())


TABLE_FUNCTIONS = {"decide": ("Decide", tables.decide), "admit_sel": ("Aggregator", tables.admit),
                   "abs_slot_sel": ("SaAtpIngress", lambda m: (
                       ("add_slot", ()) if m["kind"] == tables.KIND_NONE and m["port_frame"] == (
                           m["pass"] == tables.PASS_STATE) else ("NoAction", ()))),
                   "l2_sel": ("L2Answer", _named(tables.l2_sel)),
                   "fan_in_sel": ("Limits", _named(tables.fan_in_sel)),
                   "expected_sel": ("JobAdmission", _named(tables.expected_sel)),
                   "start_sel": ("Limits", tables.start_sel),
                   "lanes_at_sel": ("SaAtpIngress", _named(tables.lanes_at_sel))}


@pytest.mark.parametrize("table", [*tables.SELECTORS, *TABLE_FUNCTIONS])
def test_the_models_tables_are_the_const_entries(table):
    """Every key combination, evaluated as the switch's TCAM evaluates the const entries,
    picks what the model's function picks."""
    control = CONTROLS[TABLE_FUNCTIONS[table][0] if table in TABLE_FUNCTIONS else "Aggregator"]
    consts, t = p4_text.constants(), control.tables[table]
    names = [k for k, _ in t.keys]
    for combo in itertools.product(*(DOMAINS[k] for k in names)):
        values = dict(zip(names, combo, strict=True))
        m = {_model_name(k): v for k, v in values.items()}
        m["pass_response"] = values.get("hdr.pass.response", 0)   # beside meta.response
        m["response"] = values.get("meta.response", 0)
        m["phase"] = values.get("meta.old_progress[17:16]", 0)
        # decide reads limit_add |-| old progress: 0 when an addition completes the chunk; a
        # duplicate completes it when moreover old progress is not at the limit (decide.p4)
        m["add_done"] = int(values.get("meta.limit_add", 1) == 0)
        m["dup_done"] = m["add_done"] * (1 - values.get("meta.at_limit", 0))
        got = _call(tcam(t, values, consts), consts)
        want = (TABLE_FUNCTIONS[table][1](m) if table in TABLE_FUNCTIONS
                else (tables.SELECTORS[table](m), ()))
        assert got == want, f"{table} at {m}"


@pytest.mark.parametrize("table", [*(f"{r}_op" for r in LANE_REGISTERS), "lanes_gate_op",
                                   "lanes_gate_resolve"])
def test_the_lane_tables_are_the_models(table):
    """What the gate and every lane register do, for every operation, gate answer and
    worker, and what the lanes after stage 1 are told a contribution's operation is: the
    model's ``lanes_gate_op``, ``lane_op`` and ``lanes_gate_resolve`` (lane tables keep their
    actions' register prefix: ``lanes_07_do_add`` is the model's ``add``). A table that keys
    on the operation alone (after stage 1) sees it resolved: never GATED or REPAIR, and STORE
    only where the gate let it store."""
    consts, t = p4_text.constants(), CONTROLS["Lanes"].tables[table]
    names = [k for k, _ in t.keys]
    resolved = "gate_bits" not in names
    for combo in itertools.product(*(DOMAINS[k] for k in names)):
        values = dict(zip(names, combo, strict=True))
        m = {_model_name(k): v for k, v in values.items()}
        if resolved:   # what the resolver leaves: never an operation that asks the gate,
            if m["lane_op"] in (tables.LANES_GATED, tables.LANES_REPAIR):   # and STORE only
                continue                                                 # where it stores
            m["gate_bits"], m["worker"] = 1, 0
        got = _call(tcam(t, values, consts), consts)
        if table == "lanes_gate_resolve":
            assert got == tables.lanes_gate_resolve(m), m
            continue
        want = tables.lanes_gate_op(m) if table == "lanes_gate_op" else tables.lane_op(m)
        register = table.removesuffix("_op")
        assert got[0].replace(f"{register}_do_", "") == want.replace("lanes_gate_do_", ""), m


def test_pass_two_answers_are_the_models():
    """respond.p4's answer in pass 2, whatever order the passes 2 came in: a sum leaves only
    when the lanes hold what the state counts (meta.gate_bits, by then the workers missing)."""
    consts, t = p4_text.constants(), CONTROLS["Respond"].tables["answer"]
    names = [k for k, _ in t.keys]
    domains = {**DOMAINS, "meta.pass": (tables.PASS_LANES,), "hdr.pass.response": (0,),
               "meta.gate_bits": (0, 1, 0x20, 0x21), "hdr.sa.worker[4:0]": (0, 5),
               "meta.run_class": range(3), "meta.situation": range(3)}
    for combo in itertools.product(*(domains[k] for k in names)):
        values = dict(zip(names, combo, strict=True))
        m = {_model_name(k): v for k, v in values.items()}
        m["phase"] = values["meta.old_progress[17:16]"]
        got, _ = _call(tcam(t, values, consts), consts)
        assert got == tables.pass_two(m), f"answer at {m}"


def test_pass_three_answers_are_the_models():
    """respond.p4's answer in pass 3 (the rest of the table is checked packet by packet by the
    twin, which never holds a packet between passes 2 and 3)."""
    consts, t = p4_text.constants(), CONTROLS["Respond"].tables["answer"]
    names = [k for k, _ in t.keys]
    domains = {**DOMAINS, "meta.pass": (tables.PASS_HIGH,), "meta.response": (0, 3, 7),
               "meta.lane_op": (0, 4), "meta.gate_bits": (0, 1), "hdr.sa.worker[4:0]": (0,)}
    for combo in itertools.product(*(domains[k] for k in names)):
        values = dict(zip(names, combo, strict=True))
        m = {k.removeprefix("meta."): v for k, v in values.items()}
        m["pass_response"] = values["hdr.pass.response"]
        m["phase"] = values["meta.old_progress[17:16]"]
        got = _call(tcam(t, values, consts), consts)
        assert got == (tables.pass_three(m), ()), f"answer at {m}"


# -- the bridge header's fill -------------------------------------------------------------------

FILL = "hdr.bridge.setValid();"


def _assigned(control: str, prefix: str, ctrls) -> set[str]:
    """Fields ``prefix.<field>`` that a control, or any control it instantiates, assigns, in
    its apply block or in actions that let the frame go on (egress never sees what an action
    that drops it wrote)."""
    c = ctrls[control]
    text = c.body
    for _, body in c.actions.values():
        if re.search(r"\bdrop_ctl\s*=\s*1\s*;", body):
            text = text.replace(body, "")
    found = set(re.findall(rf"\b{re.escape(prefix)}\.(\w+)\s*=(?!=)", text))
    for inner in c.instances.values():
        if inner in ctrls:
            found |= _assigned(inner, prefix, ctrls)
    return found


def bridge_fill_violations(ctrls) -> list[str]:
    """Where the ingress's bridge fill breaks its contract: the metadata fields it copies must
    be final there (no control applied after it assigns them, nor passes them on as ``out`` or
    ``inout``), and the flags it zeroes may be set only by controls applied after it (one applied
    before would see its flag wiped). Before 759564b the fill copied ``flood`` and
    ``to_worker`` from metadata that tables applied after it set: no egress copy ever saw them."""
    ingress = ctrls["SaAtpIngress"]
    block_at = list(re.finditer(r"\bapply\s*\{", ingress.body))[-1].start()
    apply_block, _ = p4_text.braced(ingress.body, block_at)
    before, after = apply_block.split(FILL)
    fill = after[:after.index(".apply(")]
    copied = dict(re.findall(r"hdr\.bridge\.(\w+)\s*=\s*meta\.(\w+)\s*;", fill))
    zeroed = set(re.findall(r"hdr\.bridge\.(\w+)\s*=\s*0\s*;", fill))
    problems = []
    for name, args in re.findall(r"(\w+)\.apply\(([^)]*)\)", after):
        control = ingress.instances[name]
        late = _assigned(control, "meta", ctrls) & set(copied.values())
        problems += [f"{name} ({control}) assigns meta.{f} after the fill copied it"
                     for f in sorted(late)]
        for arg, direction in zip((a.strip() for a in args.split(",")),
                                  ctrls[control].directions, strict=True):
            field = arg.removeprefix("meta.")
            if field in copied.values() and direction in ("out", "inout"):
                problems.append(f"{name} ({control}) may change meta.{field} after the fill")
    for name in re.findall(r"(\w+)\.apply\(", before):
        control = ingress.instances.get(name)
        if control in ctrls:
            early = _assigned(control, "hdr.bridge", ctrls) & zeroed
            problems += [f"{name} ({control}) sets bridge.{f} before the fill zeroes it"
                         for f in sorted(early)]
    set_after = set().union(*(_assigned(ingress.instances[n], "hdr.bridge", ctrls)
                              for n in re.findall(r"(\w+)\.apply\(", after)))
    problems += [f"bridge.{f} is zeroed by the fill and set by nothing after it"
                 for f in sorted(zeroed - set_after)]
    return problems


def test_the_bridge_fill_copies_final_fields_and_zeroes_flags_set_after_it():
    assert not bridge_fill_violations(CONTROLS)


@pytest.mark.parametrize("mutation", [
    # the flag copied from metadata that a table applied after the fill decides (the old bug)
    ("hdr.bridge.to_worker = 0;", "hdr.bridge.to_worker = meta.response;"),
    # the fill moved after the first control that sets a flag
    ("        hdr.bridge.setValid();",
     "        aggregator.apply(hdr, meta, ig_dprsr_md, ig_tm_md);\n        hdr.bridge.setValid();"),
])
def test_the_bridge_fill_check_finds_a_broken_fill(mutation):
    """The check above fails on the bug it guards against, written into a copy of the source."""
    old, new = mutation
    assert PROGRAM.count(old) == 1
    broken = p4_text.parse_controls(PROGRAM.replace(old, new))
    assert bridge_fill_violations(broken)
