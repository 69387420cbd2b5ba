/* Job isolation and anti-spoofing (docs/protocol.md §6), with the v1model program's tables and
 * checks in its order. The three lookups do not depend on one another or on the source guard,
 * so they are all applied in the first stage; their outcomes, with the parser's and the source
 * guard's, are then read by one ternary table with const entries (`admit`), which gives the
 * packet its drop reason or its kind in one step, where a chain of conditions took three
 * stages and the choice of kind two more (docs/tofino.md, 'Stages'). */
#ifndef SA_ATP_TNA_JOB_ADMISSION_P4
#define SA_ATP_TNA_JOB_ADMISSION_P4

control JobAdmission(inout headers_t hdr, inout ingress_metadata_t meta,
                     in ingress_intrinsic_metadata_t ig_intr_md, in bit<16> parser_err,
                     inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                     inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    /* The aggregator's index is a concatenation, built by the hash unit (identity), not by
     * an action's ALU: an ALU operation ties the sizes of its operands' containers together
     * (an 18-bit member index built from the slot had pulled the slot fields of the resubmit
     * and pass headers into 32-bit containers, which their layout forbids). */
    Hash<agg_index_t>(HashAlgorithm_t.IDENTITY) index_of;

    action set_job(bit<8> job_index, bit<16> slot_base, bit<16> num_slots, bit<8> fan_in,
                   bit<32> expected, bit<16> group, bit<1> inband_fanin) {
        meta.job_known = 1;
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
        meta.job_known = 1;
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

    /* The outcomes of admit. */
    action drop(bit<4> reason) {
        meta.drop_reason = reason;
        ig_dprsr_md.drop_ctl = 1;
    }
    action spoofed() {   /* counted as the v1model program counts it: under no job */
        meta.drop_reason = DROP_SPOOFED;
        ig_dprsr_md.drop_ctl = 1;
        meta.job_index = 0;
    }
    action forward() {   /* not SA-ATP, or a job aggregated by another switch */
        meta.use_l2 = 1;
    }
    action helper_data() {   /* on to its helper, from the address it was sent to: the switch's */
        hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
        hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
        hdr.udp.src_port = SA_ATP_UDP_PORT;
        hdr.udp.checksum = 0;
        ig_tm_md.ucast_egress_port = meta.helper_port;
        meta.to_worker = 1;   /* to the helper hdr.sa.reason names */
    }
    /* index = abs_slot ++ SET (the member index is hashed where it is used) */
    action admit(bit<3> kind) {
        meta.kind = kind;
        meta.index = index_of.get({meta.abs_slot, hdr.sa.flags[0:0]});
    }
    action admit_helper_result() {
        meta.kind = KIND_HELPER_RESULT;
        meta.index = index_of.get({meta.abs_slot, hdr.sa.flags[0:0]});
        /* COMPLETE_BASE | count, as a constant and a move: no ALU operation ties the count's
         * container to the word's */
        meta.progress_in[17:8] = (bit<10>)(COMPLETE_BASE >> 8);
        meta.progress_in[7:0] = hdr.sa.count;
    }

    /* Zero tests are exact values (0) ahead of a wildcard: worker_bit 0 is an unregistered
     * worker, num_slots 0 a slot out of range (num_slots |-| slot), loss_left 0 a packet the
     * drop simulator keeps, expected 0 a worker outside the expected set (expected &
     * worker_bit). Host ops are DATA, TAKEOVER, HELPER_DATA and HELPER_RESULT. */
    table admit_sel {
        key = { meta.port_frame: ternary; meta.drop_reason: ternary; meta.spoofed: ternary;
                meta.sa_valid: ternary; meta.job_known: ternary; meta.transit: ternary; hdr.sa.op: ternary;
                meta.worker_bit: ternary; meta.num_slots: ternary; meta.helper_known: ternary;
                meta.loss_left: ternary; hdr.sa.flags: ternary; meta.expected: ternary; }
        actions = { drop; spoofed; forward; helper_data; admit; admit_helper_result; NoAction; }
        const entries = {
            /* not pass 1 of a frame from a port */
            (0, _, _, _, _, _, _, _, _, _, _, _, _): NoAction();
            (1, DROP_MALFORMED, _, _, _, _, _, _, _, _, _, _, _): NoAction();
            (1, _, 1, _, _, _, _, _, _, _, _, _, _): spoofed();
            (1, _, _, 0, _, _, _, _, _, _, _, _, _): forward();
            (1, _, _, _, 0, _, _, _, _, _, _, _, _): drop(DROP_UNKNOWN_JOB);
            (1, _, _, _, _, 1, _, _, _, _, _, _, _): forward();
            (1, _, _, _, _, _, OP_DATA, 0, _, _, _, _, _): drop(DROP_UNREGISTERED);
            (1, _, _, _, _, _, OP_TAKEOVER, 0, _, _, _, _, _): drop(DROP_UNREGISTERED);
            (1, _, _, _, _, _, OP_HELPER_DATA, 0, _, _, _, _, _): drop(DROP_UNREGISTERED);
            (1, _, _, _, _, _, OP_HELPER_RESULT, 0, _, _, _, _, _): drop(DROP_UNREGISTERED);
            (1, _, _, _, _, _, OP_DATA, _, 0, _, _, _, _): drop(DROP_SLOT_RANGE);
            (1, _, _, _, _, _, OP_TAKEOVER, _, 0, _, _, _, _): drop(DROP_SLOT_RANGE);
            (1, _, _, _, _, _, OP_HELPER_DATA, _, 0, _, _, _, _): drop(DROP_SLOT_RANGE);
            (1, _, _, _, _, _, OP_HELPER_RESULT, _, 0, _, _, _, _): drop(DROP_SLOT_RANGE);
            (1, _, _, _, _, _, OP_HELPER_DATA, _, _, 0, _, _, _): drop(DROP_UNREGISTERED);
            (1, _, _, _, _, _, OP_HELPER_DATA, _, _, _, 0, _, _): helper_data();
            (1, _, _, _, _, _, OP_DATA, _, _, _, 0, FLAG_PROBE &&& FLAG_PROBE, _):
                admit(KIND_PROBE);
            (1, _, _, _, _, _, OP_DATA, _, _, _, 0, _, 0): admit(KIND_UNEXPECTED);
            (1, _, _, _, _, _, OP_DATA, _, _, _, 0, _, _): admit(KIND_DATA);
            (1, _, _, _, _, _, OP_TAKEOVER, _, _, _, 0, _, _): admit(KIND_TAKEOVER);
            (1, _, _, _, _, _, OP_HELPER_RESULT, _, _, _, 0, _, _): admit_helper_result();
            (1, _, _, _, _, _, OP_DATA, _, _, _, _, _, _): drop(DROP_SIM);
            (1, _, _, _, _, _, OP_TAKEOVER, _, _, _, _, _, _): drop(DROP_SIM);
            (1, _, _, _, _, _, OP_HELPER_DATA, _, _, _, _, _, _): drop(DROP_SIM);
            (1, _, _, _, _, _, OP_HELPER_RESULT, _, _, _, _, _, _): drop(DROP_SIM);
            (1, _, _, _, _, _, _, _, _, _, _, _, _): drop(DROP_BAD_OP);
        }
        const default_action = NoAction();
    }

    apply {
        /* only a well-formed SA-ATP frame is looked up (the lookups write its job index); the
         * condition is the parser's, so the lookups need not wait for anything */
        if (meta.pass == PASS_STATE && !hdr.packet_out.isValid() && parser_err == 0
                && !meta.bad_version && !meta.checksum_err && hdr.sa.isValid()) {
            jobs.apply();
            workers.apply();
            worker_ports.apply();
        }
        /* slot >= num_slots when nothing is left of num_slots - slot (saturating); is the
         * worker expected? (in place: worker_bit, which contributors writes, is left whole) */
        meta.num_slots = meta.num_slots |-| hdr.sa.slot;
        meta.expected = meta.expected & meta.worker_bit;
        admit_sel.apply();
    }
}

/* What the aggregator's registers take from the job: the fan-in (the job's, or the packet's
 * where the job takes it in band), limit_add = AGGREGATING_BASE + fan_in - 1, and whether a
 * first contribution completes the chunk (fan-in 1) with the progress word it writes. */
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

    action start(bit<1> done) {
        meta.start_done = done;
    }
    action start_data(bit<1> done, bit<18> progress_in) {
        meta.start_done = done;
        meta.progress_in = progress_in;
    }
    table start_sel {
        key = { meta.kind: ternary; meta.fan_in: ternary; }
        actions = { start; start_data; NoAction; }
        const entries = {
            (KIND_DATA, 0): start_data(1, PROGRESS_STARTED_DONE);
            (KIND_DATA, 1): start_data(1, PROGRESS_STARTED_DONE);
            (KIND_DATA, _): start_data(0, PROGRESS_STARTED);
            (_, 0): start(1);
            (_, 1): start(1);
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
