#ifndef PROTECTEDSTORE_CSYSTEMD_SHIM_H
#define PROTECTEDSTORE_CSYSTEMD_SHIM_H

// sd-bus, systemd's D-Bus library (libsystemd-dev): the session lock source talks to logind through it.
#include <systemd/sd-bus.h>
// sd-event, the event loop the session lock source's thread runs, with the buses attached to it.
#include <systemd/sd-event.h>
// eventfd(2), which Glibc's Swift module does not export: the lock source's event loop waits on it beside the
// buses, and stopping the source writes it.
#include <sys/eventfd.h>
#include <sys/prctl.h>

/// Sets whether this process is dumpable (`prctl(PR_SET_DUMPABLE, dumpable)`): in C because `prctl` is variadic,
/// which Swift does not call. Returns 0, or -1 with errno set.
static inline int protectedstore_set_dumpable(int dumpable) {
    return prctl(PR_SET_DUMPABLE, (unsigned long)dumpable, 0UL, 0UL, 0UL);
}

/// Whether this process is dumpable (`prctl(PR_GET_DUMPABLE)`): 0 when not, 1 or 2 when it is.
static inline int protectedstore_get_dumpable(void) {
    return prctl(PR_GET_DUMPABLE, 0UL, 0UL, 0UL, 0UL);
}

#endif
