"""Tests of the software switch.  Shared helpers, one module per concern: programs (the compiled
test programs), frames (frames for them), p4info (their P4Runtime ids by name), differential (the
harness that runs a program on the software switch and on bmv2), p4runtime_client (a bare
P4Runtime client and the checks of PI's answers; the server and client fixtures in conftest)."""
