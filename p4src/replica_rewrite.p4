/* Per-replica addressing of multicast results: each copy of a RESULT or PARTIAL gets the MAC,
 * IPv4 address and UDP port of the worker it goes to (replica id = worker id). */
#ifndef SA_ATP_REPLICA_REWRITE_P4
#define SA_ATP_REPLICA_REWRITE_P4

control ReplicaRewrite(inout headers_t hdr, inout metadata_t meta, in standard_metadata_t sm) {
    action to_worker(mac_addr_t mac, ipv4_addr_t ip, bit<16> udp_port) {
        hdr.ethernet.dst_addr = mac;
        hdr.ipv4.dst_addr = ip;
        hdr.udp.dst_port = udp_port;
    }

    action no_replica() {
        meta.drop_reason = DROP_NO_REPLICA;
    }

    /* (job, worker) -> the worker's addresses. */
    table replicas {
        key = {
            hdr.sa.job: exact;
            sm.egress_rid: exact;
        }
        actions = { to_worker; no_replica; }
        default_action = no_replica();
        size = MAX_WORKER_ENTRIES;
    }

    apply {
        replicas.apply();
    }
}

#endif
