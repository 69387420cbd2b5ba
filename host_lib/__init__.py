"""SA-ATP host library: wire codec, quantization, the streaming aggregation transport, straggler
handling and the PyTorch integration (docs/protocol.md is the wire contract)."""
