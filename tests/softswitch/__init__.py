"""Tests of the software switch.  Shared helpers, one module per concern: programs (the compiled
test programs), frames (frames for them), p4info (their P4Runtime ids by name), differential (the
harness that runs a program on the software switch and on bmv2)."""
