/* Job isolation and anti-spoofing (docs/protocol.md §6): which job a packet belongs to, whether
 * its sender is a registered worker of that job on the right port with the right addresses, and
 * whether its slot lies in the job's range; for a HELPER_DATA, the port of the helper it goes to.
 * A job aggregated by another switch is marked transit here: its packets are forwarded like any
 * other traffic. */
#ifndef SA_ATP_JOB_ADMISSION_P4
#define SA_ATP_JOB_ADMISSION_P4

control JobAdmission(in headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm,
                     in bool host_op) {
    action set_job(bit<8> job_index, bit<16> slot_base, bit<16> num_slots, bit<16> own_slots,
                   bit<16> pool_base, bit<8> fan_in, bit<32> expected, bit<16> group,
                   bit<1> inband_fanin) {
        meta.job_index = job_index;
        meta.slot_base = slot_base;
        meta.num_slots = num_slots;
        meta.own_slots = own_slots;
        meta.pool_base = pool_base;
        meta.fan_in = fan_in;
        meta.expected = expected;
        meta.job_group = group;
        meta.inband_fanin = inband_fanin;
    }

    action transit() {
        meta.transit = 1;
    }

    /* One entry per admitted job (its slot range, membership and multicast group), or per job
     * that only passes through this switch. */
    table jobs {
        key = { hdr.sa.job: exact; }
        actions = { set_job; transit; NoAction; }
        default_action = NoAction();
        size = MAX_JOBS;
    }

    action set_worker(bit<32> worker_bit) {
        meta.worker_bit = worker_bit;
    }

    /* One entry per (job, worker): the only port and addresses that worker may send from. */
    table workers {
        key = {
            hdr.sa.job: exact;
            hdr.sa.worker: exact;
            sm.ingress_port: exact;
            hdr.ethernet.src_addr: exact;
            hdr.ipv4.src_addr: exact;
        }
        actions = { set_worker; NoAction; }
        default_action = NoAction();
        size = MAX_WORKER_ENTRIES;
    }

    /* A HELPER_DATA goes through the switch to its helper, from the switch's address. */
    action to_helper(bit<9> port) {
        sm.egress_spec = port;
        meta.to_worker = 1;
        meta.dest_worker = hdr.sa.reason;
    }

    /* One entry per (job, worker): the port the worker is reached on. */
    table worker_ports {
        key = {
            hdr.sa.job: exact;
            hdr.sa.reason: exact;   /* in HELPER_DATA: the helper */
        }
        actions = { to_helper; NoAction; }
        default_action = NoAction();
        size = MAX_WORKER_ENTRIES;
    }

    apply {
        if (!jobs.apply().hit) {
            meta.drop_reason = DROP_UNKNOWN_JOB;
        } else if (meta.transit == 1) {
            /* aggregated elsewhere: nothing to check here */
        } else if (!host_op) {
            meta.drop_reason = DROP_BAD_OP;
        } else if (!workers.apply().hit) {
            meta.drop_reason = DROP_UNREGISTERED;
        } else if (hdr.sa.slot >= meta.num_slots) {
            meta.drop_reason = DROP_SLOT_RANGE;
        } else if (hdr.sa.op == OP_HELPER_DATA && !worker_ports.apply().hit) {
            meta.drop_reason = DROP_UNREGISTERED;   /* no such helper in the job */
        }
    }
}

#endif
