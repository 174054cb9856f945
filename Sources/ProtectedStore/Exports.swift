// What an app names through `import ProtectedStore` alone: the one error type it catches (`StoreError`, the
// same inside a `write { }` closure and outside it), the SQL layer its closures use, the protection
// classes, the inbox's entries, the protocols a source of keys implements, and what a backup and a restore take
// and say (the recovery key and phrase, a store's format, the key file a migrating key source writes). The simulated device is not
// among them: tests import `ProtectedStoreTesting` (or `ProtectedData`) for it.
@_exported public import StoreErrors
@_exported public import EncryptedSQLite
@_exported public import enum SecureKeys.ProtectionClass
@_exported public import struct SecureKeys.StoreFiles
@_exported public import enum SecureKeys.InboxRecord
@_exported public import class SecureKeys.SecureBytes
@_exported public import struct SecureKeys.RecoveryKey
@_exported public import class SecureKeys.RecoveryPhrase
@_exported public import struct SecureKeys.StoreFormat
@_exported public import struct SecureKeys.StoreKeyFile
@_exported public import protocol ProtectedData.KeyAvailabilityMonitor
@_exported public import protocol ProtectedData.StoreKeyProvider
@_exported public import enum ProtectedData.StoreKeyLookup
@_exported public import struct ProtectedData.StoreKeyRecord
@_exported public import enum ProtectedData.ProtectedDataEvent
@_exported public import struct ProtectedData.ProtectedDataAvailability
@_exported public import class ProtectedData.EventSubscription
@_exported public import class ProtectedData.ManualClock
