// What an app names through `import ProtectedStore` alone: the protection classes and the device model.
@_exported public import enum SecureKeys.ProtectionClass
@_exported public import ProtectedData
