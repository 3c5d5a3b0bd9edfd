// The draft of a one-pass `import` into a JSONL workspace that holds no ledger yet (docs/stores.md "JSONL"): the ledger
// is written beside its place as a partial file while the import file is checked, and renamed into place only at the end.
import type { PlatformError } from "@effect/platform/Error"
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { randomBytes } from "node:crypto"
import { rmdirSync } from "node:fs"
import * as NodePath from "node:path"
import type { StoreReadFailed, WorkspaceLocked } from "../../Domain/Errors.js"
import { WorkspaceLock } from "../../Services/WorkspaceLock.js"
import { APPEND_LOCK_FILE_NAME, exists, FILE_NAME, LOCK_FILE_NAME, pathsOf, readFailed, syncDirectory } from "./jsonlFiles.js"
import { IMPORT_MARKER_NAME } from "./jsonlImportMarker.js"
import { refuseSymlinks } from "./symlinks.js"

// Why a refused file leaves nothing behind: until `publish`, the import's only traces are the folders it created and
// its partial file, which `discard` removes (the folders only when they are empty: never anything another process put
// there). The ledger's name is taken by one `rename`, under the writer lock and the append lock, and only while no
// ledger with events is there: a reader either sees no ledger or the whole import, fsynced. A SIGKILL before it leaves
// a partial file, which no store reads (it is not the ledger) and the next import into the folder removes (`sweep`).

/**
 * The name of a draft's partial file: `runtime-events.jsonl.import-<pid>-<hex>.partial`.
 *
 * @since 0.1.0
 * @category constants
 */
export const DRAFT_PATTERN = /^runtime-events\.jsonl\.import-([0-9]+)-[0-9a-f]{16}\.partial$/

/**
 * A draft ledger being written: its bytes go to the partial file; `publish` renames it into place, `discard` removes it
 * and the folders it created.
 *
 * @since 0.1.0
 * @category models
 */
export interface JsonlImportDraft {
  readonly path: string
  /** Appends bytes to the partial file. */
  readonly write: (bytes: Uint8Array) => Effect.Effect<void, PlatformError>
  /**
   * fsyncs the partial file, then, holding the writer lock and the append lock, renames it over the ledger's name and
   * fsyncs the folder: `true`. `false`, renaming nothing, when a ledger with bytes (or an interrupted import's marker)
   * is there by then: another writer came first, and the caller imports through the store instead.
   */
  readonly publish: Effect.Effect<boolean, PlatformError | WorkspaceLocked | StoreReadFailed, WorkspaceLock>
  /** Removes the partial file and the folders the draft created (those left empty); idempotent. */
  readonly discard: Effect.Effect<void>
}

const notFound = (e: PlatformError): boolean => e._tag === "SystemError" && e.reason === "NotFound"

/**
 * Whether the process `pid` of this machine still runs (this one does): a draft of a live import is never removed.
 *
 * @since 0.1.0
 * @category layers
 */
export const isAlive = (pid: number): boolean => {
  if (pid === process.pid) return true
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as { readonly code?: string }).code !== "ESRCH"
  }
}

// Removes the partial files of drafts whose process is gone (a SIGKILL mid-import): never a ledger, never a live one's.
const sweep = (fs: FileSystem.FileSystem, workspace: string): Effect.Effect<void> =>
  fs.readDirectory(workspace).pipe(
    Effect.flatMap((names) =>
      Effect.forEach(names, (name) => {
        const m = DRAFT_PATTERN.exec(name)
        return m === null || isAlive(Number(m[1])) ? Effect.void : fs.remove(NodePath.join(workspace, name))
      }, { discard: true })
    ),
    Effect.ignore
  )

/**
 * Starts a draft of the JSONL ledger of `workspace`, which holds no ledger now (the caller checked): creates the
 * missing folders (0700, durably) and a partial file (0600, exclusively), and removes the partial files of drafts whose
 * process died. The partial file is closed with the scope; `discard` is the caller's to run on any failure.
 *
 * @since 0.1.0
 * @category layers
 */
export const openDraft = (
  fs: FileSystem.FileSystem,
  workspace: string
): Effect.Effect<JsonlImportDraft, PlatformError | StoreReadFailed, Scope.Scope> =>
  Effect.gen(function*() {
    const root = NodePath.resolve(workspace)
    yield* refuseSymlinks(fs, root, [FILE_NAME, LOCK_FILE_NAME, `${LOCK_FILE_NAME}.holder`, APPEND_LOCK_FILE_NAME, IMPORT_MARKER_NAME])
    // The folders this draft creates, deepest first (only those are removed by `discard`).
    const created: Array<string> = []
    for (let at = root; !(yield* exists(fs, at)); at = NodePath.dirname(at)) {
      created.push(at)
      if (NodePath.dirname(at) === at) break
    }
    for (const dir of [...created].reverse()) {
      yield* fs.makeDirectory(dir, { mode: 0o700 })
      yield* syncDirectory(fs, NodePath.dirname(dir))
    }
    if (created.length === 0) yield* sweep(fs, root)
    const path = NodePath.join(root, `${FILE_NAME}.import-${process.pid}-${randomBytes(8).toString("hex")}.partial`)
    let discarded = false
    const discard = Effect.suspend(() => {
      if (discarded) return Effect.void
      discarded = true
      return fs.remove(path).pipe(
        Effect.catchIf(notFound, () => Effect.void),
        // `rmdir`: a folder is removed only when empty (never what another process put in it since).
        Effect.zipRight(Effect.forEach(created, (dir) => Effect.try(() => rmdirSync(dir)), { discard: true })),
        Effect.ignore
      )
    })
    const file = yield* fs.open(path, { flag: "wx", mode: 0o600 }).pipe(Effect.onError(() => discard))
    const paths = pathsOf(root)
    const publish = Effect.scoped(Effect.gen(function*() {
      yield* file.sync
      const lock = yield* WorkspaceLock
      yield* lock.acquire({ path: paths.lock, mode: "exclusive", timeoutMs: 0 })
      const latch = yield* lock.latch(paths.appendLock)
      return yield* latch.hold(2_000, Effect.gen(function*() {
        yield* refuseSymlinks(fs, root, [FILE_NAME, IMPORT_MARKER_NAME])
        if (yield* exists(fs, NodePath.join(root, IMPORT_MARKER_NAME))) return false
        const info = yield* fs.stat(paths.ledger).pipe(
          Effect.map((i) => Number(i.size)),
          Effect.catchIf(notFound, () => Effect.succeed(0)),
          Effect.mapError(readFailed(paths.ledger, "stat"))
        )
        if (info > 0) return false
        yield* fs.rename(path, paths.ledger)
        discarded = true
        yield* syncDirectory(fs, root)
        return true
      }))
    }))
    return { path, write: (bytes) => file.writeAll(bytes), publish, discard }
  })
