"""Retransmission timeout from measured round trips (RFC 6298): smoothed RTT and variance,
Karn's rule (callers sample only packets sent once), and exponential backoff per packet.

A result arrives only once every worker has contributed, so its round trip also contains the
wait for the slowest peer. Feeding such waits into the estimator would let the timeout grow with
every loss a peer suffers, and slow the recovery from the next; samples are therefore clipped to
twice the current smoothed RTT.

The estimator's state is one small array, so that the compiled round loop
(``host_lib/engine/round_loop.py``) samples and reads it with the same functions
(:func:`sample`, :func:`timeout`) as Python does through :class:`RtoEstimator`.
"""

from __future__ import annotations

import math

import numba
import numpy as np

_INITIAL, _MINIMUM, _MAXIMUM, _SRTT, _RTTVAR = range(5)


@numba.njit(cache=True, nogil=True)
def sample(state, rtt):
    """One round-trip sample into the estimator ``state``."""
    if math.isnan(state[_SRTT]):
        state[_SRTT], state[_RTTVAR] = rtt, rtt / 2
    else:
        rtt = min(rtt, 2 * state[_SRTT])
        state[_RTTVAR] = 0.75 * state[_RTTVAR] + 0.25 * abs(state[_SRTT] - rtt)
        state[_SRTT] = 0.875 * state[_SRTT] + 0.125 * rtt


@numba.njit(cache=True, nogil=True)
def timeout(state):
    """The retransmission timeout of the estimator ``state``."""
    if math.isnan(state[_SRTT]):
        return state[_INITIAL]
    return min(state[_MAXIMUM], max(state[_MINIMUM], state[_SRTT] + 4 * state[_RTTVAR]))


class RtoEstimator:
    minimum = 0.01  # the defaults
    maximum = 1.0

    def __init__(self, initial: float = 0.05, minimum: float = minimum,
                 maximum: float = maximum):
        self.state = np.array([initial, minimum, maximum, np.nan, 0.0])

    @property
    def srtt(self) -> float | None:
        srtt = float(self.state[_SRTT])
        return None if math.isnan(srtt) else srtt

    @property
    def rttvar(self) -> float:
        return float(self.state[_RTTVAR])

    def sample(self, rtt: float) -> None:
        sample(self.state, rtt)

    @property
    def ceiling(self) -> float:
        """The longest a backed-off packet waits before it is sent again."""
        return float(self.state[_MAXIMUM])

    @property
    def rto(self) -> float:
        return timeout(self.state)

    def backoff(self, retries: int) -> float:
        """Timeout for a packet already retransmitted ``retries`` times."""
        return min(self.ceiling, self.rto * (1 << min(retries, 16)))
