internal import CTSS2
import Foundation
import ProtectedData
import SecureKeys

/// One conversation with a TPM 2.0 through tpm2-tss's Enhanced System API.
///
/// It holds the TCTI (how commands reach the TPM, such as `device:/dev/tpmrm0` or `swtpm:host=…,port=…`) and the ESYS
/// context, freed together in `deinit`.
///
/// Every command that carries the device key runs in a salted HMAC session with AES-128-CFB parameter
/// encryption (TPM 2.0 Part 1, "Parameter Encryption"), so the key crosses the bus to the TPM encrypted.
/// Not `Sendable`: one owner at a time, as the ESYS context requires.
///
/// A response code is checked in one place, `TSS2_RC.check(orThrow:)` (and `TSS2_RC.check(_:)`, which throws
/// `DeviceError.Code.tpmFailure` through it). The methods that only talk to the TPM throw `DeviceError`; sealing
/// and unsealing throw ``Failure``, which also carries a `SecureKeysError` (an oversized secret or authValue,
/// memory for the key) or an ``UnsealFailure``, and which the key store maps to the error that names its file.
final class TPMConnection {
    /// The TCTI configuration, for messages.
    let tcti: String
    private var tctiContext: OpaquePointer?
    private var context: OpaquePointer?
    /// `ESYS_TR_NONE`, which means no handle and no session.
    private static let noHandle = ESYS_TR(ESYS_TR_NONE)

    /// Why sealing or unsealing failed.
    ///
    /// This is the one error those methods throw, mapped by the key store.
    enum Failure: Error, CustomStringConvertible {
        /// The TPM is unavailable or refused a command (`tpm-unavailable`, `tpm-failure`).
        case device(DeviceError)
        /// A secret or authValue too large for the TPM, or no guarded memory for the unsealed one.
        case keys(SecureKeysError)
        /// The sealed object is not this TPM's or not what it wrote, or the TPM refused its authValue.
        case unseal(UnsealFailure)

        /// The error itself, as the key store throws it on when it has nothing to add.
        var underlying: any Error {
            switch self {
            case .device(let error): error
            case .keys(let error): error
            case .unseal(let failure): failure
            }
        }

        /// The underlying error's description.
        var description: String { "\(underlying)" }
    }

    /// Runs `body`, whose `DeviceError` is thrown as ``Failure/device(_:)``.
    private func device<Result>(_ body: () throws(DeviceError) -> Result) throws(Failure) -> Result {
        do throws(DeviceError) {
            return try body()
        } catch {
            throw .device(error)
        }
    }

    /// Runs `body`, which touches a `SecureBytes` (throwing `SecureKeysError`), its error thrown as
    /// ``Failure/keys(_:)``.
    private func keys<Result>(_ body: () throws -> Result) throws(Failure) -> Result {
        do {
            return try body()
        } catch let error as SecureKeysError {
            throw .keys(error)
        } catch {
            preconditionFailure("only a SecureKeysError is thrown here, not \(error)")
        }
    }

    /// Opens the TPM at `tcti`.
    ///
    /// - Throws: `DeviceError.Code.tpmUnavailable` naming the TCTI and why.
    init(tcti: String) throws(DeviceError) {
        self.tcti = tcti
        if tcti.hasPrefix("device:") {
            // The device TCTI's own message goes to stderr through tpm2-tss's logging: say it here instead.
            let node = String(tcti.dropFirst("device:".count))
            let path = node.isEmpty ? "/dev/tpmrm0" : node
            guard access(path, F_OK) == 0 else {
                throw DeviceError.tpmUnavailable(tcti: tcti, reason: "\(path) does not exist (no TPM, or its driver is not loaded)")
            }
            guard access(path, R_OK | W_OK) == 0 else {
                throw DeviceError.tpmUnavailable(
                    tcti: tcti, reason: "\(path) is not readable and writable by this user (the `tss` group usually is)")
            }
        }
        var loaded: OpaquePointer?
        try Tss2_TctiLdr_Initialize(tcti, &loaded).check { DeviceError.tpmUnavailable(tcti: tcti, reason: $0) }
        tctiContext = loaded
        do throws(DeviceError) {
            try Esys_Initialize(&context, loaded, nil).check { DeviceError.tpmUnavailable(tcti: tcti, reason: $0) }
        } catch {
            Tss2_TctiLdr_Finalize(&tctiContext)
            throw error
        }
    }

