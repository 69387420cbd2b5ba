"""The TNA program's controls whose state is not a table the v1model program shares: registers,
counters and the loop ports, as BF Runtime reaches them (one class per P4 control)."""
