/* Packet and drop counters per job index (docs/protocol.md §8), at ingress (what was received)
 * and at egress (what left). */
#ifndef SA_ATP_TNA_PACKET_STATS_P4
#define SA_ATP_TNA_PACKET_STATS_P4

control PacketStats(in bit<8> job_index, in bit<4> op, in bit<4> drop_reason)
                   (bool dropped_are_packets) {
    Counter<bit<64>, bit<12>>(STATS_SIZE, CounterType_t.PACKETS_AND_BYTES) packets;
    Counter<bit<64>, bit<12>>(STATS_SIZE, CounterType_t.PACKETS_AND_BYTES) drops;

    apply {
        if (drop_reason == DROP_NONE || dropped_are_packets) {
            packets.count(job_index ++ op);
        }
        if (drop_reason != DROP_NONE) {
            drops.count(job_index ++ drop_reason);
        }
    }
}

#endif