    deinit {
        if context != nil { Esys_Finalize(&context) }
        if tctiContext != nil { Tss2_TctiLdr_Finalize(&tctiContext) }
    }

    // MARK: Reading the TPM

    /// The TPM's manufacturer, up to four ASCII letters (`IBM` for swtpm).
    ///
    /// It is proof that a TPM 2.0 answers.
    ///
    /// - Throws: `DeviceError.Code.tpmUnavailable` when it does not answer.
    func manufacturer() throws(DeviceError) -> String {
        let tcti = tcti
        let properties = try tpmProperties(
            from: 0x105 /* TPM2_PT_MANUFACTURER (PT_FIXED + 5), a macro Swift cannot import */, count: 1
        ) { DeviceError.tpmUnavailable(tcti: tcti, reason: "it does not answer a TPM 2.0 GetCapability: \($0)") }
        guard let first = properties?.first else {
            throw DeviceError.tpmUnavailable(tcti: tcti, reason: "it does not answer a TPM 2.0 GetCapability: no data returned")
        }
        let value = first.value.bigEndian
        let letters = withUnsafeBytes(of: value) { Array($0) }
        // Padded with spaces or NULs (swtpm: "IBM\0"); anything else unprintable is shown as "?".
        let shown = letters.filter { $0 != 0 }.map { (0x20...0x7e).contains($0) ? $0 : 0x3f }
        return String(decoding: shown, as: UTF8.self).trimmingCharacters(in: .whitespaces)
    }

    // MARK: The storage key

    /// The primary storage key of the owner hierarchy, created from the fixed template.
    ///
    /// The template is `protectedstore_tpm_primary_template`. The key is the same every time on this TPM, until its
    /// owner hierarchy is cleared. The caller flushes ``PrimaryKey/handle``.
    struct PrimaryKey {
        var handle: ESYS_TR
        /// The key's TPM name (hash algorithm ‖ digest of its public area).
        ///
        /// It is what tells this TPM's key from another's.
        var name: [UInt8]
    }

    func createPrimary() throws(DeviceError) -> PrimaryKey {
        var template = TPM2B_PUBLIC()
        protectedstore_tpm_primary_template(&template)
        var sensitive = TPM2B_SENSITIVE_CREATE()
        var outsideInfo = TPM2B_DATA()
        var pcrs = TPML_PCR_SELECTION()
        var handle = Self.noHandle
        try Esys_CreatePrimary(
            context, ESYS_TR(ESYS_TR_RH_OWNER), ESYS_TR(ESYS_TR_PASSWORD), Self.noHandle, Self.noHandle,
            &sensitive, &template, &outsideInfo, &pcrs, &handle, nil, nil, nil, nil
        ).check("to create its primary storage key (owner hierarchy)")
        var namePointer: UnsafeMutablePointer<TPM2B_NAME>?
        defer { Esys_Free(namePointer) }
        do throws(DeviceError) {
            try Esys_TR_GetName(context, handle, &namePointer).check("to name its primary storage key")
        } catch {
            flush(handle)
            throw error
        }
        guard let namePointer else {
            flush(handle)
            throw DeviceError.tpmFailure("to name its primary storage key", response: "no name returned")
        }
        let name = withUnsafeBytes(of: namePointer.pointee.name) { Array($0.prefix(Int(namePointer.pointee.size))) }
        return PrimaryKey(handle: handle, name: name)
    }

    /// A salted HMAC session bound to nothing, salted with `primary`, encrypting the first parameter both ways.
    /// The caller flushes it.
    private func startEncryptedSession(salt primary: ESYS_TR) throws(DeviceError) -> ESYS_TR {
        var cipher = protectedstore_tpm_session_cipher()
        var session = Self.noHandle
        try Esys_StartAuthSession(
            context, primary, Self.noHandle, Self.noHandle, Self.noHandle, Self.noHandle,
            nil, TPM2_SE(TPM2_SE_HMAC), &cipher, TPMI_ALG_HASH(TPM2_ALG_SHA256), &session
        ).check("to start an encrypted session")
        let attributes = TPMA_SESSION(TPMA_SESSION_DECRYPT | TPMA_SESSION_ENCRYPT | TPMA_SESSION_CONTINUESESSION)
        do {
            try Esys_TRSess_SetAttributes(context, session, attributes, 0xff).check("to set its session's attributes")
        } catch {
            flush(session)
            throw error
        }
        return session
    }

