"""Synthetic timing traces for driving straggler policies without training: worker w takes
``slowdown(it, w) * (a b + c)`` seconds for b samples (the H100 ResNet-50 fit), and every
iteration costs a fixed communication time on top of its slowest contributor. Used by the
policies' decision tests and by their end-to-end tests through the switch."""

from __future__ import annotations

import numpy as np

from host_lib.scheduling.policies.base import StepHistory

A, C = 0.000367, 0.0104  # seconds per sample and per step
COMM = 0.010  # seconds of communication per iteration
N, B = 4, 256


def step_time(slowdown: float, samples, rng=None, jitter: float = 0.0) -> np.ndarray:
    b = np.asarray(samples, np.float64)
    t = slowdown * (A * b + C)
    if jitter:
        t = t * np.exp(rng.normal(0, jitter, t.shape))
    return np.where(b > 0, t, 0.0)


def run_synchronous(policy, slowdown, iterations: int, jitter: float = 0.0, seed: int = 0):
    """Drive a policy whose workers compute and deliver in the same iteration; returns the
    plans and each iteration's length (the slowest contributor, plus communication)."""
    rng = np.random.default_rng(seed)
    history, plans, lengths = StepHistory(N), [], []
    previous_comm = None
    for it in range(iterations):
        plan = policy.plan(it, history)
        factors = np.array([slowdown(it, w) for w in range(N)])
        times = step_time(factors, plan.shares, rng, jitter)
        history.add(times, plan.shares)
        if previous_comm is not None:  # the exchange learns it one iteration late
            history.add_comm(previous_comm)
        length = times.max() + COMM
        previous_comm = length - times
        plans.append(plan)
        lengths.append(length)
    return plans, np.array(lengths)


def run_delayed(policy, slowdown, iterations: int):
    """Drive a policy whose gradients may take several iterations (Partial-Reduce): a worker
    starts a gradient when its share is non-zero and delivers it when it contributes; the
    iteration lasts until its last member's gradient is ready, plus communication."""
    history, plans, lengths = StepHistory(N), [], []
    now, ready, started, samples = 0.0, [None] * N, [None] * N, [0] * N
    previous_comm = None
    for it in range(iterations):
        plan = policy.plan(it, history)
        for w, share in enumerate(plan.shares):
            if share:
                assert ready[w] is None, f"worker {w} started a gradient while busy"
                started[w], samples[w] = now, share
                ready[w] = now + float(step_time(slowdown(it, w), [share])[0])
        members = [w for w in range(N) if plan.contributes(w)]
        assert all(ready[w] is not None for w in members), "a member has no gradient"
        end = max([now] + [ready[w] for w in members])
        times = [ready[w] - started[w] if w in members else 0.0 for w in range(N)]
        history.add(times, [samples[w] if w in members else 0 for w in range(N)])
        if previous_comm is not None:
            history.add_comm(previous_comm)
        length = end - now + COMM
        previous_comm = [now + length - (ready[w] if w in members else now) for w in range(N)]
        for w in members:
            ready[w] = None
        now += length
        plans.append(plan)
        lengths.append(length)
    return plans, np.array(lengths)


def straggler(factor: float, worker: int = 3, start: int = 0, stop: int = 10**9):
    return lambda it, w: factor if (w == worker and start <= it < stop) else 1.0
