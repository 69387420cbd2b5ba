"""Every RegisterAction of the TNA program as a pure function of the register cell and the
packet's fields: ``action(cell, phv) -> (new cell, returned value)``.

Written from p4src/tofino/aggregator.p4 and lanes.p4, one function per RegisterAction, under its
name in :func:`registry` (reads and claims share one shape); ``tests/tofino/test_tna_source.py``
checks that the names and registers match the source. Cells are unsigned (a lane pair is (lo, hi)),
arithmetic is modulo the register width, ``phv`` is the Phv of model/pipeline.py. None as a returned
value: the action returns nothing.
"""

from __future__ import annotations

from protocol import constants as P

M32 = 0xFFFF_FFFF
RUN_NEWER, RUN_SAME, RUN_OLDER = 0, 1, 2
SIT_NEWER, SIT_HELD, SIT_OLDER, SIT_OLD_RUN = 0, 1, 2, 3
TAKEN_BASE, AGGREGATING_BASE = 0x20000, 0x30000
ADD_AND_COMPLETE = 0xFFFE0001


def signed32(value: int) -> int:
    value &= M32
    return value - (1 << 32) if value & 0x8000_0000 else value


def read(cell, phv):
    """Every ``<register>_read`` and ``valid_peek``: the cell, unchanged."""
    return cell, cell


def claim(field: str, returns_old: bool = False):
    """``<register>_claim``: the cell takes the metadata field the program prepared."""
    def run(cell, phv):
        return getattr(phv, field), (cell if returns_old else None)
    return run


def claim_sa(field: str):
    """``<register>_claim`` of the packet's own value: the cell takes the SA-ATP header's
    field (which a management clear zeroes first)."""
    def run(cell, phv):
        return phv.sa[field], None
    return run


def serial(field: str, same: int, newer: int, older: int, update: bool):
    """``run_id_compare[_claim]`` and ``chunk_id_compare[_claim]``: the packet's 32-bit id
    against the cell's in serial-number arithmetic; with ``update``, a newer id is kept."""
    def run(cell, phv):
        value = phv.sa[field]
        if value == cell:
            return cell, same
        if signed32(value - cell) < 0:
            return cell, older
        return (value if update else cell), newer
    return run


def valid_occupy(cell, phv):
    return 1, cell


def valid_vacate(cell, phv):
    return 0, cell


def generation_bump(cell, phv):
    new = 1 if cell == 0xFF else cell + 1   # 8 bits, never 0 (a cleared member cell)
    return new, new


def agreed_scale_compare(cell, phv):
    return cell, int(phv.sa["scale"] == cell)


def member_join(cell, phv):
    return phv.gen, int(cell == phv.gen)


def progress_add(cell, phv):
    if cell >= phv.limit_add:
        return (cell + ADD_AND_COMPLETE) & M32, cell
    if cell >= AGGREGATING_BASE:
        return cell + 1, cell
    return cell, cell


def progress_check(cell, phv):
    if cell > phv.limit_add:
        return (cell - phv.progress_in) & M32, cell
    return cell, cell


def progress_helper(cell, phv):
    if TAKEN_BASE <= cell < AGGREGATING_BASE:
        return phv.progress_in, cell
    return cell, cell


def contributors_helper(cell, phv):
    return phv.sa["bitmap"], cell


def contributors_join(cell, phv):
    return cell | phv.gate_bits, cell


def max_exp_raise(cell, phv):
    return max(cell, phv.sa["exp"]), None


# -- lane_holder: (lo, hi) = (the holder's index, its index + 1 with POOL_HELD while held) ------

def lane_holder_peek(cell, phv):
    """1 (lanes_away) unless this aggregator holds the lanes, held or released."""
    return cell, int(cell[0] != phv.index)


def lane_holder_claim_held(cell, phv):
    """This aggregator's lanes, or free ones (or another's, released), become this
    aggregator's, held; busy ones stay as they are (1)."""
    if cell[0] == phv.index or cell[1] < P.POOL_HELD:
        return (phv.index, (phv.index + 1) | P.POOL_HELD), 0
    return cell, 1


def lane_holder_release(cell, phv):
    """This aggregator's lanes become released; any others stay as they are (1)."""
    if cell[0] == phv.index:
        return (phv.index, phv.index + 1), 0
    return cell, 1


def lane_holder_clear(cell, phv):
    return (0, 0), None


# -- the lanes' gate: (lo, hi) = (the aggregation whose lanes the cells hold, its workers in) ---