    /// Flushes a transient object or a session.
    ///
    /// A failure is ignored (the resource manager flushes what a connection left when it closes).
    func flush(_ handle: ESYS_TR) {
        _ = Esys_FlushContext(context, handle)
    }

    // MARK: Sealing

    /// What sealing returns.
    ///
    /// This is the sealed object's public and private areas, marshalled (the private one is encrypted by the TPM under
    /// `primary`), and the primary key's name.
    struct Sealed {
        var primaryName: [UInt8]
        var publicArea: [UInt8]
        var privateArea: [UInt8]
    }

    /// What a sealed object is.
    ///
    /// It is the device key (empty authValue, `noDA`), or a keybag's passcode secret (authValue derived from the
    /// passcode, dictionary-attack protected).
    enum SealedObjectKind {
        case deviceKey
        case passcodeSecret

        /// What the object holds, for messages.
        var noun: String {
            switch self {
            case .deviceKey: "the device key"
            case .passcodeSecret: "the passcode secret"
            }
        }
    }

    /// Seals `secret` (at most 128 bytes) as a keyed-hash sealed-data object under the primary storage key.
    ///
    /// The secret — and the authValue — are copied into a `TPM2B_SENSITIVE_CREATE` allocated here and zeroed
    /// before it is freed; they reach the TPM encrypted by the session. tpm2-tss keeps its own copy of that input
    /// in the context (to resend the command), which it frees unzeroed: a second `Create`, of an empty sensitive
    /// area, overwrites it before this returns (``overwriteStoredSensitive(parent:session:)``).
    ///
    /// - Parameters:
    ///   - secret: what to seal.
    ///   - kind: ``SealedObjectKind/deviceKey`` (the `noDA` template, empty authValue) or
    ///     ``SealedObjectKind/passcodeSecret`` (dictionary-attack protected, authValue `authValue`).
    ///   - authValue: the object's authValue (at most 32 bytes), for a passcode secret.
    /// - Throws: ``Failure/device(_:)`` with `DeviceError.Code.tpmFailure`; ``Failure/keys(_:)`` when the secret
    ///   or the authValue is too large.
    func seal(_ secret: SecureBytes, kind: SealedObjectKind = .deviceKey, authValue: SecureBytes? = nil) throws(Failure) -> Sealed {
        let primary = try device { () throws(DeviceError) in try createPrimary() }
        defer { flush(primary.handle) }
        let session = try device { () throws(DeviceError) in try startEncryptedSession(salt: primary.handle) }
        defer { flush(session) }
        let sensitive = UnsafeMutablePointer<TPM2B_SENSITIVE_CREATE>.allocate(capacity: 1)
        sensitive.initialize(to: TPM2B_SENSITIVE_CREATE())
        defer {
            secureZero(UnsafeMutableRawBufferPointer(start: sensitive, count: MemoryLayout<TPM2B_SENSITIVE_CREATE>.size))
            sensitive.deallocate()
        }
        try keys {
            try secret.withUnsafeBytes { bytes in
                guard bytes.count <= MemoryLayout.size(ofValue: sensitive.pointee.sensitive.data.buffer) else {
                    throw SecureKeysError.invalidArgument("a sealed secret is at most 128 bytes")
                }
                withUnsafeMutableBytes(of: &sensitive.pointee.sensitive.data.buffer) { buffer in
                    buffer.copyMemory(from: bytes)
                }
                sensitive.pointee.sensitive.data.size = UInt16(bytes.count)
            }
            guard let authValue else { return }
            try authValue.withUnsafeBytes { bytes in
                guard bytes.count <= MemoryLayout.size(ofValue: sensitive.pointee.sensitive.userAuth.buffer), bytes.count <= 32 else {
                    throw SecureKeysError.invalidArgument("an authValue is at most 32 bytes (SHA-256)")
                }
                withUnsafeMutableBytes(of: &sensitive.pointee.sensitive.userAuth.buffer) { buffer in
                    buffer.copyMemory(from: bytes)
                }
                sensitive.pointee.sensitive.userAuth.size = UInt16(bytes.count)
            }
        }
        var template = TPM2B_PUBLIC()
        switch kind {
        case .deviceKey: protectedstore_tpm_sealed_template(&template)
        case .passcodeSecret: protectedstore_tpm_passcode_secret_template(&template)
        }
        var outsideInfo = TPM2B_DATA()
        var pcrs = TPML_PCR_SELECTION()
        var outPrivate: UnsafeMutablePointer<TPM2B_PRIVATE>?
        var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
        defer {
            Esys_Free(outPrivate)
            Esys_Free(outPublic)
        }
        return try device { () throws(DeviceError) in
            try Esys_Create(
                context, primary.handle, session, Self.noHandle, Self.noHandle, sensitive, &template,
                &outsideInfo, &pcrs, &outPrivate, &outPublic, nil, nil, nil
            ).check("to seal \(kind.noun)")
            overwriteStoredSensitive(parent: primary.handle, session: session)
            guard let outPrivate, let outPublic else { throw DeviceError.tpmFailure("to seal \(kind.noun)", response: "no object returned") }
            return Sealed(
                primaryName: primary.name, publicArea: try Self.marshal(outPublic.pointee, Tss2_MU_TPM2B_PUBLIC_Marshal),
                privateArea: try Self.marshal(outPrivate.pointee, Tss2_MU_TPM2B_PRIVATE_Marshal))
        }
    }

