import TestSupport
import Testing

@testable import SecureKeys

@Suite("Primitives: Argon2id, key wrap, sealed box")
struct PrimitivesTests {
    let salt = [UInt8](repeating: 7, count: 16)

    @Test("the default Argon2id cost is libsodium's INTERACTIVE level")
    func defaultCostIsInteractive() {
        #expect(PasscodeKDF.default.opsLimit == 2)
        #expect(PasscodeKDF.default.memLimit == 64 << 20)
        #expect(PasscodeKDF.default.isValid)
        #expect(PasscodeKDF.minimal.isValid)
        #expect(!PasscodeKDF(opsLimit: 0, memLimit: 8192).isValid)
        #expect(!PasscodeKDF(opsLimit: 1, memLimit: 2 << 30).isValid)
    }

    @Test("Argon2id gives the same key for the same passcode and salt, another for another salt or passcode")
    func passcodeKeyIsDeterministic() throws {
        let kdf = PasscodeKDF.minimal
        let one = try kdf.deriveKey(from: try SecureBytes(utf8: "1234"), salt: salt)
        let again = try kdf.deriveKey(from: try SecureBytes(utf8: "1234"), salt: salt)
        let otherSalt = try kdf.deriveKey(from: try SecureBytes(utf8: "1234"), salt: [UInt8](repeating: 8, count: 16))
        let otherPasscode = try kdf.deriveKey(from: try SecureBytes(utf8: "1235"), salt: salt)
        #expect(one.count == 32)
        #expect(one.constantTimeEquals(again))
        #expect(!one.constantTimeEquals(otherSalt))
        #expect(!one.constantTimeEquals(otherPasscode))
    }

    @Test("Argon2id rejects a salt of the wrong length with invalid-argument")
    func passcodeKDFRejectsBadSalt() {
        #expect {
            _ = try PasscodeKDF.minimal.deriveKey(from: try SecureBytes(utf8: "1234"), salt: [1, 2, 3])
        } throws: { ($0 as? SecureKeysError)?.code == .invalidArgument }
    }

    @Test("a wrapped key unwraps with the same key and associated data, and with nothing else")
    func keyWrapRoundTripAndAuthentication() throws {
        let key = try SecureBytes.random(count: 32)
        let secret = try SecureBytes.random(count: 32)
        let header: [UInt8] = Array("header".utf8)
        let wrapped = try KeyWrap.wrap(secret, with: key, associatedData: header)
        #expect(wrapped.count == KeyWrap.wrappedLength(secretLength: 32))

        let unwrapped = try #require(try KeyWrap.unwrap(wrapped[...], with: key, associatedData: header))
        #expect(unwrapped.constantTimeEquals(secret))

        #expect(try KeyWrap.unwrap(wrapped[...], with: try SecureBytes.random(count: 32), associatedData: header) == nil)
        #expect(try KeyWrap.unwrap(wrapped[...], with: key, associatedData: Array("other!".utf8)) == nil)
        for index in [0, 23, 24, 40, wrapped.count - 1] {
            var tampered = wrapped
            tampered[index] ^= 0x01
            #expect(try KeyWrap.unwrap(tampered[...], with: key, associatedData: header) == nil, "byte \(index)")
        }
        #expect(try KeyWrap.unwrap(wrapped.dropLast(), with: key, associatedData: header) == nil)
    }

    @Test("a sealed box opens with its key pair only, and altered bytes are rejected")
    func sealedBoxRoundTrip() throws {
        let pair = try SealedBox.makeKeyPair()
        #expect(try SealedBox.publicKey(for: pair.privateKey) == pair.publicKey)
        let message = Array("location 48.85,2.35".utf8)
        let sealed = try message.withUnsafeBytes { try SealedBox.seal($0, to: pair.publicKey) }
        #expect(sealed.count == message.count + SealedBox.overhead)
        #expect(!sealed.hex.contains(message.hex))

        let opened = try #require(try SealedBox.open(sealed[...], publicKey: pair.publicKey, privateKey: pair.privateKey))
        #expect(try opened.withUnsafeBytes { Array($0) } == message)

        let stranger = try SealedBox.makeKeyPair()
        #expect(try SealedBox.open(sealed[...], publicKey: stranger.publicKey, privateKey: stranger.privateKey) == nil)
        var tampered = sealed
        tampered[sealed.count / 2] ^= 0x80
        #expect(try SealedBox.open(tampered[...], publicKey: pair.publicKey, privateKey: pair.privateKey) == nil)
        #expect(throws: SecureKeysError.self) { try message.withUnsafeBytes { try SealedBox.seal($0, to: [1, 2, 3]) } }
    }
}
