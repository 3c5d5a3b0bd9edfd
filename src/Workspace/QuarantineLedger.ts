// `repair --quarantine-ledger` (docs/recovery.md, states `unreadable_file` and `corrupt`): a JSONL or SQLite ledger that
// no repair can mend is moved aside whole, kept (never deleted, never rewritten), and the workspace starts clean.
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as NodePath from "node:path"
import { StoreReadFailed, StoreWriteFailed } from "../Domain/Errors.js"
import { FILE_NAME as HEADERS_FILE_NAME } from "../Layers/JsonlRunHeaderStore.js"
import { FILE_NAME, LOCK_FILE_NAME } from "../Layers/internal/jsonlFiles.js"
import * as SqliteRuntimeEventStore from "../Layers/SqliteRuntimeEventStore.js"
import { WorkspaceLock } from "../Services/WorkspaceLock.js"
import { WorkspaceOwner } from "../Services/WorkspaceOwner.js"

/**
 * What `quarantineLedger` did: the files it moved aside (ledger first, then the run headers when there were any).
 *
 * @since 0.1.0
 * @category models
 */
export interface QuarantinedLedger {
  readonly moved: ReadonlyArray<{ readonly from: string; readonly to: string }>
}

/**
 * The suffix of a ledger moved aside whole: `runtime-events.jsonl.unreadable-<n>`.
 *
 * @since 0.1.0
 * @category workspace
 */
export const unreadableName = (file: string, n: number): string => `${file}.unreadable-${n}`

/**
 * Under the exclusive owner lock and the JSONL writer lock (both at most 2 s, else `WorkspaceLocked`, nothing
 * changed), renames `runtime-events.jsonl` to the first unused `runtime-events.jsonl.unreadable-<n>` and
 * `run-headers.jsonl` (when present) to `run-headers.jsonl.unreadable-<n>` with the same `n`, then creates an empty
 * ledger (0600) and syncs the folder. Nothing is deleted: the moved files hold every byte they held.
 *
 * @since 0.1.0
 * @category workspace
 */
export const quarantineLedger = (workspace: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const owner = yield* WorkspaceOwner
    const lock = yield* WorkspaceLock
    const ledger = NodePath.join(workspace, FILE_NAME)
    const headers = NodePath.join(workspace, HEADERS_FILE_NAME)
    const readFailed = (path: string) => (e: { readonly message: string }) =>
      new StoreReadFailed({ path, cause: e.message, message: `cannot read ${path}: ${e.message}` })
    const writeFailed = (path: string) => (e: { readonly message: string }) =>
      new StoreWriteFailed({ runId: "", cause: e.message, message: `cannot move ${path} aside: ${e.message}; nothing else was changed` })
    return yield* owner.withExclusive(
      workspace,
      Effect.scoped(Effect.gen(function*() {
        yield* lock.acquire({ path: NodePath.join(workspace, LOCK_FILE_NAME), mode: "exclusive", timeoutMs: 2_000 })
        const hasHeaders = yield* fs.exists(headers).pipe(Effect.mapError(readFailed(headers)))
        let n = 1
        for (;;) {
          const taken = (yield* fs.exists(NodePath.join(workspace, unreadableName(FILE_NAME, n))).pipe(Effect.mapError(readFailed(workspace)))) ||
            (yield* fs.exists(NodePath.join(workspace, unreadableName(HEADERS_FILE_NAME, n))).pipe(Effect.mapError(readFailed(workspace))))
          if (!taken) break
          n++
        }
        const moved: Array<{ from: string; to: string }> = []
        const ledgerTo = NodePath.join(workspace, unreadableName(FILE_NAME, n))
        yield* fs.rename(ledger, ledgerTo).pipe(Effect.mapError(writeFailed(ledger)))
        moved.push({ from: ledger, to: ledgerTo })
        if (hasHeaders) {
          const headersTo = NodePath.join(workspace, unreadableName(HEADERS_FILE_NAME, n))
          yield* fs.rename(headers, headersTo).pipe(Effect.mapError(writeFailed(headers)))
          moved.push({ from: headers, to: headersTo })
        }
        yield* fs.writeFile(ledger, new Uint8Array(0), { flag: "wx", mode: 0o600 }).pipe(Effect.mapError(writeFailed(ledger)))
        yield* Effect.scoped(Effect.flatMap(fs.open(workspace, { flag: "r" }), (dir) => dir.sync)).pipe(Effect.mapError(writeFailed(workspace)))
        const result: QuarantinedLedger = { moved }
        return result
      }))
    )
  }).pipe(Effect.withSpan("QuarantineLedger.quarantine"))

/** The SQLite files moved together: the database, then its write-ahead log and shared memory (when present). */
const SQLITE_SIDES = ["", "-wal", "-shm"] as const

/**
 * `quarantineLedger` for a SQLite workspace: under the exclusive owner lock (at most 2 s, else `WorkspaceLocked`,
 * nothing changed), renames `runtime.sqlite` to the first unused `runtime.sqlite.unreadable-<n>`, and its `-wal` and
 * `-shm` beside it under the same name (`runtime.sqlite.unreadable-<n>-wal`), so the moved database opens with every
 * committed row it held; then creates an empty ledger (the store's own create, 0600) and syncs the folder. The run
 * headers live in the same database and move with it. Nothing is deleted.
 *
 * @since 0.1.0
 * @category workspace
 */
export const quarantineSqliteLedger = (workspace: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const owner = yield* WorkspaceOwner
    const database = NodePath.join(workspace, SqliteRuntimeEventStore.FILE_NAME)
    const readFailed = (path: string) => (e: { readonly message: string }) =>
      new StoreReadFailed({ path, cause: e.message, message: `cannot read ${path}: ${e.message}` })
    const writeFailed = (path: string) => (e: { readonly message: string }) =>
      new StoreWriteFailed({ runId: "", cause: e.message, message: `cannot move ${path} aside: ${e.message}; see the files named in the workspace` })
    return yield* owner.withExclusive(
      workspace,
      Effect.gen(function*() {
        let n = 1
        for (;;) {
          let taken = false
          for (const side of SQLITE_SIDES) {
            taken ||= yield* fs.exists(NodePath.join(workspace, unreadableName(SqliteRuntimeEventStore.FILE_NAME, n) + side))
              .pipe(Effect.mapError(readFailed(workspace)))
          }
          if (!taken) break
          n++
        }
        const moved: Array<{ from: string; to: string }> = []
        for (const side of SQLITE_SIDES) {
          const from = database + side
          if (!(yield* fs.exists(from).pipe(Effect.mapError(readFailed(from))))) continue
          const to = NodePath.join(workspace, unreadableName(SqliteRuntimeEventStore.FILE_NAME, n) + side)
          yield* fs.rename(from, to).pipe(Effect.mapError(writeFailed(from)))
          moved.push({ from, to })
        }
        yield* Effect.scoped(Effect.flatMap(fs.open(workspace, { flag: "r" }), (dir) => dir.sync)).pipe(Effect.mapError(writeFailed(workspace)))
        // The store's own create: the schema, WAL, synchronous=FULL, mode 0600.
        yield* Effect.scoped(Layer.build(SqliteRuntimeEventStore.layer({ workspace })))
        const result: QuarantinedLedger = { moved }
        return result
      })
    )
  }).pipe(Effect.withSpan("QuarantineLedger.quarantineSqlite"))
