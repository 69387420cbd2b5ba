/* Job isolation and anti-spoofing (docs/protocol.md §6), with the v1model program's tables and
 * checks in its order. The three lookups do not depend on one another, so they are all applied
 * (one stage) and their outcomes checked afterwards. */
#ifndef SA_ATP_TNA_JOB_ADMISSION_P4
#define SA_ATP_TNA_JOB_ADMISSION_P4

control JobAdmission(in headers_t hdr, inout ingress_metadata_t meta,
                     in ingress_intrinsic_metadata_t ig_intr_md, in bool host_op) {
    action set_job(bit<8> job_index, bit<16> slot_base, bit<16> num_slots, bit<8> fan_in,
                   bit<32> expected, bit<16> group, bit<1> inband_fanin) {
        meta.job_index = job_index;
        meta.slot_base = slot_base;
        meta.num_slots = num_slots;
        meta.fan_in = fan_in;
        meta.expected = expected;
        meta.resub.setValid();   /* its group is the job's group in every pass (types.p4) */
        meta.resub.job_group = group;
        meta.inband_fanin = inband_fanin;
    }

    action transit() {
        meta.transit = 1;
    }

    table jobs {
        key = { hdr.sa.job: exact; }
        actions = { set_job; transit; @defaultonly NoAction; }
        const default_action = NoAction();
        size = MAX_JOBS;
    }

    action set_worker(bit<32> worker_bit) {
        meta.worker_bit = worker_bit;
    }

    table workers {
        key = {
            hdr.sa.job: exact;
            hdr.sa.worker: exact;
            ig_intr_md.ingress_port: exact;
            hdr.ethernet.src_addr: exact;
            hdr.ipv4.src_addr: exact;
        }
        actions = { set_worker; @defaultonly NoAction; }
        const default_action = NoAction();
        size = MAX_WORKER_ENTRIES;
    }

    action to_helper(PortId_t port) {
        meta.helper_port = port;
    }

    table worker_ports {
        key = {
            hdr.sa.job: exact;
            hdr.sa.reason: exact;   /* in HELPER_DATA: the helper */
        }
        actions = { to_helper; @defaultonly NoAction; }
        const default_action = NoAction();
        size = MAX_WORKER_ENTRIES;
    }

    apply {
        bool job_known = jobs.apply().hit;
        bool registered = workers.apply().hit;
        bool helper_known = worker_ports.apply().hit;
        /* slot >= num_slots when nothing is left of num_slots - slot (saturating) */
        meta.num_slots = meta.num_slots |-| hdr.sa.slot;
        if (!job_known) {
            meta.drop_reason = DROP_UNKNOWN_JOB;
        } else if (meta.transit == 1) {
            /* aggregated elsewhere: nothing to check here */
        } else if (!host_op) {
            meta.drop_reason = DROP_BAD_OP;
        } else if (!registered) {
            meta.drop_reason = DROP_UNREGISTERED;
        } else if (meta.num_slots == 0) {
            meta.drop_reason = DROP_SLOT_RANGE;
        } else if (hdr.sa.op == OP_HELPER_DATA && !helper_known) {
            meta.drop_reason = DROP_UNREGISTERED;   /* no such helper in the job */
        }
    }
}

#endif
