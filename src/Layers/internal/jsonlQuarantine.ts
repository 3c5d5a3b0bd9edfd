// `quarantineTornTail` (docs/spec/01-ledger.md, "Torn tails"): under the writer lock, copy a JSONL ledger's torn tail aside,
// truncate the ledger to its last complete group, and log what was moved. Nothing is ever deleted.
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { createHash } from "node:crypto"
import * as NodePath from "node:path"
import * as CanonicalJson from "../../Domain/CanonicalJson.js"
import * as Digest from "../../Domain/Digest.js"
import { LedgerCorruption, StoreWriteFailed } from "../../Domain/Errors.js"
import type { StoreReadFailed, WorkspaceLocked, WorkspaceNotFound } from "../../Domain/Errors.js"
import { canonicalText } from "../../Domain/RuntimeEvent.js"
import * as RunVerifier from "../../Domain/Rules/RunVerifier.js"
import { WorkspaceLock } from "../../Services/WorkspaceLock.js"
import type { WorkspaceLockHandle } from "../../Services/WorkspaceLock.js"
import { decodeRow, fileCorruption } from "./jsonlFold.js"
import {
  exists,
  APPEND_LOCK_FILE_NAME,
  LOCK_FILE_NAME,
  pathsOf,
  QUARANTINE_LOG_NAME,
  quarantineFileName,
  readFailed,
  requireLedger,
  syncDirectory,
  verifyLedger,
  writeFailed
} from "./jsonlFiles.js"
import type { JsonlPaths } from "./jsonlFiles.js"
import { classifyLine, LineSplitter } from "./jsonlScan.js"
import { refuseSymlinks } from "./symlinks.js"
import type { TornTail } from "./jsonlScan.js"

/**
 * What `quarantineTornTail` did: where the tail started, how long it was, and where its bytes went.
 *
 * @since 0.1.0
 * @category models
 */
export interface QuarantineResult {
  readonly quarantined: boolean
  /** The quarantine file holding the tail's bytes (absent when nothing was quarantined). */
  readonly file?: string
  /** Byte offset of the tail, which is now the ledger's length. */
  readonly offset: number
  readonly length: number
  /** `sha256:<hex>` of the tail's bytes. */
  readonly sha256?: string
}

// How long quarantine waits for a writer to let go of the lock.
const LOCK_TIMEOUT_MS = 2_000

// Complete tail lines that parse as JSON must be valid rows of the interrupted append: a crash leaves a prefix of
// canonical lines (with lost blocks read as NULs), never a well-formed line with wrong content. Each row must decode,
// and a row that follows its run's last line (committed, or earlier in the tail) must chain onto it; a row may skip
// seqs only right after an unparsable line (lines are lost only inside lost blocks). Anything else needs a person,
// like its committed counterpart.
const checkTail = (
  fs: FileSystem.FileSystem,
  paths: JsonlPaths,
  tail: TornTail,
  tails: ReadonlyMap<string, RunVerifier.RunVerifier>
): Effect.Effect<void, LedgerCorruption | StoreReadFailed> =>
  Effect.suspend(() => {
    const splitter = new LineSplitter()
    const last = new Map<string, { readonly seq: number; readonly digest: string }>()
    let afterUnparsable = false
    let refusal: LedgerCorruption | undefined
    const onLine = (bytes: Uint8Array, n: number, offset: number) => {
      if (refusal !== undefined) return
      const line = tail.line + n - 1
      const c = classifyLine(bytes)
      if (c._tag === "Bad") {
        if (c.reason === "schema_invalid") {
          refusal = fileCorruption(
            tail.runIds[0] ?? "",
            "schema_invalid",
            `${c.message}; a torn tail holds canonical rows and unparsable bytes only, so this needs a person`,
            line
          )
        }
        afterUnparsable = true
        return
      }
      const runId = c.eventRunId
      if (runId === undefined) {
        refusal = fileCorruption(tail.runIds[0] ?? "", "schema_invalid", "a tail line is a row whose event names no run", line)
        return
      }
      const item = { _tag: "Row", runId, line, offset: tail.offset + offset, seq: c.seq, end: c.end, text: c.text, value: c.value } as const
      const row = decodeRow(item)
      if (row instanceof LedgerCorruption) {
        refusal = row
        return
      }
      const before = last.get(runId) ?? tails.get(runId)?.tail ?? { seq: 0, digest: Digest.genesis(runId) }
      const eventText = canonicalText(row.event)
      if (row.seq <= before.seq || (row.seq > before.seq + 1 && !afterUnparsable)) {
        refusal = RunVerifier.corruption(
          runId,
          "seq_gap",
          `a torn-tail row has seq ${row.seq} after seq ${before.seq} of its run with no lost block in between; ` +
            "an interrupted append cannot leave that, so this needs a person",
          { seq: row.seq, line, eventId: row.event.id }
        )
      } else if (
        row.seq === before.seq + 1 && Either.isRight(eventText) &&
        Digest.next(before.digest, row.seq, eventText.right) !== row.digest
      ) {
        refusal = RunVerifier.corruption(
          runId,
          "digest_mismatch",
          "a torn-tail row does not chain onto the line before it in its run; an interrupted append cannot leave " +
            "that, so this needs a person",
          { seq: row.seq, line, eventId: row.event.id }
        )
      }
      last.set(runId, { seq: row.seq, digest: row.digest })
      afterUnparsable = false
    }
    return fs.stream(paths.ledger, { offset: tail.offset, bytesToRead: tail.length }).pipe(
      Stream.mapError(readFailed(paths.ledger, "read the tail of")),
      Stream.runForEach((chunk) => Effect.sync(() => splitter.push(chunk, onLine))),
      Effect.flatMap(() => refusal === undefined ? Effect.void : Effect.fail(refusal))
    )
  })