    /// Overwrites the copy of the last `Create`'s sensitive input that tpm2-tss keeps in the context.
    ///
    /// That copy is its stored input parameters, and the command buffer they were marshalled into, which
    /// `Esys_Finalize` frees without zeroing. A second `Create` under `parent`, of an empty sensitive area, is stored
    /// in the same place. Its object is discarded, and its result does not matter, as the input is stored before the
    /// command is sent.
    private func overwriteStoredSensitive(parent: ESYS_TR, session: ESYS_TR) {
        var empty = TPM2B_SENSITIVE_CREATE()
        var template = TPM2B_PUBLIC()
        protectedstore_tpm_sealed_template(&template)
        var outsideInfo = TPM2B_DATA()
        var pcrs = TPML_PCR_SELECTION()
        var outPrivate: UnsafeMutablePointer<TPM2B_PRIVATE>?
        var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
        _ = Esys_Create(
            context, parent, session, Self.noHandle, Self.noHandle, &empty, &template, &outsideInfo, &pcrs,
            &outPrivate, &outPublic, nil, nil, nil)
        Esys_Free(outPrivate)
        Esys_Free(outPublic)
    }

    /// Why an unseal did not give the key.
    enum UnsealFailure: Error {
        /// This TPM's primary storage key is not the one the object was sealed under.
        case otherPrimary
        /// The TPM refused to load the object under the right primary key.
        ///
        /// It is not what the TPM wrote.
        case rejected(String)
        /// The TPM refused the authValue (`TPM_RC_AUTH_FAIL`, `TPM_RC_BAD_AUTH`).
        ///
        /// For a passcode secret, this is a wrong passcode, which the TPM counted.
        case authorizationFailed
        /// The TPM is in dictionary-attack lockout (`TPM_RC_LOCKOUT`).
        ///
        /// It did not check the authValue.
        case lockout
    }

