"""The harness's emulated host links (experiments/emulated_link.py): the floor each method's
communication is held to, and the wire times the scenarios derive from the profiles."""

import json
import time

import pytest

from experiments.emulated_link import EmulatedLink
from experiments.harness import SCENARIOS
from experiments.launch import run_training
from experiments.stragglers import PROFILES


def links(tmp_path, world, wire_s=0.3, ring=False):
    board = tmp_path / "starts.bin"
    EmulatedLink.create_board(board, world)
    return [EmulatedLink(wire_s, world, r, ring, board) for r in range(world)]


def test_a_ring_moves_2_n_minus_1_over_n_gradients_and_the_switch_one(tmp_path):
    assert links(tmp_path, 4, 0.1)[0].floor_s == pytest.approx(0.1)
    assert links(tmp_path, 4, 0.1, ring=True)[0].floor_s == pytest.approx(0.15)
    assert links(tmp_path, 2, 0.1, ring=True)[0].floor_s == pytest.approx(0.1)


def test_the_anchor_is_the_start_of_the_last_contribution_the_aggregate_needs(tmp_path):
    ls = links(tmp_path, 4)
    starts = []
    for link in ls[:3]:  # rank 3 has not started iteration 7; it did start iteration 6
        starts.append(link.start(7))
        time.sleep(0.002)
    ls[3].start(6)
    ls[3].start(7, contributes=False)  # it sits iteration 7 out: nothing the aggregate needs
    everyone, mine = 0b1111, starts[0]
    # rank 3 is needed and unknown: our own start
    assert ls[0].anchor(7, mine, everyone, 0) == mine
    # without rank 3 (it sits out): the latest of the others
    assert ls[0].anchor(7, mine, 0b0111, 0) == max(starts)
    # a fan-in of 2: the second earliest; of 3 out of all four: the third
    assert ls[1].anchor(7, starts[1], everyone, 2) == sorted(starts)[1]
    assert ls[1].anchor(7, starts[1], everyone, 3) == sorted(starts)[2]
    # the board keeps 64 iterations: iteration 71 reuses 7's row and knows none of it
    assert ls[2].anchor(71, 123.0, 0b0111, 0) == 123.0


def test_finish_holds_communication_to_the_floor_from_the_anchor(tmp_path):
    ls = links(tmp_path, 2, wire_s=0.3, ring=True)  # floor 0.3 s for two workers
    first = ls[0].start(0)
    last = ls[1].start(0)
    waited = ls[0].finish(0, first, 0b11, 0)   # (it waits less the later it is called)
    assert waited <= 0.3 and time.perf_counter() >= last + 0.3
    # a communication that really took longer than the floor waits for nothing
    assert ls[1].finish(0, last, 0b11, 0) == 0.0
    # and without emulation there is no floor and no board
    assert EmulatedLink(0.0, 2, 0, True, None).finish(0, first, 0b11, 0) == 0.0


def test_bad_links_are_refused():
    with pytest.raises(ValueError, match=">= 0"):
        EmulatedLink(-1.0, 2, 0, False, None)
    with pytest.raises(ValueError, match="board"):
        EmulatedLink(0.1, 2, 0, False, None)


def test_scenario_wire_times_scale_each_models_gradient_to_the_emulated_compute():
    models = json.loads(PROFILES.read_text())["models"]

    def step(model, b):  # the profile's fit, t(b) = a b + c
        return models[model]["fit_a_s_per_sample"] * b + models[model]["fit_c_s"]

    # ResNet-50's own gradient at 100 Gb/s: 102 MB in 8.2 ms
    assert SCENARIOS["none"].wire_ms(PROFILES, "resnet50", 64, 100) == pytest.approx(
        models["resnet50"]["grad_bytes_fp32"] * 8 / 100e9 * 1e3)
    assert SCENARIOS["none"].wire_ms(PROFILES, "resnet50", 64, 100) == pytest.approx(8.18, 0.01)
    # VGG-16's comm/compute ratio (44 ms / 31 ms) applied to the ResNet-50 step
    vgg = models["vgg16"]["grad_bytes_fp32"] * 8 / 100e9 / step("vgg16", 64)
    assert SCENARIOS["comm-heavy"].wire_ms(PROFILES, "resnet50", 64, 100) == pytest.approx(
        1e3 * vgg * step("resnet50", 64))
    assert 1.35 < vgg < 1.45
    assert SCENARIOS["comm-heavy"].wire_ms(PROFILES, "resnet50", 64, 0) == 0.0


@pytest.mark.parametrize("comm,floor", [("gloo", 1.5), ("switch", 1.0)])
def test_every_iterations_communication_lasts_at_least_the_links_wire_time(tmp_path, comm,
                                                                            floor):
    """Four workers, worker 3 2x slower: every rank's communication of every iteration lasts
    at least the floor (1.5 wire times for gloo's ring, one for the switch): it is counted
    from the last worker's start, which is never before the rank's own."""
    wire_ms = 60.0
    run_training(tmp_path, 4, comm, ["--iterations", "6", "--global-batch", "64",
                                     "--stragglers", "2x@3", "--wire-ms", str(wire_ms),
                                     "--no-progress", "--eval-every", "100"])
    for rank in range(4):
        rows = [json.loads(line) for line in open(tmp_path / f"rank{rank}.jsonl")]
        assert len(rows) == 6
        assert min(r["comm_s"] for r in rows) >= floor * wire_ms / 1e3
