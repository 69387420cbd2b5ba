"""The protocol engine (docs/protocol.md §4, §5, §7): numpy and numba, no PyTorch. A call's
chunks as a :class:`~host_lib.engine.rounds.Round`, pushed through the switch by the
:class:`~host_lib.engine.transport.Transport`, with slot takeover
(:class:`~host_lib.engine.takeover.Takeover`), the block quantizer, the frame filter, the
retransmission timer, run identities and the links to the switch."""
