// Every failure of this module is a `StoreError`, the one error type ProtectedStore's apps catch: whoever
// imports the SQL layer names it without a second import.
@_exported public import StoreErrors
