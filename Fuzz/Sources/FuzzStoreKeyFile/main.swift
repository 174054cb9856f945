import FuzzDriver
import Glibc
import SecureKeys

// Any bytes as a store key file: parsing succeeds or throws; when it parses, unwrapping with a fixed class
// key succeeds or throws. A crash, a hang, a leak or an AddressSanitizer report is a finding.
let classKey = try! SecureBytes.random(count: 32, using: SeededRandom(seed: 1))
plantSeeds([
    try! StoreKeyFile.make(protectionClass: .complete, classKey: classKey, random: SeededRandom(seed: 10)).file.bytes,
    try! StoreKeyFile.make(protectionClass: .none, classKey: classKey, random: SeededRandom(seed: 11)).file.bytes,
])

exit(runFuzzer { data, count in
    guard let file = try? StoreKeyFile(bytes: fuzzInput(data, count)) else { return 0 }
    (try? file.unwrap(with: classKey))?.wipe()
    return 0
})
