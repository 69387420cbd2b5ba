/* Addressing of what the switch sends to a worker, at egress: each multicast copy (replica id =
 * worker id) and a HELPER_DATA forwarded to its helper. */
#ifndef SA_ATP_TNA_REPLICA_REWRITE_P4
#define SA_ATP_TNA_REPLICA_REWRITE_P4

control ReplicaRewrite(inout headers_t hdr, inout egress_metadata_t meta) {
    action to_worker(mac_addr_t mac, ipv4_addr_t ip, bit<16> udp_port) {
        hdr.ethernet.dst_addr = mac;
        hdr.ipv4.dst_addr = ip;
        hdr.udp.dst_port = udp_port;
    }

    action no_replica() {
        meta.drop_reason = DROP_NO_REPLICA;
    }

    table replicas {
        key = {
            hdr.sa.job: exact;
            meta.dest_worker: exact;
        }
        actions = { to_worker; no_replica; }
        const default_action = no_replica();
        size = MAX_WORKER_ENTRIES;
    }

    apply {
        replicas.apply();
    }
}

#endif
