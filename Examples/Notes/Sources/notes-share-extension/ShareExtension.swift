import Foundation
import NotesModel
import ProtectedStore

/// The share extension: a second process that adds a note while the app's store may be locked.
///
/// It is given the shared container and nothing else — no device, no passcode, no key. It cannot open the
/// store, and does not try: it seals a ``NoteShared`` to the store's inbox public key (kept in the clear
/// beside the store) and appends it to the locked inbox, `fsync`ed before `append` returns. The app merges it
/// the next time its store attaches.
///
/// ```
/// notes-share-extension CONTAINER TITLE BODY [TAG...]
/// ```
///
/// Prints the record's id and how many records wait; exits 0 once the record is durable, 1 when the append
/// failed (the library's error, `code: message`, on standard error), 2 for bad arguments.
@main
struct ShareExtension {
    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        guard arguments.count >= 3 else {
            FileHandle.standardError.write(Data("usage: notes-share-extension CONTAINER TITLE BODY [TAG...]\n".utf8))
            exit(2)
        }
        let shared = NoteShared(
            title: arguments[1], body: arguments[2], sharedAt: Date(), tags: Array(arguments.dropFirst(3)))
        // Only the store's files: `LockedInbox` needs no key to append.
        let inbox = LockedInbox(files: NotesStore.configuration(inContainer: arguments[0]).files)
        do {
            let record = try inbox.append(shared)
            let waiting = try inbox.pendingCount()
            print("sealed \"\(shared.title)\" into the locked inbox as record \(record) (\(waiting) waiting)")
            print("note id \(shared.id.uuidString)")
        } catch {
            // The library's errors are `StoreError`s: `code: message`, never a key.
            FileHandle.standardError.write(Data("notes-share-extension: \(error)\n".utf8))
            exit(1)
        }
    }
}
