/* Packet and drop counters per job index (docs/protocol.md §8). Instantiated at ingress
 * (received ops) and at egress (sent ops); the pipeline drops a packet with a drop reason right
 * after counting it. */
#ifndef SA_ATP_PACKET_STATS_P4
#define SA_ATP_PACKET_STATS_P4

control PacketStats(in bit<8> job_index, in bit<4> op, in bit<4> drop_reason) {
    counter(STATS_SIZE, CounterType.packets_and_bytes) packets;   /* [job_index * 16 + op] */
    counter(STATS_SIZE, CounterType.packets_and_bytes) drops;     /* [job_index * 16 + reason] */

    apply {
        packets.count((bit<32>)(job_index ++ op));
        if (drop_reason != DROP_NONE) {
            drops.count((bit<32>)(job_index ++ drop_reason));
        }
    }
}

#endif
