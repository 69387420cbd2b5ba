"""The codec against scapy (an independent implementation of the same layout) and against bad
input."""

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw, raw

from protocol import constants as P
from protocol.codec import (
    Endpoint,
    Frame,
    FrameBatch,
    Header,
    MalformedPacket,
    decode_frame,
    encode_frame,
    frames_from_bytes,
    frames_to_bytes,
    valid_mask,
)
from protocol.scapy_layer import SaAtp

macs = st.binary(min_size=6, max_size=6).map(lambda b: ":".join(f"{x:02x}" for x in b))
ips = st.integers(1, 2**32 - 2).map(lambda i: ".".join(str((i >> s) & 255) for s in (24, 16, 8, 0)))
ports = st.integers(1, 65535)
lanes_st = st.lists(st.integers(-(2**31), 2**31 - 1), min_size=P.LANES, max_size=P.LANES)
headers = st.builds(
    Header, op=st.sampled_from(list(P.Op)), job=st.integers(0, 0xFFFF),
    slot=st.integers(0, 0xFFFF), worker=st.integers(0, 255), chunk=st.integers(0, 2**32 - 1),
    flags=st.integers(0, P.KNOWN_FLAGS), reason=st.integers(0, 255),
    bitmap=st.integers(0, 2**32 - 1), count=st.integers(0, 255), fanin=st.integers(0, 255),
    scale=st.integers(0, 0xFFFF), exp=st.integers(0, 0xFFFF), run=st.integers(0, 2**32 - 1))


def scapy_frame(src: Endpoint, dst: Endpoint, h: Header, lanes) -> Ether:
    return (Ether(src=src.mac, dst=dst.mac) / IP(src=src.ip, dst=dst.ip, ttl=64, id=0, flags="DF")
            / UDP(sport=src.port, dport=dst.port, chksum=0)
            / SaAtp(version=h.version, op=h.op, flags=h.flags, job=h.job, slot=h.slot,
                    worker=h.worker, reason=h.reason, chunk=h.chunk, bitmap=h.bitmap,
                    count=h.count, fanin=h.fanin, scale=h.scale, exp=h.exp, run=h.run,
                    lanes=list(lanes)))


@settings(max_examples=200, deadline=None)
@given(macs, ips, macs, ips, ports, headers, lanes_st, st.booleans())
def test_codec_and_scapy_agree_field_by_field(smac, sip, dmac, dip, port, h, lanes, to_switch):
    # One side of every SA-ATP frame uses the SA-ATP port; the other is the worker's own.
    src = Endpoint(smac, sip, port if to_switch else P.UDP_PORT)
    dst = Endpoint(dmac, dip, P.UDP_PORT if to_switch else port)
    ours = encode_frame(Frame(src, dst, h, np.array(lanes, np.int32)))
    theirs = raw(scapy_frame(src, dst, h, lanes))
    assert ours == theirs

    dissected = Ether(ours)
    layer = dissected[SaAtp]
    for name in ("version", "op", "flags", "job", "slot", "worker", "reason", "chunk", "bitmap",
                 "count", "fanin", "scale", "exp", "run"):
        assert int(layer.getfieldval(name)) == getattr(h, name), name
    assert layer.lanes == lanes

    back = decode_frame(theirs)
    assert back.header == h and back.src == src and back.dst == dst
    assert back.lanes.tolist() == lanes


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 0xFFFF), st.integers(0, 2**32 - 1),
                          st.integers(0, 0xFFFF), st.integers(0, 0xFFFF), lanes_st),
                min_size=1, max_size=20))
