/* Frames that claim to come from the switch itself (docs/protocol.md §11): as the v1model
 * program's SourceGuard, one exact table of the switch addresses of the jobs aggregated here. */
#ifndef SA_ATP_TNA_SOURCE_GUARD_P4
#define SA_ATP_TNA_SOURCE_GUARD_P4

control SourceGuard(in headers_t hdr, inout ingress_metadata_t meta) {
    action spoofed() {
        meta.spoofed = 1;   /* the drop reason is admit's (job_admission.p4) */
    }

    /* in the stage of the admission's lookups: admit_sel reads it, and left to itself the
     * compiler placed it a stage later, which delayed the whole chain (docs/tofino.md) */
    @stage(1)
    table switch_sources {
        key = { hdr.ethernet.src_addr: exact; }
        actions = { spoofed; @defaultonly NoAction; }
        const default_action = NoAction();
        size = MAX_JOBS;
    }

    apply {
        switch_sources.apply();
    }
}

#endif
