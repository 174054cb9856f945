public import SecureKeys

/// What app code depends on to know whether protected data can be read.
///
/// The simulated device implements it, and a real operating-system source can be plugged in behind the same
/// protocol.
public protocol KeyAvailabilityMonitor: AnyObject, Sendable {
    /// Whether data of `protectionClass` can be read now. A class stays available until its keys are
    /// actually wiped (the end of the grace period), not merely until the lock.
    func isProtectedDataAvailable(for protectionClass: ProtectionClass) -> Bool

    /// Registers `handler` for every later event, atomically with reading the current availability, so no
    /// event can fall between the two.
    ///
    /// Events are delivered in order, to every subscriber, on the thread that caused them; a handler should
    /// be quick and hop to its own executor for real work. Keep the subscription: it ends when cancelled or
    /// released.
    ///
    /// - Returns: the availability at the moment of subscribing, and the subscription.
    func subscribe(
        _ handler: @escaping @Sendable (ProtectedDataEvent) -> Void
    ) -> (availability: ProtectedDataAvailability, subscription: EventSubscription)

    /// Whether the keys are gone for good rather than locked away.
    ///
    /// They are gone when the device erased itself. It is read when *did become unavailable* arrives. A store of
    /// any class closes then (a class B, C or D store otherwise stays open through a lock). `false` unless the
    /// source can tell; the default says `false`.
    var hasErasedKeys: Bool { get }
}

extension KeyAvailabilityMonitor {
    /// `false`, for a source that cannot tell an erase from a lock.
    public var hasErasedKeys: Bool { false }
}

extension KeyAvailabilityMonitor {
    /// The same events as an `AsyncSequence`, with the availability read atomically with subscribing.
    ///
    /// The stream ends when the returned subscription is cancelled or released.
    public func events() -> (
        availability: ProtectedDataAvailability, events: AsyncStream<ProtectedDataEvent>, subscription: EventSubscription
    ) {
        let (stream, continuation) = AsyncStream.makeStream(of: ProtectedDataEvent.self, bufferingPolicy: .unbounded)
        let (availability, subscription) = subscribe { continuation.yield($0) }
        subscription.onCancel { continuation.finish() }
        return (availability, stream, subscription)
    }
}
