# SA-ATP developer entry points. Every target that runs Python sets up .venv first.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup run test p4 tofino p4-check bench harness sim lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

## The main job on the embedded software switch (no root, no bmv2).
run: $(STAMP)
	$(PY) -m examples.main_job

## The test suite (bmv2 and Mininet tests skip cleanly where those are absent), TEST_WORKERS
## tests at a time (pytest-xdist), a file's tests in one worker: the Mininet tests share the
## host's network, and a module's one expensive fixture (a cluster run, a simulation) serves
## all of its tests.
TEST_WORKERS ?= 2
test: $(STAMP) p4-check
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

## Recompile the P4 program (needs p4c-bm2-ss on PATH) and refresh its source stamp.
p4: $(STAMP)
	$(PY) tools/p4_artifacts.py compile

## Recompile the TNA program (needs the open Tofino compiler, p4c with its Tofino backend, on
## PATH; TOFINO_P4C names another driver) and refresh its stamp (docs/tofino.md).
tofino: $(STAMP)
	$(PY) tools/p4_artifacts.py compile sa_atp_tna

## Fail when the P4 sources changed but the committed compiled artifacts did not.
p4-check: $(STAMP)
	$(PY) tools/p4_artifacts.py check

bench: $(STAMP)
	$(PY) -m bench

## Every aggregation method and straggler policy in one scenario matrix (docs/policies.md);
## `make harness ARGS=--quick` for a smaller one.
harness: $(STAMP)
	$(PY) -m experiments.harness $(ARGS)

## Cluster-scale simulation of every method (docs/simulation.md): the testbed calibration and
## the scale studies into docs/results/sim; `make sim ARGS=--quick` for CI's smaller run.
sim: $(STAMP)
	$(PY) -m sim $(ARGS)

lint: $(STAMP)
	$(PY) -m ruff check .

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache .hypothesis