def lanes_gate_join(cell, phv):
    """The packet's workers join the cells' aggregation (returning those that were in), or
    the cells become its aggregation's (returning nothing: 0)."""
    if cell[0] == phv.gate_id:
        return (cell[0], cell[1] | phv.gate_bits), cell[1]
    return (phv.gate_id, phv.gate_bits), 0


def lanes_gate_join_same(cell, phv):
    """As join, in cells of this aggregation only (0: another's, left as they are)."""
    if cell[0] == phv.gate_id:
        return (cell[0], cell[1] | phv.gate_bits), cell[1]
    return cell, 0


def lanes_gate_replace_same(cell, phv):
    """The packet's workers become the cells' workers, in cells of this aggregation only."""
    if cell[0] == phv.gate_id:
        return (cell[0], phv.gate_bits), cell[1]
    return cell, 0


def lanes_gate_read(cell, phv):
    return cell, (cell[1] if cell[0] == phv.gate_id else 0)


# -- the lanes: pair i holds lane i (lo) and lane i + K/2 (hi) ------------------------------------

HALF = P.LANES // 2


def lanes_store(i):
    def store(cell, phv):
        return (phv.lanes[i], phv.lanes[i + HALF]), None
    return store


def lanes_add(i):
    def add(cell, phv):
        lo, hi = (cell[0] + phv.lanes[i]) & M32, (cell[1] + phv.lanes[i + HALF]) & M32
        return (lo, hi), lo
    return add


def lanes_read_lo(i):
    def read_lo(cell, phv):
        return cell, cell[0]
    return read_lo


def lanes_read_hi(i):
    def read_hi(cell, phv):
        return cell, cell[1]
    return read_hi


AGGREGATOR = {
    "valid": {"valid_occupy": valid_occupy, "valid_vacate": valid_vacate, "valid_peek": read},
    "run_id": {"run_id_claim": claim_sa("run"),
               "run_id_compare": serial("run", RUN_SAME, RUN_NEWER, RUN_OLDER, False),
               "run_id_compare_claim": serial("run", RUN_SAME, RUN_NEWER, RUN_OLDER, True),
               "run_id_read": read},
    "chunk_id": {"chunk_id_claim": claim_sa("chunk"),
                 "chunk_id_compare": serial("chunk", SIT_HELD, SIT_NEWER, SIT_OLDER, False),
                 "chunk_id_compare_claim": serial("chunk", SIT_HELD, SIT_NEWER, SIT_OLDER, True),
                 "chunk_id_read": read},
    "generation": {"generation_bump": generation_bump, "generation_read": read},
    "agreed_scale": {"agreed_scale_claim": claim_sa("scale"),
                     "agreed_scale_compare": agreed_scale_compare, "agreed_scale_read": read},
    "member": {"member_join": member_join},
    "progress": {"progress_claim": claim("progress_in", returns_old=True),
                 "progress_add": progress_add, "progress_check": progress_check,
                 "progress_helper": progress_helper},
    "contributors": {"contributors_claim": claim("gate_bits", returns_old=True),
                     "contributors_helper": contributors_helper,
                     "contributors_join": contributors_join, "contributors_read": read},
    "max_exp": {"max_exp_claim": claim_sa("exp"), "max_exp_raise": max_exp_raise,
                "max_exp_read": read},
    "helper_id": {"helper_id_write": claim_sa("worker"), "helper_id_read": read},
    "lane_holder": {"lane_holder_peek": lane_holder_peek,
                    "lane_holder_claim_held": lane_holder_claim_held,
                    "lane_holder_release": lane_holder_release,
                    "lane_holder_clear": lane_holder_clear},
}


def registry() -> dict[str, dict[str, object]]:
    """register -> {RegisterAction name: function}, for every register of the program."""
    found = {reg: dict(actions) for reg, actions in AGGREGATOR.items()}
    found["lanes_gate"] = {"lanes_gate_join": lanes_gate_join,
                           "lanes_gate_join_same": lanes_gate_join_same,
                           "lanes_gate_replace_same": lanes_gate_replace_same,
                           "lanes_gate_read": lanes_gate_read}
    for i in range(HALF):
        found[f"lanes_{i:02d}"] = {f"lanes_{i:02d}_{kind}": make(i) for kind, make in (
            ("store", lanes_store), ("add", lanes_add), ("read_lo", lanes_read_lo),
            ("read_hi", lanes_read_hi))}
    return found
