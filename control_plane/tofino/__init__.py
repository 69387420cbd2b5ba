"""The BF Runtime backend of the controller, for the TNA program on Tofino (docs/tofino.md).

It offers the P4Runtime controller's API (``control_plane.switch_controller``'s
``SwitchController``) and plans with the same code; what differs is how the switch is reached:
BF Runtime for tables, multicast groups (``$pre``), ports (``$PORT``), registers and counters.
The TNA program's tables have the v1model program's names, so the table controls are shared
(``names.py`` translates); ``controls/`` holds the controls that have no table twin: the
aggregator's registers, the packet counters and the TNA program's loop ports.
"""