/**
 * What quarantine would refuse in a torn tail that is the whole file (`offset` 0: no committed row to chain onto),
 * if anything: a reader reports that refusal instead of a `torn_row` whose advice (`repair --quarantine-torn-tail`)
 * would be refused (docs/recovery.md). Read only on the failing path, never while reading a clean file.
 *
 * @since 0.1.0
 * @category layers
 */
export const wholeFileTailRefusal = (
  fs: FileSystem.FileSystem,
  paths: JsonlPaths,
  tail: TornTail
): Effect.Effect<LedgerCorruption | undefined, StoreReadFailed> =>
  tail.offset !== 0 || tail.notRow !== undefined ? Effect.succeed(undefined) : checkTail(fs, paths, tail, new Map()).pipe(
    Effect.as(undefined),
    Effect.catchTag("LedgerCorruption", (refusal) => Effect.succeed(refusal))
  )

// Opens the first unused `runtime-events.jsonl.quarantine-<n>`, created 0600 (never overwriting one).
const openQuarantineFile = (
  fs: FileSystem.FileSystem,
  paths: JsonlPaths,
  n: number
): Effect.Effect<{ readonly path: string; readonly name: string; readonly file: FileSystem.File }, PlatformError, Scope.Scope> => {
  const name = quarantineFileName(n)
  const path = NodePath.join(paths.workspace, name)
  return fs.open(path, { flag: "wx", mode: 0o600 }).pipe(
    Effect.map((file) => ({ path, name, file })),
    Effect.catchIf(
      (e) => e._tag === "SystemError" && e.reason === "AlreadyExists",
      () => openQuarantineFile(fs, paths, n + 1)
    )
  )
}

/**
 * Quarantines a torn JSONL tail under the exclusive writer lock: (1) copies the tail's bytes to
 * `runtime-events.jsonl.quarantine-<n>` (0600, fsynced); (2) truncates the ledger to the end of its last complete
 * group (fsynced); (3) appends `{ts, offset, length, sha256, file}` to `runtime-events.quarantine.log`. It refuses,
 * changing nothing, a ledger whose complete groups are corrupt or whose tail holds well-formed but invalid lines.
 * `lockHeld`: the handle of the exclusive writer lock the caller (a JSONL writer opening the ledger) already holds.
 *
 * @since 0.1.0
 * @category layers
 */
export const quarantineTornTail = (
  workspace: string,
  options?: { readonly lockHeld?: WorkspaceLockHandle }
): Effect.Effect<
  QuarantineResult,
  WorkspaceNotFound | WorkspaceLocked | LedgerCorruption | StoreReadFailed | StoreWriteFailed,
  FileSystem.FileSystem | WorkspaceLock
