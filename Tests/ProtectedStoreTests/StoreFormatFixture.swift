import TestSupport
import EncryptedSQLite
import Foundation
import ProtectedData
import SecureKeys
import Testing

@_spi(Testing) @testable import ProtectedStore

/// `keys/vectors/store-format-1/`: a state directory written by `main` at ae3bb5b, before store formats were
/// recorded (its store key file is version 1), with its test-only device key and keybag. Its README says how
/// it was made and what it holds.
struct StoreFormatFixture {
    /// The fixture's test-only passcode (`--fast-kdf`: Argon2id at its minimal cost).
    static let passcode = "fixture-only-0000"
    /// The rows of `entries` in the store file and its write-ahead log, as `main` left them.
    static let rowsOnDisk: [String: String] = [
        "alpha": "first value", "beta": "naïve café ☕", "gamma": "line one\nline two", "epsilon": "5",
        "zeta": "sealed while locked, merged at the unlock", "eta": "written just before the crash",
    ]
    /// The rows after the next attach, which merges the record still sealed in the inbox.
    static let rowsAfterAttach = rowsOnDisk.merging(["theta": "sealed after the crash, merged at the next attach"]) { $1 }

    let directory = TemporaryDirectory()
    var storePath: String { directory.file("app.sqlite") }

    /// Copies the fixture into a fresh private directory (git keeps no modes: folders 0700, files 0600).
    init() throws {
        let source = SQLCipher4Oracle.packageRoot + "/keys/vectors/store-format-1"
        let files = FileManager.default
        for name in try files.subpathsOfDirectory(atPath: source).sorted() where name != "README.md" {
            var isFolder: ObjCBool = false
            _ = files.fileExists(atPath: source + "/" + name, isDirectory: &isFolder)
            let target = directory.file(name)
            if isFolder.boolValue {
                try files.createDirectory(atPath: target, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } else {
                try files.copyItem(atPath: source + "/" + name, toPath: target)
                try files.setAttributes([.posixPermissions: 0o600], ofItemAtPath: target)
            }
        }
    }

    /// The fixture's device, booted and unlocked.
    func unlockedDevice() throws -> KeybagDevice {
        let device = try KeybagDevice(bootingFrom: directory.path)
        try device.unlock(passcode: SecureBytes(utf8: Self.passcode))
        return device
    }

    /// The store key in hex, for the SQLCipher 4 oracle only (a test-only key).
    func storeKeyHex(_ device: KeybagDevice) throws -> String {
        guard case .available(let key) = try device.lookUpStoreKey(forStoreAt: storePath) else {
            throw StoreError(code: .protectedDataUnavailable, message: "the fixture's store key is not available")
        }
        defer { key.wipe() }
        return try key.withUnsafeBytes { Array($0) }.hex
    }
}

/// Every table of `database` and its rows, as the SQLCipher 4 oracle reports them (cells in the oracle's
/// form, rows sorted: the two engines need not scan in the same order).
func tablesAndRows(of database: Database) throws -> [String: [[String]]] {
    var tables: [String: [[String]]] = [:]
    for name in try database.rows("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").compactMap({ $0[0].string }) {
        let rows = try database.rows("SELECT * FROM \"\(name.replacingOccurrences(of: "\"", with: "\"\""))\"")
        tables[name] = rows.map { row in
            (0..<row.columnNames.count).map { index in
                switch row[index] {
                case .null: "null"
                case .integer(let value): "integer:\(value)"
                case .real(let value): "real:\(value)"
                case .text(let value): "text:\(value)"
                case .blob(let value): "blob:\(value.hex)"
                }
            }
        }.sorted { $0.lexicographicallyPrecedes($1) }
    }
    return tables
}

/// The oracle's reading in the same form.
func tablesAndRows(of reading: SQLCipher4Oracle.Reading) -> [String: [[String]]] {
    reading.tables.mapValues { rows in
        rows.map { $0.map(\.description) }.sorted { $0.lexicographicallyPrecedes($1) }
    }
}
