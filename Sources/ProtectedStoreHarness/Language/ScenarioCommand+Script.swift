extension ScenarioCommand {
    /// The command as a script line that parses back to it.
    ///
    /// It is one line, every word written by `ScenarioQuoting` (bare when it can be, quoted with escapes otherwise).
    /// A passcode is written out, as a script has it: for the simulator's traces and minimized scripts, never for
    /// what a person typed.
    public var scriptLine: String {
        switch self {
        case .deviceSetup(let passcode, let grace, let wipeAfter, let allowEmpty):
            var line = "device setup --passcode \(quoted(passcode?.text ?? "")) --grace \(grace.scriptText)"
            if let wipeAfter { line += " --wipe-after \(wipeAfter)" }
            if allowEmpty || passcode?.isEmpty ?? true { line += " --allow-empty-passcode" }
            return line
        case .deviceReboot: return "device reboot"
        case .devicePowerCut(let mode, let seed): return "device power-cut --mode \(mode.rawValue) --seed \(seed)"
        case .deviceLock: return "device lock"
        case .deviceUnlock(let passcode): return "device unlock --passcode \(quoted(passcode?.text ?? ""))"
        case .deviceChangePasscode(let old, let new, let allowEmpty):
            let line = "device change-passcode --old \(quoted(old?.text ?? "")) --new \(quoted(new?.text ?? ""))"
            return allowEmpty || new?.isEmpty ?? true ? line + " --allow-empty-passcode" : line
        case .clockAdvance(let duration): return "clock advance \(duration.scriptText)"
        case .appLaunch(let options, let protection, let attachDelay):
            var line = "app launch"
            if options.inBackground { line += " --background" }
            line += " --reason \(options.reason.rawValue)"
            if let protection { line += " --protection \(protection.name)" }
            if attachDelay > .zero { line += " --attach-delay \(attachDelay.scriptText)" }
            return line
        case .appTerminate: return "app terminate"
        case .appCrash: return "app crash"
        case .ui(let name): return "ui \(quoted(name))"
        case .put(let key, let value): return "put \(quoted(key)) \(ScenarioValue.words(value))"
        case .get(let key): return "get \(quoted(key))"
        case .delete(let key): return "delete \(quoted(key))"
        case .inboxPut(let key, let value, let kind, let otherProcess):
            return "inbox put " + (kind.map { "--kind \(quoted($0)) " } ?? "") + (otherProcess ? "--other-process " : "")
                + "\(quoted(key)) \(ScenarioValue.words(value))"
        case .inboxDelete(let key): return "inbox delete \(quoted(key))"
        case .inboxQuarantine: return "inbox quarantine"
        case .inboxRetry: return "inbox retry"
        case .inboxDiscard(let which):
            // A record id spelled like the keyword is quoted, which makes it a value.
            return "inbox discard " + (which.map { $0 == "all" ? "\"all\"" : quoted($0) } ?? "all")
        case .damage(let file, let damage): return "damage \(file.rawValue) \(damage.scriptText)"
        case .status: return "status"
        case .faultNextIO(let fault): return "fault next-io " + fault.scriptText
        case .expect(let expectation): return "expect " + expectation.scriptText
        }
    }
}

extension Expectation {
    var scriptText: String {
        switch self {
        case .protectedData(let available): "protected-data \(available ? "available" : "unavailable")"
        case .store(let state): "store \(quoted(state))"
        case .coordinator(let assigned): "coordinator \(assigned ? "assigned" : "nil")"
        case .interaction(let enabled): "interaction \(enabled ? "enabled" : "disabled")"
        case .queued(let count): "queued \(count)"
        case .ran(let names): (["ran"] + names.map(quoted)).joined(separator: " ")
        case .value(let key, let value): "value \(quoted(key)) \(ScenarioValue.words(value))"
        case .missing(let key): "missing \(quoted(key))"
        case .error(let code): "error \(quoted(code))"
        case .presentedError(let code): "presented-error \(quoted(code))"
        case .device(let state): "device \(quoted(state))"
        case .inbox(let count): "inbox \(count)"
        case .quarantined(let count): "quarantined \(count)"
        case .inboxDamaged(let bytes): "inbox-damaged \(bytes)"
        case .noPlaintext: "no-plaintext"
        case .integrityOK: "integrity ok"
        }
    }
}

extension Duration {
    /// The duration in the largest whole unit, such as `500ms`, `10s`, `5m` or `1h`.
    var scriptText: String {
        let milliseconds = components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
        for (unit, size) in [("h", Int64(3_600_000)), ("m", 60_000), ("s", 1000)] where milliseconds % size == 0 && milliseconds > 0 {
            return "\(milliseconds / size)\(unit)"
        }
        return "\(milliseconds)ms"
    }
}
