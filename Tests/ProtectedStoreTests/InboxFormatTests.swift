import Foundation
import SecureKeys
import TestSupport
import Testing

@_spi(Testing) @testable import ProtectedStore

/// An app-defined change, as the v2 vector holds one.
struct VisitLogged: InboxChange, Equatable {
    static let kind = "visit-logged"
    static let schemaVersion = 2
    var place: String
    var minutes: Int
}

/// Inbox payloads: version 1 (key-value only, still merged) and version 2 (a kind and a schema version per
/// record), pinned by keys/vectors/inbox-v1.json and inbox-v2.json.
@Suite("Inbox record payloads")
struct InboxFormatTests {
    static let vectors = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("keys/vectors")
    static let recording = ProcessInfo.processInfo.environment["PROTECTEDSTORE_RECORD_VECTORS"] == "1"

    struct V1Vector: Codable {
        var storeKey: String
        var keyFile: String
        var record: String
        var recordID: String
        var recordKey: String
        var recordValue: String
    }

    struct V2Vector: Codable {
        struct Record: Codable {
            var id: String
            var kind: String
            var schemaVersion: Int
            var record: String
            var description: String
        }
        var description: String
        var storeKey: String
        var keyFile: String
        var records: [Record]
    }

    static func open(_ recordHex: String, keyFileHex: String, storeKeyHex: String) throws -> InboxEntry {
        let storeKey = try [UInt8](hex: storeKeyHex).withUnsafeBytes { try SecureBytes(copying: $0) }
        let file = try InboxKeyFile(bytes: [UInt8](hex: keyFileHex))
        let privateKey = try file.unwrapPrivateKey(storeKey: storeKey)
        let (frames, problems) = InboxRecord.scan([UInt8](hex: recordHex))
        #expect(problems.isEmpty)
        guard case .entry(let entry, _) = try LockedInbox.openRecord(
            try #require(frames.first).sealed, publicKey: file.publicKey, privateKey: privateKey)
        else { throw StoreError(code: .inboxRecordMalformed, message: "the vector's record does not open") }
        return entry
    }

    @Test("a version-1 record (written before kinds existed) still opens as a put")
    func version1() throws {
        let vector = try JSONDecoder().decode(V1Vector.self, from: Data(contentsOf: Self.vectors.appendingPathComponent("inbox-v1.json")))
        let entry = try Self.open(vector.record, keyFileHex: vector.keyFile, storeKeyHex: vector.storeKey)
        #expect(entry.id.description == vector.recordID)
        #expect(entry.kind == "put" && entry.schemaVersion == 1 && entry.sequence == nil)
        #expect(try entry.change == .put(key: vector.recordKey, value: vector.recordValue))
    }

    @Test("version-2 records: a put, a delete and an app-defined change open to their stated kind, schema and content")
    func version2() throws {
        let url = Self.vectors.appendingPathComponent("inbox-v2.json")
        if Self.recording {
            let v1 = try JSONDecoder().decode(V1Vector.self, from: Data(contentsOf: Self.vectors.appendingPathComponent("inbox-v1.json")))
            let file = try InboxKeyFile(bytes: [UInt8](hex: v1.keyFile))
            func record(_ payload: SecureBytes) throws -> String { try InboxRecord.seal(payload, to: file.publicKey).hex }
            let ids = (1...3).map { n in InboxEntry.ID(bytes: Array(repeating: UInt8(n), count: 16)) }
            let vector = V2Vector(
                description: "Inbox records v2, sealed to the inbox key file of inbox-v1.json (TEST-ONLY store key). A sealed box draws its ephemeral key pair from libsodium, so records open but are not rebuilt byte for byte.",
                storeKey: v1.storeKey, keyFile: v1.keyFile,
                records: [
                    .init(id: ids[0].description, kind: "put", schemaVersion: 1,
                          record: try record(try InboxEntry.payload(for: .put(key: "location", value: "48.85,2.35"), id: ids[0])),
                          description: "put location = 48.85,2.35"),
                    .init(id: ids[1].description, kind: "delete", schemaVersion: 1,
                          record: try record(try InboxEntry.payload(for: .delete(key: "location"), id: ids[1])),
                          description: "delete location"),
                    .init(id: ids[2].description, kind: "visit-logged", schemaVersion: 2,
                          record: try record(try InboxEntry.payload(for: VisitLogged(place: "café", minutes: 42), id: ids[2])),
                          description: "app-defined change visit-logged v2: {\"minutes\":42,\"place\":\"café\"}"),
                ])
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try (encoder.encode(vector) + Data("\n".utf8)).write(to: url)
        }
        let vector = try JSONDecoder().decode(V2Vector.self, from: Data(contentsOf: url))
        let entries = try vector.records.map { try Self.open($0.record, keyFileHex: vector.keyFile, storeKeyHex: vector.storeKey) }
        #expect(entries.map(\.id.description) == vector.records.map(\.id))
        #expect(entries.map(\.kind) == ["put", "delete", "visit-logged"])
        #expect(entries.map(\.schemaVersion) == [1, 1, 2])
        #expect(entries.allSatisfy { $0.sequence == nil })
        #expect(try entries[0].change == .put(key: "location", value: "48.85,2.35"))
        #expect(try entries[1].change == .delete(key: "location"))
        #expect(try entries[2].change == nil)
        #expect(try entries[2].decode(VisitLogged.self) == VisitLogged(place: "café", minutes: 42))
    }

    struct V3Vector: Codable {
        struct Record: Codable {
            var id: String
            var sequence: UInt64
            var kind: String
            var schemaVersion: Int
            var record: String
            var description: String
        }
        var description: String
        var storeKey: String
        var keyFile: String
        var records: [Record]
    }

    @Test("version-3 records carry their sequence number (replay protection) beside a version-2 payload's fields")
    func version3() throws {
        let url = Self.vectors.appendingPathComponent("inbox-v3.json")
        if Self.recording {
            let v1 = try JSONDecoder().decode(V1Vector.self, from: Data(contentsOf: Self.vectors.appendingPathComponent("inbox-v1.json")))
            let file = try InboxKeyFile(bytes: [UInt8](hex: v1.keyFile))
            func record(_ payload: SecureBytes) throws -> String { try InboxRecord.seal(payload, to: file.publicKey).hex }
            let ids = (4...5).map { n in InboxEntry.ID(bytes: Array(repeating: UInt8(n), count: 16)) }
            let vector = V3Vector(
                description: "Inbox records v3 (v2 plus a u64 sequence number after the id), sealed to the inbox key file of inbox-v1.json (TEST-ONLY store key). A sealed box draws its ephemeral key pair from libsodium, so records open but are not rebuilt byte for byte.",
                storeKey: v1.storeKey, keyFile: v1.keyFile,
                records: [
                    .init(id: ids[0].description, sequence: 1, kind: "put", schemaVersion: 1,
                          record: try record(try InboxEntry.payload(for: .put(key: "location", value: "48.85,2.35"), id: ids[0], sequence: 1)),
                          description: "put location = 48.85,2.35, sequence 1"),
                    .init(id: ids[1].description, sequence: 1 << 40, kind: "visit-logged", schemaVersion: 2,
                          record: try record(try InboxEntry.payload(for: VisitLogged(place: "café", minutes: 42), id: ids[1], sequence: 1 << 40)),
                          description: "app-defined change visit-logged v2: {\"minutes\":42,\"place\":\"café\"}, sequence 2^40"),
                ])
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try (encoder.encode(vector) + Data("\n".utf8)).write(to: url)
        }
        let vector = try JSONDecoder().decode(V3Vector.self, from: Data(contentsOf: url))
        let entries = try vector.records.map { try Self.open($0.record, keyFileHex: vector.keyFile, storeKeyHex: vector.storeKey) }
        #expect(entries.map(\.id.description) == vector.records.map(\.id))
        #expect(entries.map(\.sequence) == [1, 1 << 40])
        #expect(entries.map(\.kind) == ["put", "visit-logged"])
        #expect(try entries[0].change == .put(key: "location", value: "48.85,2.35"))
        #expect(try entries[1].decode(VisitLogged.self) == VisitLogged(place: "café", minutes: 42))
    }

    @Test("a payload at the limit is sealed; one byte more is refused with inbox-record-too-large, naming the limit")
    func payloadLimit() throws {
        let id = InboxEntry.ID(bytes: Array(repeating: 7, count: 16))
        let overhead = 1 + 16 + 1 + 3 + 4 + 4 + 4 + 3 + 4  // version, id, kind "put", schema, body length, key "key", value length
        let fits = String(repeating: "v", count: InboxRecord.maximumPayloadLength - overhead)
        let payload = try InboxEntry.payload(for: .put(key: "key", value: fits), id: id)
        #expect(payload.count == InboxRecord.maximumPayloadLength)
        let error = #expect(throws: StoreError.self) { try InboxEntry.payload(for: .put(key: "key", value: fits + "v"), id: id) }
        #expect(error?.code == .inboxRecordTooLarge)
        #expect(error?.message.contains("4194304 bytes") == true)
    }
}

/// A change whose kind is the built-in `put`'s.
private struct Impostor: InboxChange {
    static let kind = "put"
    static let schemaVersion = 1
}

@Suite("Inbox record kinds")
struct InboxKindTests {
    @Test("a kind that is empty, over 255 bytes, or a built-in one for an app's change is refused with invalid-argument")
    func badKindsAreRefused() throws {
        let id = InboxEntry.ID(bytes: Array(repeating: 1, count: 16))
        for kind in ["", String(repeating: "k", count: 256)] {
            let error = #expect(throws: StoreError.self) { try InboxEntry.payload(id: id, kind: kind, schemaVersion: 1, body: []) }
            #expect(error?.code == .invalidArgument, "kind of \(kind.utf8.count) bytes")
        }
        let impostor = #expect(throws: StoreError.self) { try InboxEntry.payload(for: Impostor(), id: id) }
        #expect(impostor?.code == .invalidArgument)
        #expect(try InboxEntry.payload(id: id, kind: String(repeating: "k", count: 255), schemaVersion: 1, body: []).count > 255)
    }
}
