"""The protocol engine (docs/protocol.md §4, §5, §7): numpy and numba, no PyTorch. A call's
chunks as a :class:`~host_lib.engine.rounds.Round`, its frames written with the block quantizer
(:mod:`~host_lib.engine.frames`) into buffers reused from call to call
(:mod:`~host_lib.engine.buffers`), split over the worker's shards
(:mod:`~host_lib.engine.shards`), each pushed through the switch by a
:class:`~host_lib.engine.transport.Transport` (its common case compiled,
:mod:`~host_lib.engine.round_loop`), with slot takeover
(:class:`~host_lib.engine.takeover.Takeover`), the frame filter, the retransmission timer, run
identities and the links to the switch."""