def test_vectorised_batch_equals_scalar_frames(rows):
    src = Endpoint("02:00:00:00:00:07", "10.0.0.7")
    dst = Endpoint("02:00:00:00:aa:01", "10.0.0.254")
    slot, chunk, scale, exp, lanes = (list(col) for col in zip(*rows, strict=True))
    batch = FrameBatch(src, dst).encode(op=P.Op.DATA, job=9, worker=7, slot=slot, chunk=chunk,
                                        flags=P.Flag.SET, scale=scale, exp=exp,
                                        lanes=np.array(lanes, np.int32))
    scalar = b"".join(
        encode_frame(Frame(src, dst, Header(op=P.Op.DATA, job=9, worker=7, slot=s, chunk=c,
                                            flags=int(P.Flag.SET), scale=sc, exp=e),
                           np.array(ln, np.int32)))
        for s, c, sc, e, ln in rows)
    assert batch.tobytes() == scalar
    assert b"".join(frames_to_bytes(batch)) == scalar
    assert {len(f) for f in frames_to_bytes(batch)} == {P.FRAME_LEN}
    view = frames_from_bytes(scalar)
    assert valid_mask(view).all()
    assert view["chunk"].tolist() == chunk
    assert view["lanes"].astype(np.int64).tolist() == [list(ln) for ln in lanes]


def good_frame() -> bytes:
    return encode_frame(Frame(Endpoint("02:00:00:00:00:01", "10.0.0.1"),
                              Endpoint("02:00:00:00:00:02", "10.0.0.2"),
                              Header(op=P.Op.DATA, job=1, chunk=5)))


def patched(offset: int, value: bytes, fix_checksum: bool = True) -> bytes:
    buf = bytearray(good_frame())
    buf[offset:offset + len(value)] = value
    if fix_checksum:
        ip = bytes(buf[14:34])
        buf[24:26] = b"\0\0"
        words = struct.unpack("!10H", bytes(buf[14:34]))
        total = sum(words)
        total = (total & 0xFFFF) + (total >> 16)
        buf[24:26] = struct.pack("!H", ~total & 0xFFFF)
        assert ip[:10] == bytes(buf[14:24])
    return bytes(buf)


@pytest.mark.parametrize("length", [0, 13, 41, 42, 63, 67, 68, 100, P.FRAME_LEN - 1])
def test_truncated_frames_are_refused_with_their_length(length):
    with pytest.raises(MalformedPacket, match=f"{length} bytes"):
        decode_frame(good_frame()[:length])


@pytest.mark.parametrize("buf, message", [
    (patched(12, b"\x86\xdd"), "EtherType 0x86dd"),
    (patched(14, b"\x46"), "IHL"),
    (patched(23, b"\x06"), "protocol 6"),
    (patched(24, b"\x12\x34", fix_checksum=False), "IPv4 checksum 0x1234"),
    (patched(34, b"\x00\x35\x00\x35"), "neither is the SA-ATP port"),
    (patched(42, bytes([(P.VERSION - 1) << 4 | 1])), f"version {P.VERSION - 1}"),
    (patched(42, bytes([P.VERSION << 4 | 15])), "unknown SA-ATP op 15"),
    (patched(43, b"\x80"), "reserved SA-ATP flag"),
])
def test_malformed_frames_are_refused_naming_the_problem(buf, message):
    with pytest.raises(MalformedPacket, match=message):
        decode_frame(buf)


def test_valid_mask_flags_bad_frames_in_a_batch():
    bufs = [good_frame(), patched(42, bytes([(P.VERSION + 1) << 4 | 1])),
            patched(12, b"\x86\xdd"), good_frame(),
            patched(43, b"\x80")]
    assert valid_mask(frames_from_bytes(b"".join(bufs))).tolist() == [True, False, False, True,
                                                                        False]


def test_partial_frames_in_a_batch_buffer_are_refused():
    with pytest.raises(MalformedPacket, match="whole number"):
        frames_from_bytes(good_frame() + good_frame()[:100])


def test_out_of_range_header_fields_are_refused_when_encoding():
    with pytest.raises(ValueError, match="out of range"):
        Header(op=P.Op.DATA, job=70000).pack()


def test_scapy_dissects_a_non_sa_atp_udp_payload_as_raw():
    pkt = Ether(raw(Ether() / IP() / UDP(sport=1234, dport=53) / Raw(b"x" * 20)))
    assert SaAtp not in pkt
