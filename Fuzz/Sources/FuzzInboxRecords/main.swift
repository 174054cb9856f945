import FuzzDriver
import Glibc
@_spi(Testing) import ProtectedStore
import SecureKeys

// Any bytes as a locked inbox: the scan (magic, length, checksum per frame; torn tails) finds frames and
// problems without crashing, and opening each frame with a fixed key pair succeeds or throws. The same bytes
// are read as a record's payload (the sealed box keeps mutations from reaching it through a frame) and as an
// inbox key file unwrapped with a fixed store key.
struct Starred: InboxChange {
    static let kind = "starred"
    static let schemaVersion = 1
    var note: String
}

let storeKey = try! SecureBytes.random(count: 32, using: SeededRandom(seed: 3))
let (keyFile, privateKey) = try! InboxKeyFile.make(storeKey: storeKey, random: SeededRandom(seed: 4))
let payloads = [InboxEntry.Change.put(key: "k", value: "v"), .delete(key: "k"), .put(key: "é", value: String(repeating: "x", count: 300))]
    .enumerated().map { try! InboxEntry.payload(for: $0.element, id: InboxEntry.ID(bytes: Array(repeating: UInt8($0.offset), count: 16))) }
let records = payloads.map { try! InboxRecord.seal($0, to: keyFile.publicKey) }
plantSeeds([keyFile.bytes, records.flatMap { $0 }] + records + payloads.map { try! $0.withUnsafeBytes { Array($0) } })

func exercise(_ entry: InboxEntry?) {
    _ = try? entry?.change
    _ = try? entry?.decode(Starred.self)
}

exit(runFuzzer { data, count in
    let bytes = fuzzInput(data, count)
    let (frames, _) = InboxRecord.scan(bytes)
    for frame in frames {
        if let payload = try? InboxRecord.open(frame, publicKey: keyFile.publicKey, privateKey: privateKey) {
            exercise(InboxEntry.decode(payload: payload))
        }
    }
    exercise(InboxEntry.decode(payload: try! bytes.withUnsafeBytes { try SecureBytes(copying: $0) }))
    if let file = try? InboxKeyFile(bytes: bytes) {
        (try? file.unwrapPrivateKey(storeKey: storeKey))?.wipe()
    }
    return 0
})
