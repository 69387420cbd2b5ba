/* Job isolation and anti-spoofing (docs/protocol.md §6), with the v1model program's tables.
 * The three lookups do not depend on one another or on the source guard, so they are all
 * applied in the first stage; their outcomes, with the parser's and the source guard's, are
 * read by one ternary table with const entries, the aggregator's `admit_sel` (aggregator.p4),
 * which checks them in the v1model program's order and gives the packet its drop reason or
 * its kind in one step, where a chain of conditions took three stages and the choice of kind
 * two more (docs/tofino.md, 'Stages'). */
#ifndef SA_ATP_TNA_JOB_ADMISSION_P4
#define SA_ATP_TNA_JOB_ADMISSION_P4

control JobAdmission(inout headers_t hdr, inout ingress_metadata_t meta,
                     in ingress_intrinsic_metadata_t ig_intr_md, in bit<16> parser_err) {

    action set_job(bit<8> job_index, bit<16> slot_base, bit<16> num_slots, bit<16> own_slots,
                   bit<16> pool_base, bit<8> fan_in, bit<32> expected, bit<16> group,
                   bit<1> inband_fanin) {
        meta.job_known = 1;
        meta.job_index = job_index;
        meta.slot_base = slot_base;
        meta.num_slots = num_slots;
        meta.own_slots = own_slots;
        meta.pool_base = pool_base;
        meta.fan_in = fan_in;
        meta.expected = expected;
        hdr.pass.job_group = group;   /* where pass 3 has it: the job's group in every pass */
        meta.inband_fanin = inband_fanin;
    }

    action transit() {
        meta.job_known = 1;
        meta.transit = 1;
    }

    table jobs {
        key = { hdr.sa.job: exact; }
        actions = { set_job; transit; @defaultonly NoAction; }
        const default_action = NoAction();
        size = MAX_JOBS;
    }

    /* The worker's bit is the parser's (meta.gate_bits: one parser state per worker id, the
     * same 1 << worker the controller writes here for the v1model program's tables); PHV
     * has no room for a second copy. */
    action set_worker(bit<32> worker_bit) {
        meta.registered = 1;
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
        meta.helper_known = 1;
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

    /* Is the worker in the job's expected set? Its bit in `expected`, by a ternary match on
     * that bit (an AND of the two 32-bit fields would tie their containers together, and the
     * PHV allocation after placement found no pair of 32-bit containers for them). */
    action is_expected() {
        meta.expected_worker = 1;
    }
    table expected_sel {
        key = { hdr.sa.worker: ternary; meta.expected: ternary; }
        actions = { is_expected; NoAction; }
        const entries = {
            (0, 0x00000001 &&& 0x00000001): is_expected();
            (1, 0x00000002 &&& 0x00000002): is_expected();
            (2, 0x00000004 &&& 0x00000004): is_expected();
            (3, 0x00000008 &&& 0x00000008): is_expected();
            (4, 0x00000010 &&& 0x00000010): is_expected();
            (5, 0x00000020 &&& 0x00000020): is_expected();
            (6, 0x00000040 &&& 0x00000040): is_expected();
            (7, 0x00000080 &&& 0x00000080): is_expected();
            (8, 0x00000100 &&& 0x00000100): is_expected();
            (9, 0x00000200 &&& 0x00000200): is_expected();
            (10, 0x00000400 &&& 0x00000400): is_expected();
            (11, 0x00000800 &&& 0x00000800): is_expected();
            (12, 0x00001000 &&& 0x00001000): is_expected();
            (13, 0x00002000 &&& 0x00002000): is_expected();
            (14, 0x00004000 &&& 0x00004000): is_expected();
            (15, 0x00008000 &&& 0x00008000): is_expected();
            (16, 0x00010000 &&& 0x00010000): is_expected();
            (17, 0x00020000 &&& 0x00020000): is_expected();
            (18, 0x00040000 &&& 0x00040000): is_expected();
            (19, 0x00080000 &&& 0x00080000): is_expected();
            (20, 0x00100000 &&& 0x00100000): is_expected();
            (21, 0x00200000 &&& 0x00200000): is_expected();
            (22, 0x00400000 &&& 0x00400000): is_expected();
            (23, 0x00800000 &&& 0x00800000): is_expected();
            (24, 0x01000000 &&& 0x01000000): is_expected();
            (25, 0x02000000 &&& 0x02000000): is_expected();
            (26, 0x04000000 &&& 0x04000000): is_expected();
            (27, 0x08000000 &&& 0x08000000): is_expected();
            (28, 0x10000000 &&& 0x10000000): is_expected();
            (29, 0x20000000 &&& 0x20000000): is_expected();
            (30, 0x40000000 &&& 0x40000000): is_expected();
            (31, 0x80000000 &&& 0x80000000): is_expected();
        }
        const default_action = NoAction();
    }

    apply {
        /* only a well-formed SA-ATP frame is looked up (the lookups write its job index); the
         * condition is the parser's, so the lookups need not wait for anything. Passes 2 and
         * 3 look the job up again: its index and group, the aggregator (slot_base) and whether
         * the slot is borrowed (own_slots), which the resubmit data has no room for (what
         * workers and worker_ports find there is not used). */
        if (!hdr.packet_out.isValid() && hdr.sa.isValid() && (meta.pass != PASS_STATE
                || (parser_err == 0 && !meta.bad_version && !meta.checksum_err))) {
            jobs.apply();
            workers.apply();
            worker_ports.apply();
        }
        /* slot >= num_slots when nothing is left of num_slots - slot (saturating); a borrowed
         * slot (docs/protocol.md §4.6) when nothing is left of own_slots - slot, and its pool
         * slot is pool_base - own_slots + slot (in place, beside the aggregator's chain) */
        meta.num_slots = meta.num_slots |-| hdr.sa.slot;
        meta.pool_base = meta.pool_base - meta.own_slots;
        meta.own_slots = meta.own_slots |-| hdr.sa.slot;
        meta.pool_base = meta.pool_base + hdr.sa.slot;
        expected_sel.apply();
    }
}

/* What the aggregator's registers take from the job: the fan-in (the job's, or the packet's
 * where the job takes it in band), limit_add = AGGREGATING_BASE + fan_in - 1, whether a
 * first contribution completes the chunk (fan-in 1), and the progress word a DATA's or a
 * HELPER_RESULT's claim writes. */
control Limits(in headers_t hdr, inout ingress_metadata_t meta) {
    action inband_fanin() {
        meta.fan_in = hdr.sa.fanin;
    }
    table fan_in_sel {
        key = { meta.inband_fanin: ternary; hdr.sa.fanin: ternary; }
        actions = { inband_fanin; NoAction; }
        const entries = {
            (1, 0): NoAction();
            (1, _): inband_fanin();
        }
        const default_action = NoAction();
    }

    action start_data(bit<18> progress_in) {
        meta.progress_in = progress_in;
    }
    /* a HELPER_RESULT's progress word: COMPLETE_BASE | count, as a constant and a move (no
     * ALU operation ties the count's container to the word's) */
    action start_helper_result() {
        meta.progress_in[17:8] = (bit<10>)(COMPLETE_BASE >> 8);
        meta.progress_in[7:0] = hdr.sa.count;
    }
    table start_sel {
        key = { meta.kind: ternary; meta.fan_in: ternary; }
        actions = { start_data; start_helper_result; NoAction; }
        const entries = {
            (KIND_HELPER_RESULT, _): start_helper_result();
            (KIND_DATA, 0): start_data(PROGRESS_STARTED_DONE);
            (KIND_DATA, 1): start_data(PROGRESS_STARTED_DONE);
            (KIND_DATA, _): start_data(PROGRESS_STARTED);
        }
        const default_action = NoAction();
    }

    apply {
        fan_in_sel.apply();
        /* AGGREGATING_BASE + fan_in - 1 in two steps, a move and an addition in place:
         * an 8-bit operand of a 32-bit addition would take a 32-bit container alone */
        meta.limit_add = (bit<32>)meta.fan_in;
        meta.limit_add = meta.limit_add + (AGGREGATING_BASE - 1);
        start_sel.apply();
    }
}

#endif
