"""Every RegisterAction of the TNA program as a pure function of the register cell and the
packet's fields: ``action(cell, phv) -> (new cell, returned value)``.

Written from p4src/tofino/aggregator.p4 and lanes.p4, one function per RegisterAction with the
same name; ``tests/tofino/test_tna_source.py`` checks that the names and registers match the
source. Cells are unsigned (a lane pair is (lo, hi)), arithmetic is modulo the register width,
``phv`` is the Phv of model/pipeline.py. None as a returned value: the action returns nothing.
"""

from __future__ import annotations

from protocol import constants as P

M32 = 0xFFFF_FFFF
RUN_SAME, RUN_NEWER, RUN_OLDER = 1, 2, 3
SIT_NEWER, SIT_HELD, SIT_OLDER, SIT_OLD_RUN = 0, 1, 2, 3
TAKEN_BASE, AGGREGATING_BASE = 0x20000, 0x30000
ADD_AND_COMPLETE = 0xFFFE0001


def signed32(value: int) -> int:
    value &= M32
    return value - (1 << 32) if value & 0x8000_0000 else value


# -- valid ---------------------------------------------------------------------------------------

def valid_occupy(cell, phv):
    return 1, cell


def valid_vacate(cell, phv):
    return 0, cell


def valid_peek(cell, phv):
    return cell, cell


# -- run_id, chunk_id: serial-number comparisons --------------------------------------------------

def _run_class(cell, run):
    if run == cell:
        return RUN_SAME
    return RUN_OLDER if signed32(run - cell) < 0 else RUN_NEWER


def run_id_claim(cell, phv):
    return phv.run_in, None


def run_id_compare(cell, phv):
    return cell, _run_class(cell, phv.sa["run"])


def run_id_compare_claim(cell, phv):
    rv = _run_class(cell, phv.sa["run"])
    return (phv.sa["run"] if rv == RUN_NEWER else cell), rv


def run_id_read(cell, phv):
    return cell, cell


def _situation(cell, chunk):
    if chunk == cell:
        return SIT_HELD
    return SIT_NEWER if signed32(chunk - cell) > 0 else SIT_OLDER


def chunk_id_claim(cell, phv):
    return phv.chunk_in, None


def chunk_id_compare(cell, phv):
    return cell, _situation(cell, phv.sa["chunk"])


def chunk_id_compare_claim(cell, phv):
    rv = _situation(cell, phv.sa["chunk"])
    return (phv.sa["chunk"] if rv == SIT_NEWER else cell), rv


def chunk_id_read(cell, phv):
    return cell, cell


# -- generation, agreed_scale, member -------------------------------------------------------------

def generation_bump(cell, phv):
    new = (cell + 1) & M32
    return new, new


def generation_read(cell, phv):
    return cell, cell


def agreed_scale_claim(cell, phv):
    return phv.scale_in, None


def agreed_scale_compare(cell, phv):
    return cell, int(phv.sa["scale"] == cell)


def agreed_scale_read(cell, phv):
    return cell, cell


def member_join(cell, phv):
    return phv.gen, int(cell == phv.gen)


# -- progress: phase << 16 | count ----------------------------------------------------------------

def progress_claim(cell, phv):
    return phv.progress_in, cell


def progress_add(cell, phv):
    if cell >= phv.limit_add:
        return (cell + ADD_AND_COMPLETE) & M32, cell
    if cell >= AGGREGATING_BASE:
        return cell + 1, cell
    return cell, cell


def progress_check(cell, phv):
    if cell >= phv.check_limit:
        return (cell + phv.check_delta) & M32, cell
    return cell, cell


def progress_helper(cell, phv):
    if TAKEN_BASE <= cell < AGGREGATING_BASE:
        return phv.progress_in, cell
    return cell, cell


# -- contributors, max_exp, helper_id -------------------------------------------------------------

def contributors_claim(cell, phv):
    return phv.bitmap_in, cell


def contributors_join(cell, phv):
    return cell | phv.worker_bit, cell


def contributors_read(cell, phv):
    return cell, cell


def max_exp_claim(cell, phv):
    return phv.exp_in, None


def max_exp_raise(cell, phv):
    return max(cell, phv.sa["exp"]), None


def max_exp_read(cell, phv):
    return cell, cell


def helper_id_write(cell, phv):
    return phv.helper_in, None


def helper_id_read(cell, phv):
    return cell, cell


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
    "valid": (valid_occupy, valid_vacate, valid_peek),
    "run_id": (run_id_claim, run_id_compare, run_id_compare_claim, run_id_read),
    "chunk_id": (chunk_id_claim, chunk_id_compare, chunk_id_compare_claim, chunk_id_read),
    "generation": (generation_bump, generation_read),
    "agreed_scale": (agreed_scale_claim, agreed_scale_compare, agreed_scale_read),
    "member": (member_join,),
    "progress": (progress_claim, progress_add, progress_check, progress_helper),
    "contributors": (contributors_claim, contributors_join, contributors_read),
    "max_exp": (max_exp_claim, max_exp_raise, max_exp_read),
    "helper_id": (helper_id_write, helper_id_read),
}


def registry() -> dict[str, dict[str, object]]:
    """register -> {RegisterAction name: function}, for every register of the program."""
    found = {reg: {fn.__name__: fn for fn in fns} for reg, fns in AGGREGATOR.items()}
    for i in range(HALF):
        found[f"lanes_{i:02d}"] = {f"lanes_{i:02d}_{kind}": make(i) for kind, make in (
            ("store", lanes_store), ("add", lanes_add), ("read_lo", lanes_read_lo),
            ("read_hi", lanes_read_hi))}
    return found
