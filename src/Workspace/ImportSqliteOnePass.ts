// `import` into a SQLite folder that does not exist yet, in one pass (docs/stores.md "SQLite"): the ledger is built in a
// draft folder beside the workspace, `.<name>.import-<pid>-<hex>.partial`, by `ImportOnePass` (read, check and write in
// the one transaction), and renamed to the workspace's name only when the whole file was taken. Nothing of a file it
// does not take is ever visible, and its cleanup removes only the draft, this import's own folder: never a workspace
// another process created meanwhile (a host starting on the same new path keeps every row it wrote; the rename then
// fails, the draft is removed, and the file is imported by the two passes, into the ledger that appeared).
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { randomBytes } from "node:crypto"
import { rmdirSync } from "node:fs"
import * as NodePath from "node:path"
import { syncDirectory } from "../Layers/internal/jsonlFiles.js"
import { isAlive } from "../Layers/internal/jsonlImportDraft.js"
import { draftPattern } from "../Layers/internal/sqliteImportDraft.js"
import type { LedgerImport } from "../Programs/ImportLedger.js"

/**
 * The pattern of a one-pass SQLite import's draft folder for the workspace named `name`.
 *
 * @since 0.1.0
 * @category constants
 */
export { draftPattern } from "../Layers/internal/sqliteImportDraft.js"

// Removes the drafts of this workspace whose process is gone (a SIGKILL mid-import): never a live import's. A draft
// holds no acknowledged row: the import that wrote it never reported success.
const sweep = (fs: FileSystem.FileSystem, parent: string, name: string): Effect.Effect<void> =>
  fs.readDirectory(parent).pipe(
    Effect.flatMap((names) =>
      Effect.forEach(names, (entry) => {
        const m = draftPattern(name).exec(entry)
        return m === null || isAlive(Number(m[1])) ? Effect.void : fs.remove(NodePath.join(parent, entry), { recursive: true })
      }, { discard: true })
    ),
    Effect.ignore
  )

/**
 * Imports into the SQLite workspace `workspace`, which does not exist yet, in one pass: `write(draft)` writes the
 * ledger into the draft folder `draft` (the caller's `ImportOnePass.importInOnePass` over a SQLite store opened there),
 * and the draft is renamed to `workspace` once it succeeded, then the parent folder fsynced. Missing parent folders
 * are created first. `None` when the one pass was not used or did not take the file (the workspace exists, `write`
 * failed, or the workspace appeared meanwhile): the draft and the parents it created (while empty) are then removed,
 * and the caller imports as before (the two passes), which refuses or writes exactly what it always did. Drafts of
 * earlier imports killed midway are removed first.
 *
 * @since 0.1.0
 * @category programs
 */
export const importFreshSqlite = <E, R>(
  workspace: string,
  write: (draft: string) => Effect.Effect<LedgerImport, E, R>
): Effect.Effect<Option.Option<LedgerImport>, never, FileSystem.FileSystem | R> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const target = NodePath.resolve(workspace)
    const parent = NodePath.dirname(target)
    const name = NodePath.basename(target)
    const there = (path: string) => fs.exists(path).pipe(Effect.orElseSucceed(() => true))
    if (yield* there(target)) return Option.none()
    // The missing parent folders, deepest first: created (0700, each entry fsynced) and, if the file is not taken,
    // removed again while still empty (`rmdir`: never what another process put in them since).
    const created: Array<string> = []
    for (let at = parent; !(yield* there(at)); at = NodePath.dirname(at)) {
      created.push(at)
      if (NodePath.dirname(at) === at) break
    }
    const unmake = Effect.forEach(created, (dir) => Effect.try(() => rmdirSync(dir)), { discard: true }).pipe(Effect.ignore)
    const made = yield* Effect.forEach([...created].reverse(), (dir) =>
      Effect.zipRight(fs.makeDirectory(dir, { mode: 0o700 }), syncDirectory(fs, NodePath.dirname(dir))), { discard: true }).pipe(
        Effect.as(true),
        Effect.orElse(() => Effect.as(unmake, false))
      )
    if (!made) return Option.none()
    yield* sweep(fs, parent, name)
    const draft = NodePath.join(parent, `.${name}.import-${process.pid}-${randomBytes(8).toString("hex")}.partial`)
    const discard = fs.remove(draft, { recursive: true }).pipe(Effect.ignore, Effect.zipRight(unmake))
    const written = yield* Effect.either(write(draft))
    if (written._tag === "Left") return yield* Effect.as(discard, Option.none())
    // rename(2) fails when a non-empty folder took the name meanwhile: the draft is dropped, that folder untouched.
    const published = yield* fs.rename(draft, target).pipe(
      Effect.zipRight(syncDirectory(fs, parent).pipe(Effect.ignore)),
      Effect.as(true),
      Effect.orElseSucceed(() => false)
    )
    if (!published) return yield* Effect.as(discard, Option.none())
    return Option.some(written.right)
  })
