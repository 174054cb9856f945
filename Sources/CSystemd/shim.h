#ifndef PROTECTEDSTORE_CSYSTEMD_SHIM_H
#define PROTECTEDSTORE_CSYSTEMD_SHIM_H

// sd-bus, systemd's D-Bus library (libsystemd-dev): the session lock source talks to logind through it.
#include <systemd/sd-bus.h>

#endif
