#ifndef PROTECTEDSTORE_CTSS2_SHIM_H
#define PROTECTEDSTORE_CTSS2_SHIM_H

// tpm2-tss (libtss2-dev): the Enhanced System API, the TCTI loader (a TPM device or swtpm), error strings.
#include <tss2/tss2_esys.h>
#include <tss2/tss2_tctildr.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_mu.h>
#include <string.h>

/// The template of the primary storage key the device key is sealed under: the TCG "SRK" template for ECC
/// NIST P-256 (TCG TPM v2.0 Provisioning Guidance, "Storage Root Key", the template `tpm2_createprimary -C o
/// -G ecc` uses), with an empty `unique`. A primary key is derived from the hierarchy's seed and its template
/// alone, so the same template gives the same key after every reboot, and another key on another TPM or after
/// the owner hierarchy is cleared. In C because Swift builds the nested unions of `TPMT_PUBLIC` only verbosely.
static inline void protectedstore_tpm_primary_template(TPM2B_PUBLIC *template) {
    memset(template, 0, sizeof(*template));
    template->publicArea.type = TPM2_ALG_ECC;
    template->publicArea.nameAlg = TPM2_ALG_SHA256;
    template->publicArea.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT
        | TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_RESTRICTED
        | TPMA_OBJECT_DECRYPT | TPMA_OBJECT_NODA;
    template->publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
    template->publicArea.parameters.eccDetail.symmetric.keyBits.aes = 128;
    template->publicArea.parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
    template->publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    template->publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    template->publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
}

/// The template of the sealed device key: a keyed-hash object with no scheme (sealed data, which only
/// `TPM2_Unseal` releases), bound to this TPM and to its parent (`fixedTPM`, `fixedParent`: it can be neither
/// duplicated nor moved), usable with its (empty) authValue, and outside dictionary-attack counting (`noDA`): a
/// failure to unseal it says nothing about a passcode.
static inline void protectedstore_tpm_sealed_template(TPM2B_PUBLIC *template) {
    memset(template, 0, sizeof(*template));
    template->publicArea.type = TPM2_ALG_KEYEDHASH;
    template->publicArea.nameAlg = TPM2_ALG_SHA256;
    template->publicArea.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT
        | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA;
    template->publicArea.parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_NULL;
}

/// The template of a keybag's sealed passcode secret: the sealed device key's template without `noDA`, so the
/// object is dictionary-attack protected — every use with a wrong authValue (derived from a wrong passcode)
/// raises the TPM's lockout counter, and in lockout the TPM refuses to use it at all.
static inline void protectedstore_tpm_passcode_secret_template(TPM2B_PUBLIC *template) {
    protectedstore_tpm_sealed_template(template);
    template->publicArea.objectAttributes &= ~TPMA_OBJECT_NODA;
}

/// AES-128 in CFB mode, the parameter encryption of the session that carries the device key to and from the
/// TPM (TPM 2.0 Part 1, "Parameter Encryption"). A `TPMT_SYM_DEF` holds unions, hence C.
static inline TPMT_SYM_DEF protectedstore_tpm_session_cipher(void) {
    TPMT_SYM_DEF cipher;
    memset(&cipher, 0, sizeof(cipher));
    cipher.algorithm = TPM2_ALG_AES;
    cipher.keyBits.aes = 128;
    cipher.mode.aes = TPM2_ALG_CFB;
    return cipher;
}

#endif
