/* Packet and drop counters per job index (docs/protocol.md §8). Instantiated at ingress, where
 * ``packets`` counts what was received (dropped or not), and at egress, where it counts what
 * left (``dropped_are_packets`` false); ``drops`` counts drops by reason at both. The pipeline
 * drops a packet with a drop reason right after counting it. */
#ifndef SA_ATP_PACKET_STATS_P4
#define SA_ATP_PACKET_STATS_P4

control PacketStats(in bit<8> job_index, in bit<4> op, in bit<4> drop_reason)
                   (bool dropped_are_packets) {
    counter(STATS_SIZE, CounterType.packets_and_bytes) packets;   /* [job_index * 16 + op] */
    counter(STATS_SIZE, CounterType.packets_and_bytes) drops;     /* [job_index * 16 + reason] */

    apply {
        if (drop_reason == DROP_NONE) {
            packets.count((bit<32>)(job_index ++ op));
        } else {
            if (dropped_are_packets) {
                packets.count((bit<32>)(job_index ++ op));
            }
            drops.count((bit<32>)(job_index ++ drop_reason));
        }
    }
}

#endif
