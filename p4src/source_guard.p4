/* Frames that claim to come from the switch itself (docs/protocol.md §11): every SA-ATP frame a
 * worker accepts is sent from an address of the switch, the one the worker's job sends to, so a
 * frame that arrives on a port with such a source address is a forgery and is dropped. The
 * controller installs the switch address of every job it aggregates here. */
#ifndef SA_ATP_SOURCE_GUARD_P4
#define SA_ATP_SOURCE_GUARD_P4

control SourceGuard(in headers_t hdr, inout metadata_t meta) {
    action spoofed() {
        meta.drop_reason = DROP_SPOOFED;
    }

    table switch_sources {
        key = { hdr.ethernet.src_addr: exact; }
        actions = { spoofed; NoAction; }
        default_action = NoAction();
        size = MAX_JOBS;
    }

    apply {
        switch_sources.apply();
    }
}

#endif
