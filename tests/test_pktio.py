"""pktio.udp against plain socket calls on loopback: every send mode delivers the same datagrams
as one ``sendto`` per datagram would, every receive mode returns them with the same bytes,
lengths and sources, whatever the sender did (segmented trains, single datagrams, odd sizes)."""

from __future__ import annotations

import errno
import socket

import numpy as np
import pytest

from pktio import mmsg
from pktio.udp import MODES, UdpBatch, address, best_mode

AVAILABLE = [m for m in MODES if m != "offload" or best_mode(socket.socket(
    socket.AF_INET, socket.SOCK_DGRAM)) == "offload"]
AVAILABLE = [m for m in AVAILABLE if m != "mmsg" or mmsg.available()]


def udp(cls=socket.socket) -> socket.socket:
    s = cls(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(("127.0.0.1", 0))
    s.setblocking(False)
    return s


def drain(io: UdpBatch, rows: np.ndarray, expect: int) -> tuple[list[bytes], list[tuple]]:
    """Every datagram waiting, as bytes (cut to the row), with its full length and source. A
    call that fills every row may leave datagrams behind: call again before waiting."""
    import select

    got, sources, full = [], [], False
    while len(got) < expect:
        if not full and not select.select([io.sock], [], [], 2.0)[0]:
            break
        n = io.recv(rows)
        full = n == len(rows)
        for i in range(n):
            length = int(io.lengths[i])
            got.append((rows[i, :min(length, rows.shape[1])].tobytes(), length))
            sources.append(address(io.names[i]))
    return got, sources


def reference(rng, count: int, size: int) -> np.ndarray:
    """``count`` datagrams of ``size`` bytes as the strided rows of a wider array (as payloads
    inside whole frames are)."""
    wide = rng.integers(0, 256, (count, size + 42), dtype=np.uint8)
    return wide[:, 42:]


@pytest.mark.parametrize("send_mode", AVAILABLE)
@pytest.mark.parametrize("recv_mode", AVAILABLE)
def test_every_mode_delivers_what_plain_calls_deliver(send_mode, recv_mode):
    rng = np.random.default_rng(1)
    tx, rx = udp(), udp()
    sender, receiver = UdpBatch(tx, send_mode), UdpBatch(rx, recv_mode)
    trains = [reference(rng, 150, 278), reference(rng, 1, 100), reference(rng, 3, 278),
              reference(rng, 70, 64)]
    want = []
    for rows in trains:
        assert sender.send(rows, rx.getsockname()) == len(rows)
        want += [(row.tobytes(), len(row)) for row in rows]
    # A row narrower than the last datagrams: they are cut, their lengths stay whole.
    got, sources = drain(receiver, np.zeros((40, 279), np.uint8), len(want))
    assert got == want
    assert set(sources) == {tx.getsockname()}
    tx.close()
    rx.close()


@pytest.mark.parametrize("recv_mode", AVAILABLE)
def test_longer_datagrams_are_cut_to_the_row_with_their_full_length(recv_mode):
    tx, rx = udp(), udp()
    receiver = UdpBatch(rx, recv_mode)
    tx.sendto(bytes(range(200)), rx.getsockname())
    got, _ = drain(receiver, np.zeros((4, 50), np.uint8), 1)
    assert got == [(bytes(range(50)), 200)]
    tx.close()
    rx.close()


def test_a_train_longer_than_the_rows_is_handed_out_over_several_calls():
    if "offload" not in AVAILABLE:
        pytest.skip("the kernel has no UDP segmentation offload")
    tx, rx = udp(), udp()
    sender, receiver = UdpBatch(tx, "offload"), UdpBatch(rx, "offload")
    rows = reference(np.random.default_rng(2), 64, 300)
    sender.send(rows, rx.getsockname())
    got, _ = drain(receiver, np.zeros((7, 300), np.uint8), 64)
    assert [g for g, _ in got] == [row.tobytes() for row in rows]
    tx.close()
    rx.close()


class _NoChecksumOffload(socket.socket):
    """A socket whose device refuses segmented sends, as one without checksum offload does."""

    def sendmsg(self, *args):
        raise OSError(errno.EIO, "Input/output error")


def test_a_device_that_refuses_segmentation_falls_back_to_mmsg():
    if "offload" not in AVAILABLE:
        pytest.skip("the kernel has no UDP segmentation offload")
    tx, rx = udp(_NoChecksumOffload), udp()
    sender, receiver = UdpBatch(tx, "offload"), UdpBatch(rx, "plain")
    rows = reference(np.random.default_rng(3), 100, 278)
    assert sender.send(rows, rx.getsockname()) == 100
    assert sender.send_mode == ("mmsg" if mmsg.available() else "plain")
    got, _ = drain(receiver, np.zeros((256, 300), np.uint8), 100)
    assert [g for g, _ in got] == [row.tobytes() for row in rows]
    tx.close()
    rx.close()


def test_connected_sockets_send_to_their_peer():
    tx, rx = udp(), udp()
    tx.connect(rx.getsockname())
    for mode in AVAILABLE:
        rows = reference(np.random.default_rng(4), 5, 278)
        assert UdpBatch(tx, mode).send(rows) == 5
        got, _ = drain(UdpBatch(rx, "plain"), np.zeros((8, 300), np.uint8), 5)
        assert [g for g, _ in got] == [row.tobytes() for row in rows]
    tx.close()
    rx.close()


# -- pktio.native: the same batches from compiled code ------------------------------------------

def test_copy_bytes_copies_what_slicing_copies():
    from pktio.native import copy_bytes

    rng = np.random.default_rng(5)
    for _ in range(200):
        src = rng.integers(0, 256, 700, dtype=np.uint8)
        dst = rng.integers(0, 256, 700, dtype=np.uint8)
        n = int(rng.integers(0, 300))
        a, b = int(rng.integers(0, 700 - n + 1)), int(rng.integers(0, 700 - n + 1))
        want = dst.copy()
        want[a:a + n] = src[b:b + n]
        copy_bytes(dst, a, src, b, n)
        assert (dst == want).all()
    # strided views (a column of a 2-D array) are copied too, element by element
    wide = rng.integers(0, 256, (40, 3), dtype=np.uint8)
    column = np.zeros(40, np.uint8)
    copy_bytes(column, 0, wide[:, 1], 0, 40)
    assert (column == wide[:, 1]).all()


def test_native_trains_arrive_whole_and_an_older_kernels_limit_is_learnt():
    """A train of 128 segments where the kernel takes it (fewer system calls); where it refuses
    the train (here: 129 segments, which every kernel refuses), the socket falls back to 64 and
    loses nothing."""
    if "offload" not in AVAILABLE:
        pytest.skip("the kernel has no UDP segmentation offload")
    from pktio import native

    rows = reference(np.random.default_rng(6), 300, 324)
    for limit in (native._LONG_TRAIN, native._LONG_TRAIN + 1):
        tx, rx = udp(), udp()
        sender = native.NativeSocket(tx, 324, dest=rx.getsockname())
        sender.io.state[native._MAX_TRAIN] = limit
        assert sender.send(np.ascontiguousarray(rows)) == len(rows)
        got, _ = drain(UdpBatch(rx, "plain"), np.zeros((512, 400), np.uint8), len(rows))
        assert [g for g, _ in got] == [row.tobytes() for row in rows]
        if limit > native._LONG_TRAIN:
            assert sender.io.state[native._MAX_TRAIN] == native.MAX_SEGMENTS
        tx.close()
        rx.close()
