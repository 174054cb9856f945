import Foundation
import ArgumentParser
import ProtectedData
import ProtectedStore
import ProtectedStoreHarness
import SecureKeys

/// `--state-dir` and `--key-store` of the `store` commands.
///
/// They say which device holds the store's key.
struct StoreDeviceOptions: ParsableArguments {
    @Option(name: .customLong("state-dir"), help: "The state directory holding the device and its store (app.sqlite).")
    var stateDirectory = "protected-store-state"

    @OptionGroup var keyStore: KeyStoreOptions<FileKeyStoreByDefault>

    /// The store the shell, `run` and the apps of a state directory use (`ScenarioSession.storePath`).
    var storePath: String { stateDirectory + "/app.sqlite" }
}

/// The device a `store` command gets the store's key from, unlocked with the passcode asked for.
///
/// It is the device agent's (`device serve`) when one serves the directory, and the app may then be running.
/// Otherwise it is the device itself, booted and owned by this process for the command's length.
@MainActor
struct StoreDeviceAccess {
    /// Where the store key comes from.
    let keys: any StoreKeyProvider
    /// Powers the device off, or leaves the agent.
    ///
    /// Call it once done.
    let end: () -> Void

    /// Opens the device of `options` and unlocks it with the passcode `prompt` asks for.
    ///
    /// - Parameters:
    ///   - options: the state directory and key store.
    ///   - prompt: asks for the passcode (echo off at a terminal; a line of a pipe).
    ///   - command: the command asking (`store export`), named in a refusal.
    ///   - agentAllowed: whether the key may come through a device agent; `false` for a command that needs the
    ///     store closed everywhere (the agent's clients may have it attached).
    /// - Throws: `state-in-use` when an agent serves the directory and `agentAllowed` is false, or another
    ///   process owns it; `no-device`; `wrong-passcode`, `passcode-delay`; the prompt's refusal.
    static func open(
        _ options: StoreDeviceOptions, prompt: PasscodePrompt, command: String, agentAllowed: Bool
    ) throws -> StoreDeviceAccess {
        let directory = options.stateDirectory
        if let agent = try DeviceAgentClient.connect(toAgentOf: directory, clientName: "protected-store \(command)") {
            guard agentAllowed else {
                agent.disconnect()
                throw StoreError(
                    code: .stateInUse,
                    message: "\(command) needs the store closed everywhere, and a device agent serves \(directory) (its clients may have the store open): stop `protected-store device serve` first")
            }
            let passcode = try prompt.existing("passcode", for: command)
            defer { passcode.bytes.wipe() }
            do {
                // Checked and counted even when another client unlocked the device: the passcode asked for is
                // what authorises this command.
                try agent.authenticate(passcode: passcode.bytes)
            } catch {
                agent.disconnect()
                throw error
            }
            return StoreDeviceAccess(keys: agent, end: { agent.disconnect() })
        }
        let ownership = try StateDirectoryLock.acquire(directory)
        let device: KeybagDevice
        do {
            device = try KeybagDevice(
                bootingFrom: directory, keyStore: options.keyStore.store(for: directory), ownership: ownership)
        } catch {
            ownership.release()
            throw error
        }
        let end = {
            device.powerOff()
            ownership.release()
        }
        do {
            let passcode = try prompt.existing("passcode", for: command)
            defer { passcode.bytes.wipe() }
            try device.unlock(passcode: passcode.bytes)
        } catch {
            end()
            throw error
        }
        return StoreDeviceAccess(keys: device, end: end)
    }
}

extension PasscodePrompt.Refusal: LocalizedError {
    /// What the refusal says, which swift-argument-parser prints.
    var errorDescription: String? { description }
}
