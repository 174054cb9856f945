import ArgumentParser
import EncryptedSQLite
import Foundation
import SecureKeys

extension ProtectedStoreCommand {
    /// A self-contained walkthrough on a temporary directory that is removed afterwards.
    struct Demo: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Walk through the key hierarchy and the encrypted store on a temporary directory.")

        func run() throws {
            let directory = NSTemporaryDirectory() + "protected-store-demo-\(UUID().uuidString)"
            try SecureFile.createDirectory(at: directory)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            var step = 0
            func say(_ text: String) {
                step += 1
                print(String(format: "%2d  ", step) + text)
            }

            print("protected-store demo — state in \(directory)\n")
            let deviceKey = SecureBytes.random(count: 32)
            let passcode = SecureBytes(utf8: "123456")
            let clock = ContinuousClock()
            let started = clock.now
            let (keybag, keys) = try Keybag.create(passcode: passcode, deviceKey: deviceKey)
            try keybag.write(to: directory + "/device.keybag")
            say("set up a device: keybag with 4 class keys, Argon2id (ops \(keybag.kdf.opsLimit), \(keybag.kdf.memLimit >> 20) MiB) took \(clock.now - started)")

            let storePath = directory + "/store.sqlite"
            let storeKey = try StoreKeyFile.create(
                at: storePath + ".key", forStoreAt: storePath, protectionClass: .complete, classKey: keys[.complete]!)
            say("created a store key wrapped by class \(ProtectionClass.complete.name): \(storeKey)")

            let database = try Database(path: storePath, key: storeKey)
            try database.execute("CREATE TABLE notes(key TEXT PRIMARY KEY, value TEXT)")
            try database.execute("INSERT INTO notes VALUES (?, ?)", ["greeting", "hello from a locked phone"])
            try database.checkpoint()
            database.close()
            say("wrote a row through SQLCipher \(database.cipherVersion), raw key, 4096-byte pages, WAL")

            for name in try FileManager.default.contentsOfDirectory(atPath: directory).sorted() {
                let bytes = FileManager.default.contents(atPath: directory + "/" + name) ?? Data()
                let leaks = bytes.range(of: Data("hello from a locked phone".utf8)) != nil
                    || bytes.range(of: Data("SQLite format 3".utf8)) != nil
                say("\(name.padding(toLength: 22, withPad: " ", startingAt: 0)) \(String(bytes.count).leftPad(6)) bytes  plaintext: \(leaks ? "FOUND" : "none")")
            }

            do {
                _ = try keybag.unlock(passcode: SecureBytes(utf8: "000000"), deviceKey: deviceKey)
            } catch let error as SecureKeysError {
                say("unlock with a wrong passcode → \(error.code)")
            }
            do {
                _ = try Database(path: storePath, key: SecureBytes.random(count: 32))
            } catch let error as SQLiteError {
                say("open with a wrong key → \(error.code); the file is untouched")
            }
            keys.wipeAll()
            storeKey.wipe()
            say("class keys wiped: complete key usable? \(keys[.complete]!.isWiped ? "no" : "yes")")

            let reopened = try Keybag.load(from: directory + "/device.keybag", deviceKey: deviceKey)
                .unlock(passcode: passcode, deviceKey: deviceKey)
            let keyFile = try StoreKeyFile.load(from: storePath + ".key")
            let store = try Database(path: storePath, key: try keyFile.unwrap(with: reopened[.complete]!))
            let value = try store.scalar("SELECT value FROM notes WHERE key = ?", ["greeting"])?.string ?? "?"
            say("unlock with the passcode, unwrap the store key, read back: \"\(value)\"")
        }
    }
}

extension String {
    func leftPad(_ width: Int) -> String { String(repeating: " ", count: max(0, width - count)) + self }
}
