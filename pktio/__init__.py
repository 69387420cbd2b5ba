"""Batched packet I/O on Linux sockets, shared by the host library and the embedded switch.

* :mod:`pktio.udp`: equal-size UDP datagrams in batches, with UDP segmentation offload and UDP
  GRO where the kernel has them, else ``sendmmsg``/``recvmmsg``, else one call per datagram;
* :mod:`pktio.native`: the same batches (and ``poll``, the monotonic clock) from numba's
  compiled code, holding no GIL: the host's compiled round loop runs on it;
* :mod:`pktio.mmsg`: the ``sendmmsg``/``recvmmsg`` calls through ctypes;
* :mod:`pktio.reuseport`: a group of sockets on one port, the kernel steering each datagram to
  one by a field of it (the shards of a worker, of the benchmark's reflector);
* :mod:`pktio.ring`: PACKET_MMAP rings (TPACKET_V3) for AF_PACKET sockets;
* :mod:`pktio.xdp`: AF_XDP sockets, and the XDP program that hands them one UDP port's frames.
"""
