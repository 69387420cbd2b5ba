"""The SA-ATP wire format, shared by the hosts (host_lib), the controller (control_plane), the
tools and the tests: protocol constants mirrored from the P4 program (``constants``), the frame
codec (``codec``) and a scapy layer for captures (``scapy_layer``). docs/protocol.md is the
contract; nothing here depends on the rest of the project."""
