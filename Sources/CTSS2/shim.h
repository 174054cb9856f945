#ifndef PROTECTEDSTORE_CTSS2_SHIM_H
#define PROTECTEDSTORE_CTSS2_SHIM_H

// tpm2-tss (libtss2-dev): the Enhanced System API, the TCTI loader (a TPM device or swtpm), error strings.
#include <tss2/tss2_esys.h>
#include <tss2/tss2_tctildr.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_mu.h>

#endif