    /// Loads the sealed object under the primary storage key and unseals it, straight into `SecureBytes`.
    ///
    /// The `TPM2B_SENSITIVE_DATA` tpm2-tss returns is zeroed before it is freed, and a `GetRandom` then
    /// overwrites the part of the context's response buffer that held the decrypted key. An authValue is set on
    /// the loaded object only for the `Unseal`, then replaced by an empty one (tpm2-tss keeps it in the object's
    /// metadata, which it frees unzeroed).
    ///
    /// - Parameters:
    ///   - sealed: the object.
    ///   - kind: what it holds, for messages.
    ///   - authValue: its authValue (`nil`: empty).
    /// - Throws: ``Failure/unseal(_:)`` (the caller names the file); ``Failure/device(_:)`` with
    ///   `DeviceError.Code.tpmFailure`; ``Failure/keys(_:)`` when there is no guarded memory for the key.
    func unseal(_ sealed: Sealed, kind: SealedObjectKind = .deviceKey, authValue: SecureBytes? = nil) throws(Failure) -> SecureBytes {
        let primary = try device { () throws(DeviceError) in try createPrimary() }
        defer { flush(primary.handle) }
        guard KeyDerivation.constantTimeEquals(primary.name, sealed.primaryName) else { throw .unseal(.otherPrimary) }
        var publicArea: TPM2B_PUBLIC
        var privateArea: TPM2B_PRIVATE
        do throws(UnsealFailure) {
            publicArea = try Self.unmarshal(sealed.publicArea, TPM2B_PUBLIC(), Tss2_MU_TPM2B_PUBLIC_Unmarshal)
            privateArea = try Self.unmarshal(sealed.privateArea, TPM2B_PRIVATE(), Tss2_MU_TPM2B_PRIVATE_Unmarshal)
        } catch {
            throw .unseal(error)
        }
        let session = try device { () throws(DeviceError) in try startEncryptedSession(salt: primary.handle) }
        defer { flush(session) }
        var object = Self.noHandle
        try Esys_Load(
            context, primary.handle, session, Self.noHandle, Self.noHandle, &privateArea, &publicArea, &object
        ).check { (rc, response) -> Failure in
            // A format-1 response code of the TPM itself (TPM 2.0 Part 2, "Response Code Details") is about a
            // handle, a parameter or a session of this command — the object (integrity, a size, a value). A
            // warning (no object memory, retry) is about the TPM's state, not the file.
            if rc & 0xFFFF_0000 == 0, rc & 0x80 != 0 { return .unseal(.rejected(response)) }
            return .device(.tpmFailure("to load the sealed \(kind.noun.dropFirst(4))", response: response))
        }
        defer { flush(object) }
        if let authValue { try setAuthorization(of: object, to: authValue) }
        defer {
            if authValue != nil {
                clearAuthorization(of: object)
                overwriteSessionValue(session, primary: primary.handle, publicArea: &publicArea, privateArea: &privateArea)
            }
        }
        var data: UnsafeMutablePointer<TPM2B_SENSITIVE_DATA>?
        defer {
            if let data {
                secureZero(UnsafeMutableRawBufferPointer(start: data, count: MemoryLayout<TPM2B_SENSITIVE_DATA>.size))
            }
            Esys_Free(data)
        }
        try Esys_Unseal(context, object, session, Self.noHandle, Self.noHandle, &data).check { (rc, response) -> Failure in
            // Only an object with an authValue can fail on it; the device key's refusal stays a TPM failure.
            if authValue != nil, let failure = Self.authorizationFailure(rc) { return .unseal(failure) }
            return .device(.tpmFailure("to unseal \(kind.noun)", response: response))
        }
        scrubResponseBuffer()
        guard let data else { throw .device(.tpmFailure("to unseal \(kind.noun)", response: "no data returned")) }
        let count = min(Int(data.pointee.size), MemoryLayout.size(ofValue: data.pointee.buffer))
        return try keys {
            let key = try SecureBytes(count: count)
            try key.withUnsafeMutableBytes { target in
                withUnsafeBytes(of: &data.pointee.buffer) { source in
                    target.copyMemory(from: UnsafeRawBufferPointer(rebasing: source.prefix(count)))
                }
            }
            return key
        }
    }

    /// What a response code of the TPM itself says about an authorization.
    ///
    /// See TPM 2.0 Part 2, "Response Code Details". `TPM_RC_AUTH_FAIL` (format 1, 0x08E, with the session's number) or
    /// `TPM_RC_BAD_AUTH` (0x0A2) is a wrong authValue. `TPM_RC_LOCKOUT` (the warning 0x921) is the dictionary-attack
    /// lockout. `nil` otherwise.
    static func authorizationFailure(_ rc: TSS2_RC) -> UnsealFailure? {
        guard rc & 0xFFFF_0000 == 0 else { return nil }  // another layer's code (tpm2-tss's own)
        if rc & 0x80 != 0 {
            let code = rc & 0x3F
            return code == 0x0E || code == 0x22 ? .authorizationFailed : nil
        }
        return rc & 0xFFF == 0x921 ? .lockout : nil
    }

