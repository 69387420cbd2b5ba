"""control DropSimulator (p4src/drop_simulator.p4), instantiated at ingress and at egress:
table ``loss`` (per-port drop probability, with a default for every other port)."""

from __future__ import annotations

from control_plane.entries import TableEntry


def loss_threshold(probability: float) -> int:
    """The 32-bit threshold for a drop probability (random < threshold drops)."""
    if not 0.0 <= probability <= 1.0:
        raise ValueError(f"drop probability must be in [0, 1], got {probability}")
    return min(round(probability * 2**32), 2**32 - 1)


class DropSimulator:
    def __init__(self, path: str):
        self.table = f"{path}.loss"
        self.set_loss = f"{path}.set_loss"

    @property
    def tables(self) -> tuple[str, ...]:
        return (self.table,)

    def entries(self, default: float, per_port: dict[int, float]) -> list[TableEntry]:
        out = [TableEntry.default(self.table, self.set_loss,
                                  {"loss_threshold": loss_threshold(default)})]
        out += [TableEntry.make(self.table, {"port": port}, self.set_loss,
                                {"loss_threshold": loss_threshold(p)})
                for port, p in sorted(per_port.items())]
        return out
