"""Batched packet I/O on Linux sockets, shared by the host library and the embedded switch.

* :mod:`pktio.udp`: equal-size UDP datagrams in batches, with UDP segmentation offload and UDP
  GRO where the kernel has them, else ``sendmmsg``/``recvmmsg``, else one call per datagram;
* :mod:`pktio.mmsg`: the ``sendmmsg``/``recvmmsg`` calls through ctypes;
* :mod:`pktio.ring`: PACKET_MMAP rings (TPACKET_V3) for AF_PACKET sockets.
"""
