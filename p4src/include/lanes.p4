/* The K = 64 value lanes of an SA-ATP packet, as an X-macro: LANES(F) expands F(00) ... F(63),
 * so every per-lane declaration and register action below is written once. */
#ifndef SA_ATP_LANES_P4
#define SA_ATP_LANES_P4

#define LANES(F) \
    F(00) F(01) F(02) F(03) F(04) F(05) F(06) F(07) \
    F(08) F(09) F(10) F(11) F(12) F(13) F(14) F(15) \
    F(16) F(17) F(18) F(19) F(20) F(21) F(22) F(23) \
    F(24) F(25) F(26) F(27) F(28) F(29) F(30) F(31) \
    F(32) F(33) F(34) F(35) F(36) F(37) F(38) F(39) \
    F(40) F(41) F(42) F(43) F(44) F(45) F(46) F(47) \
    F(48) F(49) F(50) F(51) F(52) F(53) F(54) F(55) \
    F(56) F(57) F(58) F(59) F(60) F(61) F(62) F(63)

#endif
