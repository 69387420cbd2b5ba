"""P4Runtime server for the software switch (the role of PI inside simple_switch_grpc)."""

from .device import DeviceManager
from .pipeline import P4RuntimeError
from .requests import pipeline_request, programmed_device, write_request
from .server import P4RuntimeServer

__all__ = ["P4RuntimeServer", "DeviceManager", "P4RuntimeError", "pipeline_request",
           "programmed_device", "write_request"]