    /// Sets the authValue tpm2-tss uses for `object` in HMAC sessions.
    ///
    /// The `TPM2B_AUTH` passed is zeroed after.
    private func setAuthorization(of object: ESYS_TR, to authValue: SecureBytes) throws(Failure) {
        var auth = TPM2B_AUTH()
        defer { withUnsafeMutableBytes(of: &auth) { secureZero($0) } }
        try keys {
            try authValue.withUnsafeBytes { bytes in
                guard bytes.count <= MemoryLayout.size(ofValue: auth.buffer) else {
                    throw SecureKeysError.invalidArgument("an authValue is at most \(MemoryLayout.size(ofValue: auth.buffer)) bytes")
                }
                withUnsafeMutableBytes(of: &auth.buffer) { $0.copyMemory(from: bytes) }
                auth.size = UInt16(bytes.count)
            }
        }
        try device { () throws(DeviceError) in
            try Esys_TR_SetAuth(context, object, &auth).check("to set the authorization of a sealed object")
        }
    }

    /// Overwrites the copy of the last authValue tpm2-tss keeps in `session`.
    ///
    /// That copy is its session value, the session key followed by the authValue of the object the session last
    /// authorized, freed unzeroed when the session is flushed. One more command in the session authorizes `primary`
    /// with 32 random bytes set as its authValue. The primary key's authValue is empty, so the TPM refuses the command
    /// (`TPM_RC_BAD_AUTH`; the primary key is `noDA`, so the refusal is not counted) and does nothing. What matters is
    /// the session value it was computed with. The primary key's authValue is set back to empty after.
    private func overwriteSessionValue(
        _ session: ESYS_TR, primary: ESYS_TR, publicArea: inout TPM2B_PUBLIC, privateArea: inout TPM2B_PRIVATE
    ) {
        var filler = TPM2B_AUTH()
        filler.size = 32
        withUnsafeMutableBytes(of: &filler.buffer) { buffer in
            arc4random_buf(buffer.baseAddress!, 32)
        }
        guard Esys_TR_SetAuth(context, primary, &filler).isSuccess else { return }
        var object = Self.noHandle
        if Esys_Load(context, primary, session, Self.noHandle, Self.noHandle, &privateArea, &publicArea, &object).isSuccess {
            flush(object)  // not expected: the authValue is wrong
        }
        clearAuthorization(of: primary)
    }

    /// Replaces the authValue tpm2-tss keeps for `object` with an empty one.
    private func clearAuthorization(of object: ESYS_TR) {
        var empty = TPM2B_AUTH()
        _ = Esys_TR_SetAuth(context, object, &empty)
    }

    /// The TPM's dictionary-attack state.
    ///
    /// It holds `TPM2_PT_LOCKOUT_COUNTER`, `TPM2_PT_MAX_AUTH_FAIL`, `TPM2_PT_LOCKOUT_INTERVAL` (seconds) and
    /// `TPM2_PT_LOCKOUT_RECOVERY` (seconds).
    struct DictionaryAttackState: Equatable {
        var counter: UInt32
        var maximum: UInt32
        var interval: UInt32
        var recovery: UInt32
    }

    /// Reads ``DictionaryAttackState`` (`TPM2_GetCapability` of the variable properties from
    /// `TPM2_PT_LOCKOUT_COUNTER`, `PT_VAR + 14`).
    ///
    /// - Throws: `DeviceError.Code.tpmFailure`.
    func dictionaryAttackState() throws(DeviceError) -> DictionaryAttackState {
        let properties = try tpmProperties(
            from: 0x20E /* TPM2_PT_LOCKOUT_COUNTER (PT_VAR + 14), a macro Swift cannot import */, count: 4
        ) { DeviceError.tpmFailure("to report its dictionary-attack state", response: $0) }
        guard let properties else { throw DeviceError.tpmFailure("to report its dictionary-attack state", response: "no data returned") }
        var values: [UInt32: UInt32] = [:]
        for property in properties { values[property.property] = property.value }
        guard let counter = values[0x20E], let maximum = values[0x20F], let interval = values[0x210], let recovery = values[0x211] else {
            throw DeviceError.tpmFailure("to report its dictionary-attack state", response: "a lockout property is missing")
        }
        return DictionaryAttackState(counter: counter, maximum: maximum, interval: interval, recovery: recovery)
    }

