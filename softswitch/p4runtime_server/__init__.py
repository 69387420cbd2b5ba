"""P4Runtime server for the software switch (the role of PI inside simple_switch_grpc)."""

from .device import DeviceManager
from .pipeline import P4RuntimeError
from .server import P4RuntimeServer

__all__ = ["P4RuntimeServer", "DeviceManager", "P4RuntimeError"]
