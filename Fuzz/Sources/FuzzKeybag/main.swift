import FuzzDriver
import Glibc
import SecureKeys

// Any bytes as a keybag: parsing (magic, version, length, KDF parameters in range, entries, the device-keyed
// tag) succeeds or throws. Past the tag it would need this fuzzer's device key, so the seed corpus holds
// keybags made with it (see Corpus/README.md); those reach unlock, which must also fail cleanly.
let deviceKey = try! SecureBytes.random(count: 32, using: SeededRandom(seed: 2))
let passcode = try! SecureBytes(utf8: "1234")
plantSeeds([
    try! Keybag.create(passcode: passcode, deviceKey: deviceKey, kdf: .minimal, random: SeededRandom(seed: 20)).keybag.bytes,
    try! Keybag.create(passcode: SecureBytes(utf8: "other"), deviceKey: deviceKey, kdf: .minimal, random: SeededRandom(seed: 21)).keybag.bytes,
])

exit(runFuzzer { data, count in
    guard let keybag = try? Keybag(bytes: fuzzInput(data, count), deviceKey: deviceKey) else { return 0 }
    // Only the minimal Argon2id cost, or each input would take 80 ms: a fuzzed cost is refused as too slow.
    guard keybag.kdf == .minimal else { return 0 }
    (try? keybag.unlock(passcode: passcode, deviceKey: deviceKey))?.wipeAll()
    return 0
})
