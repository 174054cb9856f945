import Foundation

/// Whether a TPM 2.0 answers at a TCTI.
///
/// It says where the device key can be sealed, or why the file store remains.
public enum TPMPresence: Sendable, Hashable, CustomStringConvertible {
    /// A TPM 2.0 answered, made by `manufacturer`.
    ///
    /// The manufacturer is up to four letters from the TPM (`IBM` for swtpm).
    case present(tcti: String, manufacturer: String)
    /// None answered, and `reason` says why (no device node, no permission, nothing listening).
    case absent(tcti: String, reason: String)

    /// Asks the TPM at `tcti` for its manufacturer.
    ///
    /// - Parameter tcti: the TCTI configuration (`TPMDeviceKeyStore.defaultTCTI` on a real machine).
    public static func detect(tcti: String = TPMDeviceKeyStore.defaultTCTI) -> TPMPresence {
        do {
            let connection = try TPMConnection(tcti: tcti)
            return .present(tcti: tcti, manufacturer: try connection.manufacturer())
        } catch {
            return .absent(tcti: tcti, reason: "\(error)")
        }
    }

    /// Whether a TPM answered.
    public var isPresent: Bool {
        if case .present = self { return true }
        return false
    }

    /// `present at device:/dev/tpmrm0 (IBM)` or `absent at …: reason`.
    public var description: String {
        switch self {
        case .present(let tcti, let manufacturer):
            "present at \(tcti) (manufacturer \(manufacturer))"
        case .absent(let tcti, let reason): "absent at \(tcti): \(reason)"
        }
    }
}