> =>
  Effect.scoped(Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const lock = yield* WorkspaceLock
    const paths = pathsOf(workspace)
    yield* requireLedger(fs, paths)
    // File hygiene: the log, the lock and its holder file are never written through a link (nor as a special file).
    yield* refuseSymlinks(fs, paths.workspace, [QUARANTINE_LOG_NAME, LOCK_FILE_NAME, `${LOCK_FILE_NAME}.holder`, APPEND_LOCK_FILE_NAME])
    // A writer opening the ledger passes the handle of the exclusive lock it already holds.
    const held = options?.lockHeld ?? (yield* lock.acquire({ path: paths.lock, mode: "exclusive", timeoutMs: LOCK_TIMEOUT_MS }))
    // And the append lock, so that no shared writer (a person's decision) is mid-write: a writer opening the ledger
    // that passes `lockHeld` holds it already.
    if (options?.lockHeld === undefined) {
      yield* lock.acquire({ path: paths.appendLock, mode: "exclusive", timeoutMs: LOCK_TIMEOUT_MS })
    }
    // Before each change: the lock's path still names the file we locked (else another writer may be at work).
    const stillHeld = (runId: string) =>
      Effect.suspend(() => {
        const lost = held.lost()
        return lost === undefined
          ? Effect.void
          : Effect.fail(new StoreWriteFailed({ runId, cause: "writer lock lost", message: `not quarantining: ${lost}` }))
      })

    const verified = yield* verifyLedger(fs, paths.ledger)
    const tail = verified.tail
    if (tail === undefined) {
      const none: QuarantineResult = { quarantined: false, offset: verified.bytes, length: 0 }
      return none
    }
    yield* checkTail(fs, paths, tail, verified.fold.verifiers)
    const runId = tail.runIds[0] ?? verified.firstRunId ?? ""
    yield* stillHeld(runId)

    // 1. Copy the tail aside.
    const target = yield* openQuarantineFile(fs, paths, 1).pipe(
      Effect.mapError(writeFailed(runId, paths.workspace, "create a quarantine file in"))
    )
    const hash = createHash("sha256")
    let copied = 0
    yield* fs.stream(paths.ledger, { offset: tail.offset, bytesToRead: tail.length }).pipe(
      Stream.runForEach((chunk) => {
        hash.update(chunk)
        copied += chunk.length
        return target.file.writeAll(chunk)
      }),
      Effect.zipRight(target.file.sync),
      Effect.zipRight(syncDirectory(fs, paths.workspace)),
      Effect.mapError(writeFailed(runId, target.path, "copy the torn tail to"))
    )
    const sha256 = `sha256:${hash.digest("hex")}`
    if (copied !== tail.length) {
      return yield* Effect.fail(
        new StoreWriteFailed({
          runId,
          cause: `copied ${copied} of ${tail.length} bytes`,
          message: `copying the torn tail of ${paths.ledger} to ${target.path} got ${copied} of ${tail.length} ` +
            "bytes: the ledger changed under the lock; the ledger was not truncated"
        })
      )
    }

    // 2. Truncate the ledger to its last complete group.
    yield* stillHeld(runId)
    yield* Effect.scoped(
      fs.open(paths.ledger, { flag: "r+" }).pipe(
        Effect.flatMap((file) => Effect.zipRight(file.truncate(tail.offset), file.sync))
      )
    ).pipe(Effect.mapError(writeFailed(runId, paths.ledger, "truncate")))

    // 3. Log it.
    const ts = yield* Clock.currentTimeMillis
    const entry = CanonicalJson.encode({ ts, offset: tail.offset, length: tail.length, sha256, file: target.name })
    if (entry._tag === "Fail") return yield* Effect.dieMessage(`quarantine log entry: ${entry.failure.message}`)
    const logPath = NodePath.join(paths.workspace, QUARANTINE_LOG_NAME)
    const logExisted = yield* exists(fs, logPath)
    yield* Effect.scoped(
      fs.open(logPath, { flag: "a", mode: 0o600 }).pipe(
        Effect.flatMap((file) =>
          Effect.zipRight(file.writeAll(Buffer.from(`${entry.text}\n`, "utf8")), file.sync)
        )
      )
    ).pipe(
      Effect.zipRight(logExisted ? Effect.void : syncDirectory(fs, paths.workspace)),
      Effect.mapError(writeFailed(runId, logPath, "append to"))
    )

    const result: QuarantineResult = { quarantined: true, file: target.path, offset: tail.offset, length: tail.length, sha256 }
    return result
  }))
