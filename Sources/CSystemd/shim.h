#ifndef PROTECTEDSTORE_CSYSTEMD_SHIM_H
#define PROTECTEDSTORE_CSYSTEMD_SHIM_H

// sd-bus, systemd's D-Bus library (libsystemd-dev): the session lock source talks to logind through it.
#include <systemd/sd-bus.h>
// eventfd(2), which Glibc's Swift module does not export: the lock source's thread waits on it beside the
// buses, and stopping the source writes it.
#include <sys/eventfd.h>

#endif
