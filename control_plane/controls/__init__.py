"""One class per P4 control with tables, registers or counters (p4src/*.p4), as in SwitchML's
controller: each knows its control's names and builds or decodes exactly its entries."""
