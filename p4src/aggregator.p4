/* The aggregation pool: per-aggregator state and the switch side of the protocol
 * (docs/protocol.md §4). An aggregator is one shadow set of one slot; it is indexed by
 * 2 * (slot_base + slot) + set. A borrowed slot (slot >= the job's own slots) keeps its state
 * there but sums in the lanes of a slot of the shared pool, claimed per chunk and released on
 * completion or takeover (docs/protocol.md §4.6). Management requests from the controller
 * (packet_out) read or clear one aggregator and report it back to the controller
 * (docs/protocol.md §10). */
#ifndef SA_ATP_AGGREGATOR_P4
#define SA_ATP_AGGREGATOR_P4

control Aggregator(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    register<bit<32>>(NUM_AGGREGATORS) chunk_id;            /* chunk the aggregator holds */
    register<bit<8>>(NUM_AGGREGATORS)  slot_state;          /* SLOT_EMPTY/AGGREGATING/COMPLETE/TAKEN */
    register<bit<32>>(NUM_AGGREGATORS) contributors;        /* bitmap of workers summed so far */
    register<bit<8>>(NUM_AGGREGATORS)  contribution_count;  /* number of workers summed so far */
    register<bit<16>>(NUM_AGGREGATORS) agreed_scale;        /* quantization scale of the held chunk */
    register<bit<16>>(NUM_AGGREGATORS) max_exp;             /* max block exponent reported */
    register<bit<8>>(NUM_AGGREGATORS)  helper_id;           /* helper holding a TAKEN chunk */
    register<bit<32>>(NUM_AGGREGATORS) run_id;              /* run of the job the chunk belongs to */
    register<bit<16>>(NUM_AGGREGATORS) lane_holder;         /* pool lanes: who holds them, POOL_HELD */
#define LANE_REGISTER(i) register<bit<32>>(NUM_AGGREGATORS) lane_##i;
    LANES(LANE_REGISTER)                                    /* the running sum, one register per lane */

    /* Unfinished aggregations overwritten by a newer chunk, per job index. */
    counter(MAX_JOBS, CounterType.packets) evictions;
    /* Management requests from the controller, per opcode (MGMT_*). */
    counter(MGMT_OPCODES, CounterType.packets_and_bytes) management;

    bit<32> index;
    bit<32> held_chunk;
    bit<8>  state;
    bit<32> bitmap;
    bit<8>  count;
    bit<16> scale;
    bit<16> exp;
    bit<8>  helper;
    bit<32> held_run;
    bit<32> lanes_at;     /* where the sum is: the aggregator's own lanes, or the pool's */
    bit<16> holder;
    bit<16> new_holder;   /* what lane_holder becomes */

#define STORE_LANE(i) lane_##i.write(lanes_at, hdr.lanes.v##i);
    /* The packet's lanes become the aggregator's (first contribution, helper result). */
    action store_lanes() {
        LANES(STORE_LANE)
    }

#define ADD_LANE(i) \
    bit<32> sum_##i; \
    lane_##i.read(sum_##i, lanes_at); \
    hdr.lanes.v##i = hdr.lanes.v##i + sum_##i; \
    lane_##i.write(lanes_at, hdr.lanes.v##i);
    /* Add the packet's lanes into the aggregator; the packet keeps the new sum. */
    action add_lanes() {
        LANES(ADD_LANE)
    }

#define CLEAR_LANE(i) lane_##i.write(lanes_at, 0); hdr.lanes.v##i = 0;
    /* Zero the aggregator's sum (and the packet's lanes, which report it). */
    action clear_lanes() {
        LANES(CLEAR_LANE)
    }

#define LOAD_LANE(i) lane_##i.read(hdr.lanes.v##i, lanes_at);
    /* Copy the aggregator's sum into the packet. */
    action load_lanes() {
        LANES(LOAD_LANE)
    }

    action save_state() {
        chunk_id.write(index, held_chunk);
        slot_state.write(index, state);
        contributors.write(index, bitmap);
        contribution_count.write(index, count);
        agreed_scale.write(index, scale);
        max_exp.write(index, exp);
        helper_id.write(index, helper);
        run_id.write(index, held_run);
    }

    /* Describe the aggregator in the header of an outgoing RESULT or PARTIAL. */
    action describe(bit<4> op) {
        hdr.sa.op = op;
        hdr.sa.reason = 0;
        hdr.sa.flags = hdr.sa.flags & FLAG_SET;
        hdr.sa.bitmap = bitmap;
        hdr.sa.count = count;
        hdr.sa.scale = scale;
        hdr.sa.exp = exp;
    }

    /* Answer the sender, from the address it sent to. */
    action reply_to_sender() {
        mac_addr_t mac = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = mac;
        ipv4_addr_t ip = hdr.ipv4.dst_addr;
        hdr.ipv4.dst_addr = hdr.ipv4.src_addr;
        hdr.ipv4.src_addr = ip;
        bit<16> port = hdr.udp.dst_port;
        hdr.udp.dst_port = hdr.udp.src_port;
        hdr.udp.src_port = port;
        hdr.udp.checksum = 0;
        sm.egress_spec = sm.ingress_port;
    }

    /* Replicate to every worker of the job; egress writes each replica's destination. */
    action multicast_to_job() {
        hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
        hdr.ipv4.src_addr = hdr.ipv4.dst_addr;
        hdr.udp.src_port = SA_ATP_UDP_PORT;
        hdr.udp.checksum = 0;
        sm.mcast_grp = meta.job_group;
        meta.to_job = 1;
    }

    action bounce(bit<8> reason) {
        hdr.sa.op = OP_BOUNCE;
        hdr.sa.reason = reason;
        hdr.sa.bitmap = bitmap;
        hdr.sa.count = count;
        reply_to_sender();
    }

    /* Report the aggregator to the controller: state in the SA-ATP header (reason = state,
     * worker = helper), sum in the lanes. */
    action report_to_controller() {
        describe(OP_RESULT);
        hdr.sa.chunk = held_chunk;
        hdr.sa.run = held_run;
        hdr.sa.reason = state;
        hdr.sa.worker = helper;
        hdr.sa.slot = new_holder;
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = sm.ingress_port;
        hdr.packet_in._pad = 0;
        hdr.packet_in.opcode = hdr.packet_out.opcode;
        hdr.packet_in.aggregator = index;
        hdr.packet_out.setInvalid();
        sm.egress_spec = CPU_PORT;
    }

    /* What the packet does to the lanes, and where it goes: decided first, then done once,
     * so that each lane action has a single call site (p4c copies an action per call site). */
    bit<3> lane_op = LANES_KEEP;
    bit<4> response = RESPOND_NONE;
    bit<8> bounce_reason = 0;

    apply {
        /* A management request (docs/protocol.md §10) reads or clears the aggregator as it is:
         * its carrier frame's header (run 0, chunk 0) is no packet of the job's. */
        bool from_controller = hdr.packet_out.isValid();
        if (from_controller) {
            index = hdr.packet_out.aggregator;
        } else {
            index = ((bit<32>)(meta.slot_base + hdr.sa.slot) << 1) | (bit<32>)(hdr.sa.flags & FLAG_SET);
        }
        chunk_id.read(held_chunk, index);
        slot_state.read(state, index);
        contributors.read(bitmap, index);
        contribution_count.read(count, index);
        agreed_scale.read(scale, index);
        max_exp.read(exp, index);
        helper_id.read(helper, index);
        run_id.read(held_run, index);

        /* A borrowed slot sums in the pool's lanes, which another job's chunk may hold. */
        bool borrowed = !from_controller && hdr.sa.slot >= meta.own_slots;
        lanes_at = index;
        if (borrowed) {
            lanes_at = ((bit<32>)(meta.pool_base + (hdr.sa.slot - meta.own_slots)) << 1)
                       | (bit<32>)(hdr.sa.flags & FLAG_SET);
        }
        lane_holder.read(holder, lanes_at);
        bit<16> me = (bit<16>)index + 1;
        bool lanes_kept = !borrowed || (holder & ~POOL_HELD) == me;   /* still this chunk's */
        bool lanes_busy = !lanes_kept && (holder & POOL_HELD) != 0;
        new_holder = holder;

        bit<8> fan_in = meta.fan_in;
        if (meta.inband_fanin == 1 && hdr.sa.fanin != 0) {
            fan_in = hdr.sa.fanin;
        }
        /* Runs (docs/protocol.md §4.5): state of an older run of the job is as good as empty; a
         * packet of an older run than the slot's is refused. Serial-number arithmetic again.
         * Not for a management request, which reports the state the aggregator holds. */
        bit<32> run_age = hdr.sa.run - held_run;
        bool other_run = !from_controller && state != SLOT_EMPTY && run_age != 0;
        bool old_run = other_run && run_age >= 32w0x80000000;
        bool unfinished = state == SLOT_AGGREGATING;
        if (other_run && !old_run) {
            state = SLOT_EMPTY;
        }
        bool held = state != SLOT_EMPTY && held_chunk == hdr.sa.chunk;
        bit<32> age = hdr.sa.chunk - held_chunk;    /* serial-number arithmetic, mod 2^32 */
        bool newer = state == SLOT_EMPTY || (age != 0 && age < 32w0x80000000);
        bool changed = false;     /* the aggregator's state must be written back */

        /* -- decide ------------------------------------------------------------------------ */
        if (from_controller) {
            management.count((bit<32>)hdr.packet_out.opcode);
            if (hdr.packet_out.opcode == MGMT_CLEAR_AGGREGATOR) {
                held_run = 0;
                held_chunk = 0;
                state = SLOT_EMPTY;
                new_holder = 0;
                bitmap = 0;
                count = 0;
                scale = 0;
                exp = 0;
                helper = 0;
                lane_op = LANES_CLEAR;
                changed = true;
            } else {
                lane_op = LANES_LOAD;
            }
            response = RESPOND_CONTROLLER;
        } else if (old_run) {
            response = RESPOND_BOUNCE;
            bounce_reason = BOUNCE_OLD_RUN;
        } else if (hdr.sa.op == OP_DATA && (hdr.sa.flags & FLAG_PROBE) != 0) {
            /* A probe asks about the chunk without contributing (a worker that sits out). */
            response = RESPOND_BOUNCE;
            if (held && state == SLOT_COMPLETE && lanes_kept) {
                lane_op = LANES_LOAD;
                response = RESPOND_COPY;
            } else if (held && state == SLOT_COMPLETE) {
                bounce_reason = BOUNCE_STALE;     /* the result's pool lanes went on */
            } else if (held && state == SLOT_TAKEN) {
                hdr.sa.worker = helper;
                bounce_reason = BOUNCE_TAKEN;
            } else if (held) {
                response = RESPOND_PENDING;
            } else if (newer) {
                bounce_reason = BOUNCE_NOT_HELD;
            } else {
                bounce_reason = BOUNCE_STALE;
            }
        } else if (hdr.sa.op == OP_DATA) {
            if ((meta.expected & meta.worker_bit) == 0) {
                meta.drop_reason = DROP_NOT_EXPECTED;
            } else if (newer) {
                if (unfinished) {
                    evictions.count((bit<32>)meta.job_index);
                }
                held_run = hdr.sa.run;
                held_chunk = hdr.sa.chunk;
                bitmap = meta.worker_bit;
                count = 1;
                scale = hdr.sa.scale;
                exp = hdr.sa.exp;
                changed = true;
                if (lanes_busy) {
                    /* The pool's lanes hold another job's chunk: the chunk starts taken over,
                     * by the worker whose contribution found them busy, with that contribution
                     * as its partial (as ATP's parameter server sums what finds no
                     * aggregator). */
                    state = SLOT_TAKEN;
                    helper = hdr.sa.worker;
                    response = RESPOND_PARTIAL;   /* the packet's own lanes */
                } else {
                    state = SLOT_AGGREGATING;
                    lane_op = LANES_STORE;
                    new_holder = me | POOL_HELD;
                    response = RESPOND_ABSORB;
                }
            } else if (!held) {
                response = RESPOND_BOUNCE;
                bounce_reason = BOUNCE_STALE;
            } else if (state == SLOT_TAKEN) {
                hdr.sa.worker = helper;
                response = RESPOND_BOUNCE;
                bounce_reason = BOUNCE_TAKEN;
            } else if (hdr.sa.scale != scale) {
                response = RESPOND_BOUNCE;
                bounce_reason = BOUNCE_SCALE_MISMATCH;
            } else if (state == SLOT_COMPLETE && lanes_kept) {
                lane_op = LANES_LOAD;
                response = RESPOND_COPY;
            } else if (state == SLOT_COMPLETE) {
                response = RESPOND_BOUNCE;        /* the result's pool lanes went on */
                bounce_reason = BOUNCE_STALE;
            } else if ((bitmap & meta.worker_bit) != 0) {
                if (count >= fan_in) {
                    lane_op = LANES_LOAD;    /* the fan-in was lowered since: complete now */
                    response = RESPOND_ABSORB;
                } else {
                    response = RESPOND_PENDING;
                }
            } else {
                bitmap = bitmap | meta.worker_bit;
                count = count + 1;
                if (hdr.sa.exp > exp) {
                    exp = hdr.sa.exp;
                }
                lane_op = LANES_ADD;
                changed = true;
                response = RESPOND_ABSORB;
            }
            if (response == RESPOND_ABSORB && count >= fan_in) {
                state = SLOT_COMPLETE;
                changed = true;
                new_holder = me;                  /* complete: the pool may have the lanes */
                response = RESPOND_RESULT;
            }
        } else if (hdr.sa.op == OP_TAKEOVER) {
            if (!held) {
                response = RESPOND_BOUNCE;
                bounce_reason = BOUNCE_NOT_HELD;
            } else if (!lanes_kept) {
                response = RESPOND_BOUNCE;        /* the partial's pool lanes went on */
                bounce_reason = BOUNCE_NOT_HELD;
            } else if (state == SLOT_COMPLETE) {
                lane_op = LANES_LOAD;
                response = RESPOND_COPY;
            } else {
                state = SLOT_TAKEN;
                helper = hdr.sa.worker;
                changed = true;
                new_holder = me;                  /* taken: the pool may have the lanes */
                lane_op = LANES_LOAD;
                response = RESPOND_PARTIAL;
            }
        } else if (hdr.sa.op == OP_HELPER_RESULT) {
            /* stored only in lanes still this chunk's: once another chunk has claimed them,
             * the result stays with the helper (the TNA program asks no more than that) */
            if (held && state == SLOT_TAKEN && lanes_kept) {
                new_holder = me;
                bitmap = hdr.sa.bitmap;
                count = hdr.sa.count;
                exp = hdr.sa.exp;
                state = SLOT_COMPLETE;
                lane_op = LANES_STORE;
                changed = true;
            }
            response = RESPOND_HELPER_RESULT;
        }

        /* -- act ----------------------------------------------------------------------------- */
        if (lane_op == LANES_STORE) {
            store_lanes();
        } else if (lane_op == LANES_ADD) {
            add_lanes();
        } else if (lane_op == LANES_LOAD) {
            load_lanes();
        } else if (lane_op == LANES_CLEAR) {
            clear_lanes();
        }
        if (changed) {
            save_state();
        }
        if ((borrowed || from_controller) && new_holder != holder) {
            lane_holder.write(lanes_at, new_holder);
        }

        if (response == RESPOND_ABSORB) {
            mark_to_drop(sm);          /* summed; nothing to send yet */
        } else if (response == RESPOND_BOUNCE) {
            bounce(bounce_reason);
        } else if (response == RESPOND_COPY) {
            describe(OP_RESULT);
            hdr.sa.flags = hdr.sa.flags | FLAG_COPY;
            reply_to_sender();
        } else if (response == RESPOND_RESULT) {
            describe(OP_RESULT);
            multicast_to_job();
        } else if (response == RESPOND_PARTIAL) {
            describe(OP_PARTIAL);
            multicast_to_job();
        } else if (response == RESPOND_HELPER_RESULT) {
            hdr.sa.op = OP_RESULT;
            hdr.sa.flags = (hdr.sa.flags & FLAG_SET) | FLAG_HELPER;
            multicast_to_job();
        } else if (response == RESPOND_CONTROLLER) {
            report_to_controller();
        } else if (response == RESPOND_PENDING) {
            /* To every worker of the job: one worker's question answers all of them. A worker
             * missing from the bitmap learns its contribution was lost and sends it again; the
             * others learn the chunk is alive and hold back their own questions. */
            hdr.sa.op = OP_BOUNCE;
            hdr.sa.reason = BOUNCE_PENDING;
            hdr.sa.bitmap = bitmap;
            hdr.sa.count = count;
            multicast_to_job();
        }
    }
}

#endif
