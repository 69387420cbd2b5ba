/* The aggregators' state (docs/protocol.md §4; layout and reasoning in docs/tofino.md, 'State
 * registers'). Pass 1 runs the state machine of §4.2-§4.5 as a chain of registers, each read and
 * updated by one RegisterAction that its selector table (<register>_sel, const entries) picks
 * from what the registers before it returned; `valid`'s selector is the admission's outcome,
 * admit_sel, which gives the packet its kind:
 *
 *   admit_sel (valid) -> run_id -> chunk_id -> generation, agreed_scale, lane_holder -> member
 *         -> progress -> contributors, max_exp, helper_id -> decide (decide.p4)
 *
 * `progress` holds the slot state (bits 17:16, PHASE_*) and the count (bits 15:0) in one word,
 * so that completing a chunk is one update with the count; `member` keeps, per aggregator and
 * worker, the generation of the aggregation the worker was last summed into, which tells a
 * duplicate from a new contribution before `progress` counts it. Pass 2 reads the registers
 * again to describe a result, or clears them for the controller. The lanes are in lanes.p4. */
#ifndef SA_ATP_TNA_AGGREGATOR_P4
#define SA_ATP_TNA_AGGREGATOR_P4

control Aggregator(inout headers_t hdr, inout ingress_metadata_t meta,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    /* The aggregator's index is a concatenation, built by the hash unit (identity), not by
     * an action's ALU: an ALU operation ties the sizes of its operands' containers together
     * (an 18-bit member index built from the slot had pulled the slot fields of the resubmit
     * and pass headers into 32-bit containers, which their layout forbids). */
    Hash<agg_index_t>(HashAlgorithm_t.IDENTITY) index_of;
    Hash<agg_index_t>(HashAlgorithm_t.IDENTITY) valid_at;   /* the same, for valid's address */
    Limits() limits;
    Register<bit<8>, agg_index_t>(NUM_AGGREGATORS, 0) valid;          /* 1: not EMPTY */
    Register<bit<32>, agg_index_t>(NUM_AGGREGATORS, 0) run_id;
    Register<bit<32>, agg_index_t>(NUM_AGGREGATORS, 0) chunk_id;
    Register<bit<8>, agg_index_t>(NUM_AGGREGATORS, 0) generation;      /* aggregations begun */
    Register<bit<16>, agg_index_t>(NUM_AGGREGATORS, 0) agreed_scale;
    /* 8-bit cells: 8192 x 32 of them take 16 SRAM blocks, which leaves stage 7 the memory for
     * two lane registers beside it; 16-bit cells left room for one, 32-bit cells for none
     * (docs/tofino.md, 'State registers') */
    Register<bit<8>, member_index_t>(NUM_MEMBER_CELLS, 0) member;     /* [index * 32 + worker] */
    Register<bit<32>, agg_index_t>(NUM_AGGREGATORS, 0) progress;       /* phase << 16 | count */
    Register<bit<32>, agg_index_t>(NUM_AGGREGATORS, 0) contributors;
    Register<bit<16>, agg_index_t>(NUM_AGGREGATORS, 0) max_exp;
    Register<bit<8>, agg_index_t>(NUM_AGGREGATORS, 0) helper_id;
    /* pool aggregators only (docs/protocol.md §4.6), at the lanes' index: who holds them */
    Register<holder_pair_t, agg_index_t>(NUM_AGGREGATORS) lane_holder;

    Counter<bit<64>, bit<8>>(MAX_JOBS, CounterType_t.PACKETS_AND_BYTES) evictions;
    Counter<bit<64>, bit<8>>(MGMT_OPCODES, CounterType_t.PACKETS_AND_BYTES) management;

    /* -- valid ---------------------------------------------------------------------------- */
    RegisterAction<bit<8>, agg_index_t, bit<8>>(valid) valid_occupy = {
        void apply(inout bit<8> cell, out bit<8> was) { was = cell; cell = 1; }
    };
    RegisterAction<bit<8>, agg_index_t, bit<8>>(valid) valid_vacate = {
        void apply(inout bit<8> cell, out bit<8> was) { was = cell; cell = 0; }
    };
    RegisterAction<bit<8>, agg_index_t, bit<8>>(valid) valid_peek = {
        void apply(inout bit<8> cell, out bit<8> was) { was = cell; }
    };
    /* -- admit_sel: the admission's outcome, and `valid` ------------------------------------
     * What pass 1 does with a frame from a port, from the admission's lookups (job_admission.p4),
     * the parser's and the source guard's findings, in the v1model program's order. */
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
        hdr.bridge.to_worker = 1;   /* to the helper hdr.sa.reason names */
    }
    /* index = abs_slot ++ SET (the member index is hashed where it is used); `valid` is
     * addressed by the same hash, straight into its address: the admission and the first
     * register of the chain in one stage */
    action admit(bit<3> kind) {
        meta.kind = kind;
        meta.index = index_of.get({meta.abs_slot, meta.set_bit});
        meta.was_valid = valid_peek.execute(valid_at.get({meta.abs_slot, meta.set_bit}));
    }
    /* passes 2 and 3 and management requests: the aggregator again, from the same lookups
     * as pass 1 (a request's abs_slot and set bit are its aggregator's) */
    action locate() {
        meta.index = index_of.get({meta.abs_slot, meta.set_bit});
    }
    action admit_data() {
        meta.kind = KIND_DATA;
        meta.index = index_of.get({meta.abs_slot, meta.set_bit});
        meta.was_valid = valid_occupy.execute(valid_at.get({meta.abs_slot, meta.set_bit}));
    }

    /* Zero tests are exact values (0) ahead of a wildcard: registered 0 is an unregistered
     * worker, num_slots 0 a slot out of range (num_slots |-| slot), loss_left 0 a packet the
     * drop simulator keeps, expected_worker 0 a worker outside the expected set. Host ops are DATA, TAKEOVER, HELPER_DATA and HELPER_RESULT. */
    /* and, in pass 2, a management clear vacates the aggregator */
    action do_valid_vacate() {
        meta.index = index_of.get({meta.abs_slot, meta.set_bit});
        valid_vacate.execute(valid_at.get({meta.abs_slot, meta.set_bit}));
    }
    table admit_sel {
        key = { meta.port_frame: ternary; meta.kind: ternary; meta.drop_reason: ternary; meta.spoofed: ternary;
                meta.sa_valid: ternary; meta.job_known: ternary; meta.transit: ternary; hdr.sa.op: ternary;
                meta.registered: ternary; meta.num_slots: ternary; meta.helper_known: ternary;
                meta.loss_left: ternary; hdr.sa.flags: ternary; meta.expected_worker: ternary; }
        actions = { drop; spoofed; forward; helper_data; admit; admit_data; locate;
                    do_valid_vacate; NoAction; }
        const entries = {
            /* not pass 1 of a frame from a port */
            (0, KIND_MGMT_CLEAR, _, _, _, _, _, _, _, _, _, _, _, _): do_valid_vacate();
            (0, _, _, _, _, _, _, _, _, _, _, _, _, _): locate();
            (1, _, DROP_MALFORMED, _, _, _, _, _, _, _, _, _, _, _): NoAction();
            (1, _, _, 1, _, _, _, _, _, _, _, _, _, _): spoofed();
            (1, _, _, _, 0, _, _, _, _, _, _, _, _, _): forward();
            (1, _, _, _, _, 0, _, _, _, _, _, _, _, _): drop(DROP_UNKNOWN_JOB);
            (1, _, _, _, _, _, 1, _, _, _, _, _, _, _): forward();
            (1, _, _, _, _, _, _, OP_DATA, 0, _, _, _, _, _): drop(DROP_UNREGISTERED);
            (1, _, _, _, _, _, _, OP_TAKEOVER, 0, _, _, _, _, _): drop(DROP_UNREGISTERED);
            (1, _, _, _, _, _, _, OP_HELPER_DATA, 0, _, _, _, _, _): drop(DROP_UNREGISTERED);
            (1, _, _, _, _, _, _, OP_HELPER_RESULT, 0, _, _, _, _, _): drop(DROP_UNREGISTERED);
            (1, _, _, _, _, _, _, OP_DATA, _, 0, _, _, _, _): drop(DROP_SLOT_RANGE);
            (1, _, _, _, _, _, _, OP_TAKEOVER, _, 0, _, _, _, _): drop(DROP_SLOT_RANGE);
            (1, _, _, _, _, _, _, OP_HELPER_DATA, _, 0, _, _, _, _): drop(DROP_SLOT_RANGE);
            (1, _, _, _, _, _, _, OP_HELPER_RESULT, _, 0, _, _, _, _): drop(DROP_SLOT_RANGE);
            (1, _, _, _, _, _, _, OP_HELPER_DATA, _, _, 0, _, _, _): drop(DROP_UNREGISTERED);
            (1, _, _, _, _, _, _, OP_HELPER_DATA, _, _, _, 0, _, _): helper_data();
            (1, _, _, _, _, _, _, OP_DATA, _, _, _, 0, FLAG_PROBE &&& FLAG_PROBE, _):
                admit(KIND_PROBE);
            (1, _, _, _, _, _, _, OP_DATA, _, _, _, 0, _, 0): admit(KIND_UNEXPECTED);
            (1, _, _, _, _, _, _, OP_DATA, _, _, _, 0, _, _): admit_data();
            (1, _, _, _, _, _, _, OP_TAKEOVER, _, _, _, 0, _, _): admit(KIND_TAKEOVER);
            (1, _, _, _, _, _, _, OP_HELPER_RESULT, _, _, _, 0, _, _): admit(KIND_HELPER_RESULT);
            (1, _, _, _, _, _, _, OP_DATA, _, _, _, _, _, _): drop(DROP_SIM);
            (1, _, _, _, _, _, _, OP_TAKEOVER, _, _, _, _, _, _): drop(DROP_SIM);
            (1, _, _, _, _, _, _, OP_HELPER_DATA, _, _, _, _, _, _): drop(DROP_SIM);
            (1, _, _, _, _, _, _, OP_HELPER_RESULT, _, _, _, _, _, _): drop(DROP_SIM);
            (1, _, _, _, _, _, _, _, _, _, _, _, _, _): drop(DROP_BAD_OP);
        }
        const default_action = NoAction();
    }

    /* -- run_id: the run against the slot's (serial-number arithmetic) ---------------------- */
    RegisterAction<bit<32>, agg_index_t, bit<2>>(run_id) run_id_claim = {
        void apply(inout bit<32> cell) { cell = hdr.sa.run; }
    };
    RegisterAction<bit<32>, agg_index_t, bit<2>>(run_id) run_id_compare = {
        void apply(inout bit<32> cell, out bit<2> rv) {
            if (hdr.sa.run == cell) {
                rv = RUN_SAME;
            } else if ((int<32>)(hdr.sa.run - cell) < 0) {
                rv = RUN_OLDER;
            } else {
                rv = RUN_NEWER;
            }
        }
    };
    RegisterAction<bit<32>, agg_index_t, bit<2>>(run_id) run_id_compare_claim = {
        void apply(inout bit<32> cell, out bit<2> rv) {
            if (hdr.sa.run == cell) {
                rv = RUN_SAME;
            } else if ((int<32>)(hdr.sa.run - cell) < 0) {
                rv = RUN_OLDER;
            } else {
                rv = RUN_NEWER;
                cell = hdr.sa.run;
            }
        }
    };
    RegisterAction<bit<32>, agg_index_t, bit<32>>(run_id) run_id_read = {
        void apply(inout bit<32> cell, out bit<32> rv) { rv = cell; }
    };
    action do_run_id_claim() { run_id_claim.execute(meta.index); }
    action do_run_id_compare() { meta.run_class = run_id_compare.execute(meta.index); }
    action do_run_id_compare_claim() {
        meta.run_class = run_id_compare_claim.execute(meta.index);
    }
    action do_run_id_read() { hdr.sa.run = run_id_read.execute(meta.index); }   /* a report */
    table run_id_sel {
        key = { meta.pass: ternary; meta.kind: ternary; meta.was_valid: ternary; }
        actions = { do_run_id_claim; do_run_id_compare; do_run_id_compare_claim; do_run_id_read;
                    NoAction; }
        const entries = {
            (PASS_STATE, KIND_NONE, _): NoAction();
            (PASS_STATE, KIND_DATA, 0): do_run_id_claim();
            (PASS_STATE, KIND_DATA, _): do_run_id_compare_claim();
            (PASS_STATE, _, 0): NoAction();
            (PASS_STATE, _, _): do_run_id_compare();
            (PASS_LANES, KIND_MGMT_CLEAR, _): do_run_id_claim();
            (PASS_LANES, KIND_MGMT_READ, _): do_run_id_read();
            (PASS_LANES, _, _): do_run_id_compare();   /* is it still this run? (lane_holder, */
            (PASS_HIGH, _, _): do_run_id_compare();    /* respond.p4) */
        }
        const default_action = NoAction();
    }

    /* -- chunk_id: where the slot stands for this packet (meta.situation) ------------------- */
    RegisterAction<bit<32>, agg_index_t, bit<2>>(chunk_id) chunk_id_claim = {
        void apply(inout bit<32> cell) { cell = hdr.sa.chunk; }
    };
    RegisterAction<bit<32>, agg_index_t, bit<2>>(chunk_id) chunk_id_compare = {
        void apply(inout bit<32> cell, out bit<2> rv) {
            if (hdr.sa.chunk == cell) {
                rv = SIT_HELD;
            } else if ((int<32>)(hdr.sa.chunk - cell) > 0) {
                rv = SIT_NEWER;
            } else {
                rv = SIT_OLDER;
            }
        }
    };
    RegisterAction<bit<32>, agg_index_t, bit<2>>(chunk_id) chunk_id_compare_claim = {
        void apply(inout bit<32> cell, out bit<2> rv) {
            if (hdr.sa.chunk == cell) {
                rv = SIT_HELD;
            } else if ((int<32>)(hdr.sa.chunk - cell) > 0) {
                rv = SIT_NEWER;
                cell = hdr.sa.chunk;
            } else {
                rv = SIT_OLDER;
            }
        }
    };
    RegisterAction<bit<32>, agg_index_t, bit<32>>(chunk_id) chunk_id_read = {
        void apply(inout bit<32> cell, out bit<32> rv) { rv = cell; }
    };
    action do_chunk_id_claim() {
        chunk_id_claim.execute(meta.index);
        meta.situation = SIT_NEWER;
    }
    action do_chunk_id_compare() { meta.situation = chunk_id_compare.execute(meta.index); }
    action do_chunk_id_compare_claim() {
        meta.situation = chunk_id_compare_claim.execute(meta.index);
    }
    action do_chunk_id_read() { hdr.sa.chunk = chunk_id_read.execute(meta.index); }   /* a report */
    action situation_newer() { meta.situation = SIT_NEWER; }     /* empty, or an older run */
    action situation_old_run() { meta.situation = SIT_OLD_RUN; }
    table chunk_id_sel {
        key = { meta.pass: ternary; meta.kind: ternary; meta.was_valid: ternary;
                meta.run_class: ternary; }
        actions = { do_chunk_id_claim; do_chunk_id_compare; do_chunk_id_compare_claim;
                    do_chunk_id_read; situation_newer; situation_old_run; NoAction; }
        const entries = {
            (PASS_STATE, KIND_NONE, _, _): NoAction();
            (PASS_STATE, _, 1, RUN_OLDER): situation_old_run();
            (PASS_STATE, KIND_DATA, 1, RUN_SAME): do_chunk_id_compare_claim();
            (PASS_STATE, _, 1, RUN_SAME): do_chunk_id_compare();
            (PASS_STATE, KIND_DATA, _, _): do_chunk_id_claim();
            (PASS_STATE, _, _, _): situation_newer();
            (PASS_LANES, KIND_MGMT_CLEAR, _, _): do_chunk_id_claim();
            (PASS_LANES, KIND_MGMT_READ, _, _): do_chunk_id_read();
            (PASS_LANES, _, _, _): do_chunk_id_compare();   /* and this chunk? */
            (PASS_HIGH, _, _, _): do_chunk_id_compare();
        }
        const default_action = NoAction();
    }

    /* -- generation: bumped by every aggregation begun (and by a clear) --------------------- *
     * 8 bits, wrapping from 0xFF to 1: 0, what a cleared `member` cell holds, is never a
     * current generation. */
    RegisterAction<bit<8>, agg_index_t, bit<8>>(generation) generation_bump = {
        void apply(inout bit<8> cell, out bit<8> rv) {
            if (cell == 0xFF) {
                cell = 1;
            } else {
                cell = cell + 1;
            }
            rv = cell;
        }
    };
    RegisterAction<bit<8>, agg_index_t, bit<8>>(generation) generation_read = {
        void apply(inout bit<8> cell, out bit<8> rv) { rv = cell; }
    };
    action do_generation_bump() { meta.gen = generation_bump.execute(meta.index); }
    action do_generation_read() { meta.gen = generation_read.execute(meta.index); }
    table generation_sel {
        key = { meta.pass: ternary; meta.kind: ternary; meta.situation: ternary; }
        actions = { do_generation_bump; do_generation_read; NoAction; }
        const entries = {
            (PASS_STATE, KIND_DATA, SIT_NEWER): do_generation_bump();
            /* the aggregation a packet that reaches the lanes asks the gate about (lanes.p4) */
            (PASS_STATE, _, SIT_HELD): do_generation_read();
            (PASS_LANES, KIND_MGMT_CLEAR, _): do_generation_bump();
        }
        const default_action = NoAction();
    }

    /* -- agreed_scale --------------------------------------------------------------------- */
    RegisterAction<bit<16>, agg_index_t, bit<16>>(agreed_scale) agreed_scale_claim = {
        void apply(inout bit<16> cell) { cell = hdr.sa.scale; }
    };
    RegisterAction<bit<16>, agg_index_t, bit<1>>(agreed_scale) agreed_scale_compare = {
        void apply(inout bit<16> cell, out bit<1> rv) {
            if (hdr.sa.scale == cell) {
                rv = 1;
            } else {
                rv = 0;
            }
        }
    };
    RegisterAction<bit<16>, agg_index_t, bit<16>>(agreed_scale) agreed_scale_read = {
        void apply(inout bit<16> cell, out bit<16> rv) { rv = cell; }
    };
    action do_agreed_scale_claim() { agreed_scale_claim.execute(meta.index); }
    action do_agreed_scale_compare() { meta.scale_ok = agreed_scale_compare.execute(meta.index); }
    action do_agreed_scale_read() { meta.rd_scale = agreed_scale_read.execute(meta.index); }
    table agreed_scale_sel {
        key = { meta.pass: ternary; meta.kind: ternary; meta.situation: ternary; }
        actions = { do_agreed_scale_claim; do_agreed_scale_compare; do_agreed_scale_read;
                    NoAction; }
        const entries = {
            (PASS_STATE, KIND_DATA, SIT_NEWER): do_agreed_scale_claim();
            (PASS_STATE, KIND_DATA, SIT_HELD): do_agreed_scale_compare();
            (PASS_LANES, KIND_MGMT_CLEAR, _): do_agreed_scale_claim();
            (PASS_LANES, _, _): do_agreed_scale_read();
        }
        const default_action = NoAction();
    }

    /* -- lane_holder: a borrowed slot's lanes, claimed per chunk (docs/protocol.md §4.6) --------
     * Indexed by where the lanes are (the pool's), run only for a borrowed slot (nothing left
     * of own_slots - slot, in every pass: passes 2 and 3 look the job up again) and a
     * management clear. Pass 1 claims the lanes, held, for a chunk that starts, or asks
     * whether they are still this aggregator's; pass 2 releases them for a stored
     * HELPER_RESULT; pass 3, after the
     * high words are read, releases them when a chunk completes or is taken over (so that no
     * other job's chunk can store into them before the sum has left), and for every answer
     * says whether they were still this aggregator's (respond.p4 drops or bounces the answer
     * if not). A release touches only this aggregator's lanes. Every question answers with the
     * same bit, lanes_away: a pair register's ALU outputs a constant only through its
     * predicate, at one bit for all its actions. */
    RegisterAction<holder_pair_t, agg_index_t, bit<1>>(lane_holder) lane_holder_peek = {
        void apply(inout holder_pair_t cell, out bit<1> away) {
            if (cell.lo != (bit<16>)meta.index) {
                away = 1;   /* free, busy, or released by another: the sum is gone */
            }
        }
    };
    /* this aggregator's lanes, free ones or another's released ones become this aggregator's;
     * busy ones (another aggregator's, held) stay as they are */
    RegisterAction<holder_pair_t, agg_index_t, bit<1>>(lane_holder) lane_holder_claim_held = {
        void apply(inout holder_pair_t cell, out bit<1> away) {
            if (cell.lo == (bit<16>)meta.index || cell.hi < POOL_HELD) {
                cell.lo = (bit<16>)meta.index;
                cell.hi = (bit<16>)meta.index + (POOL_HELD + 1);
            } else {
                away = 1;
            }
        }
    };
    /* this aggregator's lanes become released; any others stay as they are (1) */
    RegisterAction<holder_pair_t, agg_index_t, bit<1>>(lane_holder) lane_holder_release = {
        void apply(inout holder_pair_t cell, out bit<1> away) {
            if (cell.lo == (bit<16>)meta.index) {
                cell.hi = (bit<16>)meta.index + 1;
            } else {
                away = 1;
            }
        }
    };
    RegisterAction<holder_pair_t, agg_index_t, bit<1>>(lane_holder) lane_holder_clear = {
        void apply(inout holder_pair_t cell) {
            cell.lo = 0;
            cell.hi = 0;
        }
    };
    action do_lane_holder_peek() {
        meta.lanes_away = lane_holder_peek.execute(meta.resub.lane_index);
    }
    action do_lane_holder_claim_held() {
        meta.lanes_away = lane_holder_claim_held.execute(meta.resub.lane_index);
    }
    action do_lane_holder_release() {
        meta.lanes_away = lane_holder_release.execute(meta.resub.lane_index);
    }
    action do_lane_holder_clear() { lane_holder_clear.execute(meta.resub.lane_index); }
    table lane_holder_sel {
        key = { meta.pass: ternary; meta.kind: ternary; meta.situation: ternary;
                meta.own_slots: ternary; meta.response: ternary; meta.lane_op: ternary;
                hdr.pass.response: ternary; meta.run_class: ternary; }
        actions = { do_lane_holder_peek; do_lane_holder_claim_held; do_lane_holder_release;
                    do_lane_holder_clear; NoAction; }
        const entries = {
            (PASS_STATE, KIND_DATA, SIT_NEWER, 0, _, _, _, _): do_lane_holder_claim_held();
            (PASS_STATE, KIND_DATA, SIT_HELD, 0, _, _, _, _): do_lane_holder_peek();
            (PASS_STATE, KIND_PROBE, SIT_HELD, 0, _, _, _, _): do_lane_holder_peek();
            (PASS_STATE, KIND_TAKEOVER, SIT_HELD, 0, _, _, _, _): do_lane_holder_peek();
            (PASS_STATE, KIND_HELPER_RESULT, SIT_HELD, 0, _, _, _, _): do_lane_holder_peek();
            (PASS_LANES, KIND_MGMT_CLEAR, _, _, _, _, _, _): do_lane_holder_clear();
            /* passes 2 and 3 release only while the aggregator still holds this chunk: the
             * same aggregator's next chunk may hold the lanes by now */
            (PASS_LANES, _, SIT_HELD, 0, RESPOND_HELPER_RESULT, LANES_STORE, _, RUN_SAME):
                do_lane_holder_release();
            (PASS_HIGH, _, SIT_HELD, 0, _, _, RESPOND_RESULT, RUN_SAME): do_lane_holder_release();
            (PASS_HIGH, _, SIT_HELD, 0, _, _, RESPOND_PARTIAL, RUN_SAME): do_lane_holder_release();
            (PASS_HIGH, _, SIT_HELD, 0, _, _, RESPOND_COPY, RUN_SAME): do_lane_holder_release();
        }
        const default_action = NoAction();
    }

    /* -- member: was this worker summed into the aggregation under way? --------------------- */
    RegisterAction<bit<8>, member_index_t, bit<1>>(member) member_join = {
        void apply(inout bit<8> cell, out bit<1> rv) {
            if (cell == meta.gen) {
                rv = 1;
            } else {
                rv = 0;
            }
            cell = meta.gen;
        }
    };
    /* [index * 32 + worker (< 32)]: an identity hash, straight into the register's address */
    Hash<member_index_t>(HashAlgorithm_t.IDENTITY) member_of;
    action do_member_join() {
        meta.is_member = member_join.execute(member_of.get({meta.index, hdr.sa.worker[4:0]}));
    }
    table member_sel {
        key = { meta.pass: ternary; meta.kind: ternary; meta.situation: ternary;
                meta.scale_ok: ternary; }
        actions = { do_member_join; NoAction; }
        const entries = {
            (PASS_STATE, KIND_DATA, SIT_NEWER, _): do_member_join();
            (PASS_STATE, KIND_DATA, SIT_HELD, 1): do_member_join();
        }
        const default_action = NoAction();
    }

    /* What progress_check does, chosen beside `member` (its inputs must be ready a stage
     * before `progress`): complete a duplicate's chunk if the fan-in was lowered, hand a chunk
     * over to a helper, or nothing (a read). */
    /* progress_check subtracts progress_in from a cell above limit_add: a duplicate
     * completes the chunk when the count is past fan-in - 1; a takeover, which has no other
     * use for limit_add, sets it so that it finds the slot AGGREGATING; a read takes nothing.
     * A stateful ALU takes at most two PHV words: limit_add and progress_in, which is the
     * word the claims write (a DATA's first contribution, a stored HELPER_RESULT: left as
     * start_sel set it) or the amount, never both in one pass; all below 2^18. */
    action check_duplicate() { meta.progress_in = DUP_COMPLETE; }
    action check_takeover() { meta.limit_add = AGGREGATING_BASE - 1; meta.progress_in = TAKE_OVER; }
    action check_nothing() { meta.progress_in = 0; }
    /* a chunk that finds its pool lanes busy starts taken over by its sender (§4.6) */
    action start_taken() { meta.progress_in = PROGRESS_STARTED_TAKEN; }
    table progress_check_sel {
        key = { meta.pass: ternary; meta.kind: ternary; meta.situation: ternary;
                meta.scale_ok: ternary; meta.lanes_away: ternary; }
        actions = { check_duplicate; check_takeover; check_nothing; start_taken; NoAction; }
        const entries = {
            (PASS_STATE, KIND_DATA, SIT_NEWER, _, 1): start_taken();
            (PASS_STATE, KIND_DATA, SIT_NEWER, _, _): NoAction();   /* progress_claim's word */
            (PASS_STATE, KIND_HELPER_RESULT, SIT_HELD, _, 1): check_nothing();
            (PASS_STATE, KIND_HELPER_RESULT, SIT_HELD, _, _): NoAction();   /* progress_helper's */
            (PASS_STATE, KIND_DATA, SIT_HELD, 1, _): check_duplicate();
            (PASS_STATE, KIND_TAKEOVER, SIT_HELD, _, 0): check_takeover();
        }
        const default_action = check_nothing();
    }

    /* -- progress: phase << 16 | count ----------------------------------------------------- */
    RegisterAction<bit<32>, agg_index_t, bit<32>>(progress) progress_claim = {
        void apply(inout bit<32> cell, out bit<32> rv) { rv = cell; cell = (bit<32>)meta.progress_in; }
    };
    RegisterAction<bit<32>, agg_index_t, bit<32>>(progress) progress_add = {
        void apply(inout bit<32> cell, out bit<32> rv) {
            rv = cell;
            if (cell >= meta.limit_add) {
                cell = cell + ADD_AND_COMPLETE;
            } else if (cell >= AGGREGATING_BASE) {
                cell = cell + 1;
            }
        }
    };
    RegisterAction<bit<32>, agg_index_t, bit<32>>(progress) progress_check = {
        void apply(inout bit<32> cell, out bit<32> rv) {
            rv = cell;
            if (cell > meta.limit_add) {
                cell = cell - (bit<32>)meta.progress_in;
            }
        }
    };
    RegisterAction<bit<32>, agg_index_t, bit<32>>(progress) progress_helper = {
        void apply(inout bit<32> cell, out bit<32> rv) {
            rv = cell;
            if (cell >= TAKEN_BASE && cell < AGGREGATING_BASE) {
                cell = (bit<32>)meta.progress_in;
            }
        }
    };
    action do_progress_claim() { meta.old_progress = progress_claim.execute(meta.index); }
    action do_progress_add() { meta.old_progress = progress_add.execute(meta.index); }
    action do_progress_check() { meta.old_progress = progress_check.execute(meta.index); }
    action do_progress_helper() { meta.old_progress = progress_helper.execute(meta.index); }
    table progress_sel {
        key = { meta.pass: ternary; meta.kind: ternary; meta.situation: ternary;
                meta.scale_ok: ternary; meta.is_member: ternary; meta.lanes_away: ternary; }
        actions = { do_progress_claim; do_progress_add; do_progress_check; do_progress_helper;
                    NoAction; }
        const entries = {
            (PASS_STATE, KIND_NONE, _, _, _, _): NoAction();
            (PASS_STATE, KIND_DATA, SIT_NEWER, _, _, _): do_progress_claim();
            (PASS_STATE, KIND_DATA, SIT_HELD, 1, 0, _): do_progress_add();
            (PASS_STATE, KIND_HELPER_RESULT, SIT_HELD, _, _, 1): do_progress_check();
            (PASS_STATE, KIND_HELPER_RESULT, SIT_HELD, _, _, _): do_progress_helper();
            (PASS_STATE, _, _, _, _, _): do_progress_check();
            (PASS_LANES, KIND_MGMT_CLEAR, _, _, _, _): do_progress_claim();
            (PASS_LANES, _, _, _, _, _): do_progress_check();
            (PASS_HIGH, _, _, _, _, _): do_progress_check();   /* a read: is the phase the same? */
        }
        const default_action = NoAction();
    }

    /* -- contributors ---------------------------------------------------------------------- */
    RegisterAction<bit<32>, agg_index_t, bit<32>>(contributors) contributors_claim = {
        void apply(inout bit<32> cell, out bit<32> rv) { rv = cell; cell = meta.gate_bits; }
    };
    RegisterAction<bit<32>, agg_index_t, bit<32>>(contributors) contributors_helper = {
        void apply(inout bit<32> cell, out bit<32> rv) { rv = cell; cell = hdr.sa.bitmap; }
    };
    RegisterAction<bit<32>, agg_index_t, bit<32>>(contributors) contributors_join = {
        void apply(inout bit<32> cell, out bit<32> rv) { rv = cell; cell = cell | meta.gate_bits; }
    };
    RegisterAction<bit<32>, agg_index_t, bit<32>>(contributors) contributors_read = {
        void apply(inout bit<32> cell, out bit<32> rv) { rv = cell; }
    };
    /* into the header's bitmap, where every answer that reads it carries it (PHV is short):
     * pass 1 of a HELPER_RESULT reads nothing but for an OLD_RUN bounce, so that one not
     * stored leaves with its own */
    action do_contributors_claim() { hdr.sa.bitmap = contributors_claim.execute(meta.index); }
    action do_contributors_join() { hdr.sa.bitmap = contributors_join.execute(meta.index); }
    action do_contributors_read() { hdr.sa.bitmap = contributors_read.execute(meta.index); }
    action do_contributors_helper() { hdr.sa.bitmap = contributors_helper.execute(meta.index); }
    /* contributors, max_exp and helper_id in the stage after progress: the chain's stateful
     * ALUs take 11 of the 48, the lanes 32, so the compiler, which places the lanes (free to
     * go anywhere from stage 1) first, is told where these go (docs/tofino.md, 'Stages') */
    @stage(9)
    table contributors_sel {
        key = { meta.pass: ternary; meta.kind: ternary; meta.situation: ternary;
                meta.scale_ok: ternary; meta.old_progress[17:16]: ternary; meta.lanes_away: ternary; }
        actions = { do_contributors_claim; do_contributors_join; do_contributors_read;
                    do_contributors_helper; NoAction; }
        const entries = {
            (PASS_STATE, KIND_NONE, _, _, _, _): NoAction();
            (PASS_STATE, KIND_DATA, SIT_NEWER, _, _, _): do_contributors_claim();
            (PASS_STATE, KIND_HELPER_RESULT, SIT_HELD, _, PHASE_TAKEN, 0): do_contributors_helper();
            (PASS_STATE, KIND_HELPER_RESULT, SIT_OLD_RUN, _, _, _): do_contributors_read();
            (PASS_STATE, KIND_HELPER_RESULT, _, _, _, _): NoAction();
            (PASS_STATE, KIND_DATA, SIT_HELD, 1, PHASE_AGGREGATING, _): do_contributors_join();
            (PASS_STATE, _, _, _, _, _): do_contributors_read();
            (PASS_LANES, KIND_MGMT_CLEAR, _, _, _, _): do_contributors_helper();   /* zeroes */
            (PASS_LANES, _, _, _, _, _): do_contributors_read();
        }
        const default_action = NoAction();
    }

    /* -- max_exp --------------------------------------------------------------------------- */
    RegisterAction<bit<16>, agg_index_t, bit<16>>(max_exp) max_exp_claim = {
        void apply(inout bit<16> cell) { cell = hdr.sa.exp; }
    };
    RegisterAction<bit<16>, agg_index_t, bit<16>>(max_exp) max_exp_raise = {
        void apply(inout bit<16> cell) {
            if (hdr.sa.exp > cell) {
                cell = hdr.sa.exp;
            }
        }
    };
    RegisterAction<bit<16>, agg_index_t, bit<16>>(max_exp) max_exp_read = {
        void apply(inout bit<16> cell, out bit<16> rv) { rv = cell; }
    };
    action do_max_exp_claim() { max_exp_claim.execute(meta.index); }
    action do_max_exp_raise() { max_exp_raise.execute(meta.index); }
    action do_max_exp_read() { hdr.sa.exp = max_exp_read.execute(meta.index); }   /* pass 2 */
    @stage(9)   /* see contributors_sel */
    table max_exp_sel {
        key = { meta.pass: ternary; meta.kind: ternary; meta.situation: ternary;
                meta.scale_ok: ternary; meta.old_progress[17:16]: ternary;
                meta.is_member: ternary; meta.lanes_away: ternary; }
        actions = { do_max_exp_claim; do_max_exp_raise; do_max_exp_read; NoAction; }
        const entries = {
            (PASS_STATE, KIND_DATA, SIT_NEWER, _, _, _, _): do_max_exp_claim();
            (PASS_STATE, KIND_HELPER_RESULT, SIT_HELD, _, PHASE_TAKEN, _, 1): NoAction();
            (PASS_STATE, KIND_HELPER_RESULT, SIT_HELD, _, PHASE_TAKEN, _, _): do_max_exp_claim();
            (PASS_STATE, KIND_DATA, SIT_HELD, 1, PHASE_AGGREGATING, 0, _): do_max_exp_raise();
            (PASS_LANES, KIND_MGMT_CLEAR, _, _, _, _, _): do_max_exp_claim();
            (PASS_LANES, _, _, _, _, _, _): do_max_exp_read();
        }
        const default_action = NoAction();
    }

    /* -- helper_id ------------------------------------------------------------------------- */
    RegisterAction<bit<8>, agg_index_t, bit<8>>(helper_id) helper_id_write = {
        void apply(inout bit<8> cell) { cell = hdr.sa.worker; }
    };
    RegisterAction<bit<8>, agg_index_t, bit<8>>(helper_id) helper_id_read = {
        void apply(inout bit<8> cell, out bit<8> rv) { rv = cell; }
    };
    action do_helper_id_write() { helper_id_write.execute(meta.index); }
    /* into the header's worker: only a TAKEN bounce (pass 1) and a report read it */
    action do_helper_id_read() { hdr.sa.worker = helper_id_read.execute(meta.index); }
    @stage(9)   /* see contributors_sel */
    table helper_id_sel {
        key = { meta.pass: ternary; meta.kind: ternary; meta.situation: ternary;
                meta.old_progress[17:16]: ternary; meta.lanes_away: ternary; }
        actions = { do_helper_id_write; do_helper_id_read; NoAction; }
        const entries = {
            (PASS_STATE, KIND_DATA, SIT_NEWER, _, 1): do_helper_id_write();   /* §4.6 */
            (PASS_STATE, KIND_TAKEOVER, SIT_HELD, PHASE_AGGREGATING, 0):
                do_helper_id_write();
            (PASS_STATE, KIND_TAKEOVER, SIT_HELD, PHASE_TAKEN, 0): do_helper_id_write();
            (PASS_STATE, KIND_DATA, SIT_HELD, PHASE_TAKEN, _): do_helper_id_read();
            (PASS_STATE, KIND_PROBE, SIT_HELD, PHASE_TAKEN, _): do_helper_id_read();
            (PASS_LANES, KIND_MGMT_CLEAR, _, _, _): do_helper_id_write();
            (PASS_LANES, KIND_MGMT_READ, _, _, _): do_helper_id_read();
        }
        const default_action = NoAction();
    }

    apply {
        admit_sel.apply();
        limits.apply(hdr, meta);
        run_id_sel.apply();
        chunk_id_sel.apply();
        generation_sel.apply();
        agreed_scale_sel.apply();
        lane_holder_sel.apply();
        member_sel.apply();
        progress_check_sel.apply();
        progress_sel.apply();
        contributors_sel.apply();
        max_exp_sel.apply();
        helper_id_sel.apply();
        /* an addition completes the chunk when old_progress >= limit_add, i.e. nothing is
         * left of limit_add - old_progress (saturating, in place: limit_add is not read
         * after this); a duplicate when moreover old_progress is not limit_add itself */
        if (meta.old_progress == meta.limit_add) {
            meta.at_limit = 1;
        }
        meta.limit_add = meta.limit_add |-| meta.old_progress;
        meta.rd_count = meta.old_progress[7:0];
        if (meta.pass == PASS_STATE && meta.kind == KIND_DATA && meta.situation == SIT_NEWER
                && meta.old_progress[17:16] == PHASE_AGGREGATING) {
            evictions.count(meta.job_index);   /* an unfinished aggregation overwritten */
        }
        if (meta.kind == KIND_MGMT_READ || meta.kind == KIND_MGMT_CLEAR) {
            management.count(hdr.packet_out.opcode);
        }
    }
}

#endif
