/// Why the app was launched.
///
/// It is what `application(_:didFinishLaunchingWithOptions:)` learns from its options.
public struct LaunchOptions: Sendable, Hashable {
    /// The reason for the launch.
    public enum Reason: String, Sendable, Hashable, CaseIterable {
        /// The user tapped the app.
        case user
        /// A significant location change or region event (`UIApplication.LaunchOptionsKey.location`).
        case location
        /// A remote notification (`.remoteNotification`).
        case remoteNotification = "remote-notification"
        /// A background fetch.
        case backgroundFetch = "background-fetch"
    }

    /// The reason for the launch.
    public var reason: Reason
    /// Whether the app was launched into the background, with no UI on screen.
    public var inBackground: Bool

    /// Options for a launch.
    ///
    /// - Parameters:
    ///   - reason: why the app was launched.
    ///   - inBackground: whether it was launched with no UI; by default, for every reason but `user`.
    public init(reason: Reason = .user, inBackground: Bool? = nil) {
        self.reason = reason
        self.inBackground = inBackground ?? (reason != .user)
    }
}
