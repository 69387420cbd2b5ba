/* Executor test program: unsigned wrap-around, signed arithmetic, saturating operations, casts,
 * shifts by runtime amounts, slices, concatenation, the conditional operator, rotation,
 * comparisons of signed values. Results go into an output header. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }

header in_t {
    bit<8>  a;
    bit<8>  b;
    int<8>  sa;
    int<8>  sb;
    bit<16> w;
    bit<32> x;
    bit<32> y;
    bit<4>  n1;
    bit<4>  n2;
}

header out_t {
    bit<8>  add;
    bit<8>  sub;
    bit<8>  mul;
    bit<8>  sat_add;
    bit<8>  sat_sub;
    int<8>  sadd;
    int<8>  ssub;
    int<8>  ssat_add;
    int<8>  ssat_sub;
    int<16> sext;
    bit<8>  shl;
    bit<8>  shr;
    int<8>  sshr;
    bit<8>  neg;
    bit<8>  inv;
    bit<8>  and_;
    bit<8>  or_;
    bit<8>  xor_;
    bit<16> concat;
    bit<4>  slice_hi;
    bit<4>  slice_lo;
    bit<8>  trunc;
    bit<32> widen;
    bit<8>  cmp;
    bit<8>  cond;
    bit<32> rot;
    bit<32> mix;
    bit<8>  logic;
    bit<16> wide_add;
    bit<8>  to_unsigned;
    bit<48> mul48;
}

struct headers_t { ethernet_t ethernet; in_t inp; out_t outp; }
struct metadata_t { bit<8> unused; }

parser ParserImpl(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        pkt.extract(hdr.inp);
        transition accept;
    }
}

control NoVerify(inout headers_t hdr, inout metadata_t meta) { apply { } }

control IngressImpl(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    apply {
        hdr.outp.setValid();
        hdr.outp.add = hdr.inp.a + hdr.inp.b;
        hdr.outp.sub = hdr.inp.a - hdr.inp.b;
        hdr.outp.mul = hdr.inp.a * hdr.inp.b;
        hdr.outp.sat_add = hdr.inp.a |+| hdr.inp.b;
        hdr.outp.sat_sub = hdr.inp.a |-| hdr.inp.b;
        hdr.outp.sadd = hdr.inp.sa + hdr.inp.sb;
        hdr.outp.ssub = hdr.inp.sa - hdr.inp.sb;
        hdr.outp.ssat_add = hdr.inp.sa |+| hdr.inp.sb;
        hdr.outp.ssat_sub = hdr.inp.sa |-| hdr.inp.sb;
        hdr.outp.sext = (int<16>) hdr.inp.sa;
        hdr.outp.shl = hdr.inp.a << hdr.inp.n1;
        hdr.outp.shr = hdr.inp.a >> hdr.inp.n2;
        hdr.outp.sshr = hdr.inp.sa >> hdr.inp.n2;
        hdr.outp.neg = -hdr.inp.a;
        hdr.outp.inv = ~hdr.inp.a;
        hdr.outp.and_ = hdr.inp.a & hdr.inp.b;
        hdr.outp.or_ = hdr.inp.a | hdr.inp.b;
        hdr.outp.xor_ = hdr.inp.a ^ hdr.inp.b;
        hdr.outp.concat = hdr.inp.a ++ hdr.inp.b;
        hdr.outp.slice_hi = hdr.inp.a[7:4];
        hdr.outp.slice_lo = hdr.inp.b[3:0];
        hdr.outp.trunc = (bit<8>) hdr.inp.w;
        hdr.outp.widen = (bit<32>) hdr.inp.w + 32w0xFFFF0000;
        hdr.outp.cmp = (hdr.inp.sa < hdr.inp.sb ? 8w1 : 8w0)
                     | (hdr.inp.a < hdr.inp.b ? 8w2 : 8w0)
                     | ((int<8>) hdr.inp.a < hdr.inp.sb ? 8w4 : 8w0)
                     | (hdr.inp.sa >= 0 ? 8w8 : 8w0);
        hdr.outp.cond = hdr.inp.x > hdr.inp.y ? hdr.inp.a : hdr.inp.b;
        hdr.outp.rot = (hdr.inp.x << 4) | (hdr.inp.x >> 28);
        hdr.outp.mix = (hdr.inp.x & 0xF0F0F0F0) ^ hdr.inp.y;
        hdr.outp.logic = (bit<8>) (bit<1>) (hdr.inp.a == hdr.inp.b || hdr.inp.x != 0);
        hdr.outp.wide_add = hdr.inp.w + (bit<16>) hdr.inp.a;
        hdr.outp.to_unsigned = (bit<8>) hdr.inp.sa;
        hdr.outp.mul48 = (bit<48>) hdr.inp.x * (bit<48>) hdr.inp.y;
        sm.egress_spec = 1;
    }
}

control EgressImpl(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    apply { }
}

control NoCompute(inout headers_t hdr, inout metadata_t meta) { apply { } }

control DeparserImpl(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.inp);
        pkt.emit(hdr.outp);
    }
}

V1Switch(ParserImpl(), NoVerify(), IngressImpl(), EgressImpl(), NoCompute(), DeparserImpl()) main;
