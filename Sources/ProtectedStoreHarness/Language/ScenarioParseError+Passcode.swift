extension ScenarioParseError {
    /// An empty passcode given without `--allow-empty-passcode`.
    ///
    /// A device anyone unlocks with no passcode at all is almost always a mistake (an empty `--passcode ""`, or
    /// Return pressed at the prompt).
    ///
    /// - Parameter command: the command that was refused, as typed (`device setup`).
    public static func emptyPasscode(_ command: String) -> Self {
        ScenarioParseError(
            message: "\(command): an empty passcode is refused (anyone could unlock the device); "
                + "add --allow-empty-passcode if that is what you want")
    }
}
