public import Testing

/// The error of type `Failure` that `body` throws, or `nil` when it throws nothing.
///
/// An error of any other type is recorded as an issue — a test that expects one kind of error fails when it gets
/// another — and gives `nil`.
///
/// - Parameters:
///   - type: the error type the test expects.
///   - sourceLocation: where the issue is reported, the caller's line by default.
///   - body: the code under test.
public func thrownError<Failure: Error>(
    _ type: Failure.Type, sourceLocation: SourceLocation = #_sourceLocation, by body: () throws -> Void
) -> Failure? {
    do {
        try body()
        return nil
    } catch let error as Failure {
        return error
    } catch {
        Issue.record("unexpected error \(error)", sourceLocation: sourceLocation)
        return nil
    }
}