    /// Reads up to `count` TPM properties from the tag `first` on.
    ///
    /// It uses `TPM2_GetCapability` of `TPM2_CAP_TPM_PROPERTIES`, and returns the properties in the order the TPM
    /// returned them (`nil` when it returned no data).
    ///
    /// - Throws: what `failure` makes of tpm2-tss's text when the TPM does not answer.
    private func tpmProperties(
        from first: UInt32, count: UInt32, orThrow failure: (String) -> DeviceError
    ) throws(DeviceError) -> [TPMS_TAGGED_PROPERTY]? {
        var data: UnsafeMutablePointer<TPMS_CAPABILITY_DATA>?
        defer { Esys_Free(data) }
        try Esys_GetCapability(
            context, Self.noHandle, Self.noHandle, Self.noHandle, TPM2_CAP(TPM2_CAP_TPM_PROPERTIES), first, count, nil, &data
        ).check(orThrow: failure)
        guard let data else { return nil }
        let list = data.pointee.data.tpmProperties
        let properties = withUnsafeBytes(of: list.tpmProperty) { raw in
            Array(raw.bindMemory(to: TPMS_TAGGED_PROPERTY.self).prefix(Int(list.count)))
        }
        return properties
    }

    /// Overwrites the response buffer tpm2-tss keeps in the context.
    ///
    /// tpm2-tss decrypts a response parameter in place, in the context's one command/response buffer, and keeps that
    /// buffer until the context is finalized (freed, not zeroed). The next command's response overwrites it. 64 random
    /// bytes cover the header, the parameter size and a 32-byte key behind them.
    private func scrubResponseBuffer() {
        var random: UnsafeMutablePointer<TPM2B_DIGEST>?
        _ = Esys_GetRandom(context, Self.noHandle, Self.noHandle, Self.noHandle, 48, &random)
        Esys_Free(random)
    }

    // MARK: Marshalling

    private static func marshal<T>(
        _ value: T, _ function: (UnsafePointer<T>?, UnsafeMutablePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?) -> TSS2_RC
    ) throws(DeviceError) -> [UInt8] {
        var value = value
        var buffer = [UInt8](repeating: 0, count: MemoryLayout<T>.size + 16)
        var offset = 0
        let rc = buffer.withUnsafeMutableBufferPointer { function(&value, $0.baseAddress, $0.count, &offset) }
        try rc.check("to marshal a sealed object")
        return Array(buffer.prefix(offset))
    }

    private static func unmarshal<T>(
        _ bytes: [UInt8], _ empty: T,
        _ function: (UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<Int>?, UnsafeMutablePointer<T>?) -> TSS2_RC
    ) throws(UnsealFailure) -> T {
        var value = empty
        var offset = 0
        try bytes.withUnsafeBufferPointer { function($0.baseAddress, $0.count, &offset, &value) }.check {
            UnsealFailure.rejected("its \(T.self) does not parse: \($0)")
        }
        guard offset == bytes.count else { throw UnsealFailure.rejected("its \(T.self) does not parse: trailing bytes") }
        return value
    }
}

extension TSS2_RC {
    /// Whether this is `TSS2_RC_SUCCESS`.
    ///
    /// For the calls whose failure is ignored (a best-effort overwrite).
    fileprivate var isSuccess: Bool { self == TSS2_RC_SUCCESS }

    /// tpm2-tss's text for this response code (`tpm:error(2.0): integrity check failed`).
    fileprivate var text: String { String(cString: Tss2_RC_Decode(self)) }

    /// Throws what `failure` makes of this response code and its text unless it is success.
    ///
    /// This is the one check of a tpm2-tss response code.
    fileprivate func check<Failure: Error>(orThrow failure: (TSS2_RC, String) -> Failure) throws(Failure) {
        guard isSuccess else { throw failure(self, text) }
    }

    /// Throws what `failure` makes of tpm2-tss's text unless this response code is success.
    fileprivate func check<Failure: Error>(orThrow failure: (String) -> Failure) throws(Failure) {
        try check { (_, text) in failure(text) }
    }

    /// Throws `DeviceError.Code.tpmFailure` naming `command` (`"to seal the device key"`) unless this response
    /// code is success.
    fileprivate func check(_ command: String) throws(DeviceError) {
        try check { DeviceError.tpmFailure(command, response: $0) }
    }
}
