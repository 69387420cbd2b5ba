"""PACKET_MMAP rings on an AF_PACKET socket: frames in and out through memory shared with the
kernel, with no system call per frame (``Documentation/networking/packet_mmap.rst``).

Receiving uses a TPACKET_V3 ring: the kernel fills blocks of frames and hands over a whole block at
once (when it is full, or after ``retire_ms``); we read every frame of it and give the block back.
Sending uses a transmit ring of fixed slots: we write frames into free slots, mark them, and one
``send`` asks the kernel to transmit everything marked (every ``send`` on a socket with a transmit
ring does that, whatever data it is given: frames too long for a slot leave through a second,
ring-less socket). Frames the socket sees leaving (our own) are skipped. :func:`open_ring` returns
None where the kernel refuses a ring, so a caller falls back to one call per frame.
"""

from __future__ import annotations

import logging
import mmap
import socket
import struct
import threading

log = logging.getLogger(__name__)

SOL_PACKET = 263
PACKET_RX_RING = 5
PACKET_VERSION = 10
PACKET_TX_RING = 13
TPACKET_V3 = 2
TP_STATUS_KERNEL = 0
TP_STATUS_USER = 1
TP_STATUS_SEND_REQUEST = 1
TP_STATUS_WRONG_FORMAT = 4
PACKET_OUTGOING = 4

_REQ3 = struct.Struct("=7I")  # block size, block count, frame size, frame count, retire, priv, feat
_BLOCK_STATUS = 8  # tpacket_block_desc: version, offset_to_priv, then hdr_v1: status, num, first
_BLOCK = struct.Struct("=III")
# tpacket3_hdr: next_offset, sec, nsec, snaplen, len, status, mac, net, rxhash, vlan_tci, vlan_tpid
_HDR3 = struct.Struct("=IIIIIIHHIIH")
_PKTTYPE = 58  # sockaddr_ll.sll_pkttype, after the 48-byte aligned tpacket3_hdr
_TX_DATA = 48  # where a transmit slot's frame starts (TPACKET3_HDRLEN - sizeof(sockaddr_ll))
_U32 = struct.Struct("=I")
_TX_HDR = struct.Struct("=IIIIII")  # next_offset, sec, nsec, snaplen, len, status


class PacketRing:
    """A receive ring of ``rx_blocks`` blocks and a transmit ring of ``tx_slots`` slots of
    ``tx_slot`` bytes, mapped together."""

    def __init__(self, sock: socket.socket, rx_blocks: int = 32, block_size: int = 1 << 17,
                 tx_slots: int = 256, tx_slot: int = 2048, retire_ms: int = 1):
        self.sock = sock
        self.block_size, self.rx_blocks = block_size, rx_blocks
        self.tx_slot, self.tx_slots = tx_slot, tx_slots
        sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V3)
        frame = 2048  # V3 packs variable-size frames; the count only has to be consistent
        sock.setsockopt(SOL_PACKET, PACKET_RX_RING, _REQ3.pack(
            block_size, rx_blocks, frame, rx_blocks * block_size // frame, retire_ms, 0, 0))
        tx_block = max(tx_slot, mmap.PAGESIZE)
        tx_blocks = tx_slots * tx_slot // tx_block
        sock.setsockopt(SOL_PACKET, PACKET_TX_RING, _REQ3.pack(
            tx_block, tx_blocks, tx_slot, tx_slots, 0, 0, 0))
        self._tx_base = rx_blocks * block_size
        self.map = mmap.mmap(sock.fileno(), self._tx_base + tx_blocks * tx_block,
                             mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.view = memoryview(self.map)
        self._block = 0  # the receive block being read
        self._left = 0  # its frames not read yet
        self._offset = 0  # where the next one is
        self._tx = 0  # the next transmit slot
        self._tx_lock = threading.Lock()  # senders may be several threads
        self.tx_dropped = 0  # frames that found the transmit ring full
        self._long = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)  # sends, never receives
        self._long.bind((sock.getsockname()[0], 0))

    # -- receiving ---------------------------------------------------------------------------

    def recv(self, limit: int) -> list[tuple[bytes, int, int, int]]:
        """Up to ``limit`` received frames, each (frame, tp_status, vlan_tci, vlan_tpid). A call
        that returns ``limit`` frames may leave more in the ring where poll does not see
        them: call again until one returns fewer."""
        out = []
        view = self.view
        while len(out) < limit:
            if not self._left:
                base = self._block * self.block_size
                status, count, first = _BLOCK.unpack_from(view, base + _BLOCK_STATUS)
                if not status & TP_STATUS_USER:
                    break
                self._left, self._offset = count, base + first
                if not count:
                    self._release()
                    continue
            at = self._offset
            (step, _sec, _nsec, snaplen, _len, status, mac, _net, _hash, tci,
             tpid) = _HDR3.unpack_from(view, at)
            if view[at + _PKTTYPE] != PACKET_OUTGOING:
                out.append((self.map[at + mac:at + mac + snaplen], status, tci, tpid))
            self._offset += step
            self._left -= 1
            if not self._left:
                self._release()
        return out

    def _release(self) -> None:
        _U32.pack_into(self.view, self._block * self.block_size + _BLOCK_STATUS,
                       TP_STATUS_KERNEL)
        self._block = (self._block + 1) % self.rx_blocks

    # -- sending -----------------------------------------------------------------------------

    def send(self, frames) -> int:
        """Queue the frames (bytes-like) in free slots and have the kernel send them; returns
        how many went. A frame longer than a slot goes by a plain ``send``; frames that find
        the ring full are dropped and counted (loss, as a full socket buffer would be)."""
        with self._tx_lock:
            return self._send(frames)

    def _send(self, frames) -> int:
        sent = 0
        for frame in frames:
            size = len(frame)
            if size > self.tx_slot - _TX_DATA:
                self._kick()
                self._long.send(frame)
                sent += 1
                continue
            slot = self._tx_base + self._tx * self.tx_slot
            if _U32.unpack_from(self.view, slot + 20)[0] not in (0, TP_STATUS_WRONG_FORMAT):
                self._kick()  # the kernel has not sent this slot yet: push, look once more
                if _U32.unpack_from(self.view, slot + 20)[0] not in (0, TP_STATUS_WRONG_FORMAT):
                    self.tx_dropped += 1
                    continue
            self.view[slot + _TX_DATA:slot + _TX_DATA + size] = frame
            _TX_HDR.pack_into(self.view, slot, 0, 0, 0, size, size, TP_STATUS_SEND_REQUEST)
            self._tx = (self._tx + 1) % self.tx_slots
            sent += 1
        self._kick()
        return sent

    def _kick(self) -> None:
        try:
            self.sock.send(b"", socket.MSG_DONTWAIT)
        except BlockingIOError:
            pass

    def close(self) -> None:
        self.view.release()
        self.map.close()
        self._long.close()


def open_ring(sock: socket.socket, **options) -> PacketRing | None:
    """Rings on ``sock``, or None where the kernel does not offer them (then the caller uses
    one call per frame)."""
    try:
        return PacketRing(sock, **options)
    except OSError as exc:
        log.info("no PACKET_MMAP rings on this socket (%s): one call per frame", exc)
        for ring in (PACKET_RX_RING, PACKET_TX_RING):  # undo what was set: no rings, V1
            try:
                sock.setsockopt(SOL_PACKET, ring, _REQ3.pack(0, 0, 0, 0, 0, 0, 0))
            except OSError:
                pass
        sock.setsockopt(SOL_PACKET, PACKET_VERSION, 0)
        return None
