"""Retransmission timeout from measured round trips (RFC 6298): smoothed RTT and variance,
Karn's rule (callers sample only packets sent once), and exponential backoff per packet.

A result arrives only once every worker has contributed, so its round trip also contains the
wait for the slowest peer. Feeding such waits into the estimator would let the timeout grow with
every loss a peer suffers, and slow the recovery from the next; samples are therefore clipped to
twice the current smoothed RTT.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RtoEstimator:
    initial: float = 0.05
    minimum: float = 0.01
    maximum: float = 1.0
    srtt: float | None = None
    rttvar: float = 0.0

    def sample(self, rtt: float) -> None:
        if self.srtt is None:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            rtt = min(rtt, 2 * self.srtt)
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt

    @property
    def rto(self) -> float:
        if self.srtt is None:
            return self.initial
        return min(self.maximum, max(self.minimum, self.srtt + 4 * self.rttvar))

    def backoff(self, retries: int) -> float:
        """Timeout for a packet already retransmitted ``retries`` times."""
        return min(self.maximum, self.rto * (1 << min(retries, 16)))
