#ifndef PROTECTEDSTORE_CSODIUM_SHIM_H
#define PROTECTEDSTORE_CSODIUM_SHIM_H

#include <sodium.h>

#endif
