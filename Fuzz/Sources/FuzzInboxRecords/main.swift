import FuzzDriver
import Glibc
import SecureKeys

// Any bytes as a locked inbox: the scan (magic, length, checksum per frame; torn tails) finds frames and
// problems without crashing, and opening each frame with a fixed key pair succeeds or throws. The same
// bytes are also read as an inbox key file and unwrapped with a fixed store key.
let storeKey = SecureBytes.random(count: 32, using: SeededRandom(seed: 3))
let (keyFile, privateKey) = try! InboxKeyFile.make(storeKey: storeKey, random: SeededRandom(seed: 4))
let records = [InboxEntry.Change.put(key: "k", value: "v"), .delete(key: "k"), .put(key: "é", value: String(repeating: "x", count: 300))]
    .enumerated().map { try! InboxRecord.seal(InboxEntry(id: Array(repeating: UInt8($0.offset), count: InboxRecord.idLength), change: $0.element), to: keyFile.publicKey) }
plantSeeds([keyFile.bytes, records.flatMap { $0 }] + records)

exit(runFuzzer { data, count in
    let bytes = fuzzInput(data, count)
    let (frames, _) = InboxRecord.scan(bytes)
    for frame in frames {
        _ = try? InboxRecord.open(frame, publicKey: keyFile.publicKey, privateKey: privateKey)
    }
    if let file = try? InboxKeyFile(bytes: bytes) {
        (try? file.unwrapPrivateKey(storeKey: storeKey))?.wipe()
    }
    return 0
})
