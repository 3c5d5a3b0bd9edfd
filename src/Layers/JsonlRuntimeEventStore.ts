// The JSONL RuntimeEventStore of docs/spec/01-ledger.md: `<workspace>/runtime-events.jsonl`, one canonical line per row, one write
// and one fsync per append, one writer at a time under an OS-level lock; readers stream and verify, never lock.
import * as FileSystem from "@effect/platform/FileSystem"
import type { PlatformError } from "@effect/platform/Error"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { LedgerCorruption, StoreReadFailed, StoreWriteFailed, WorkspaceNotFound } from "../Domain/Errors.js"
import type { OwnershipLost, WorkspaceLocked } from "../Domain/Errors.js"
import { HighWater } from "../Domain/HighWater.js"
import { RunId } from "../Domain/Ids.js"
import type { CommittedRow, RuntimeEvent } from "../Domain/RuntimeEvent.js"
import { jsonlLine } from "../Domain/RuntimeEvent.js"
import * as LedgerRules from "../Domain/Rules/LedgerRules.js"
import * as Failpoints from "../Services/Failpoints.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type {
  AppendError,
  AppendOptions,
  ProvenEvent,
  ProvenRestorePlan,
  RestorePlan,
  RunBatch,
  RuntimeEventStoreShape
} from "../Services/RuntimeEventStore.js"
import { WorkspaceLock } from "../Services/WorkspaceLock.js"
import {
  APPEND_LOCK_FILE_NAME,
  exists,
  FILE_NAME,
  LOCK_FILE_NAME,
  makeDirectoryDurably,
  pathsOf,
  readFailed,
  requireLedger,
  syncDirectory,
  tornTailError,
  verifyLedger,
  writeFailed
} from "./internal/jsonlFiles.js"
import type { JsonlPaths } from "./internal/jsonlFiles.js"
import {
  IMPORT_CHUNK_BYTES,
  IMPORT_MARKER_NAME,
  markerPath,
  openStreamMarker,
  provesTail,
  readMarker,
  removeMarker,
  writeChunked,
  writeMarker
} from "./internal/jsonlImportMarker.js"
import { quarantineTornTail } from "./internal/jsonlQuarantine.js"
import { offsetMismatch, refusedError } from "./internal/appendErrors.js"
import { refuseSymlinks } from "./internal/symlinks.js"
import { expectedEpoch, nodeKey, ownershipLost, readEpochFile } from "./internal/ownerFence.js"
import { forEachPiece, PIECE_EVENTS, provenPlanIdentity, restoreDiverged } from "./internal/restorePieces.js"
import type { PieceEvent, PiecePlan, RestorePiece } from "./internal/restorePieces.js"
import { dispatchEvents, exactRetry, IndexJournal, siteOf, TailIndex } from "./internal/TailIndex.js"
import type { PlannedRun } from "./internal/TailIndex.js"
import { pickRows, runNotFound } from "./internal/verifyRows.js"

// The store-format lines of checked batches, each row's `end` its batch's last seq, as the bytes of one write.
const linesOf = (planned: ReadonlyArray<PlannedRun>): Buffer => {
  let text = ""
  for (const p of planned) {
    const end = p.accepted.tail.seq
    for (const row of p.accepted.rows) text += jsonlLine(row.seq, end, row.digest, row.text)
  }
  return Buffer.from(text, "utf8")
}

// The high-water a streamed restore reached for one run.
interface Reached {
  readonly seq: number
  readonly digest: string
}

// What a streamed restore writes for one piece: its lines, and for a run's last piece the high-water it reached.
interface PieceLines {
  readonly bytes: Buffer
  readonly reached?: Reached
}

// The store-format lines of one piece of a `restoreProven`, built from each event's UTF-8 bytes as they are (no text
// encoded or decoded): byte for byte `jsonlLine(seq, end, digest, text)` of the text those bytes encode.
class ProvenLines {
  // Per line: its head (`{"digest":…,"event":`), the text's bytes, its tail (`,"seq":N}` and the newline); heads and
  // tails are ASCII, so each is as many bytes as characters.
  private readonly heads: Array<string> = []
  private readonly texts: Array<Uint8Array> = []
  private readonly tails: Array<string> = []
  private bytes = 0
  private readonly endText: string
  constructor(end: number) {
    this.endText = String(end)
  }

  add(seq: number, digest: string, text: Uint8Array): void {
    const head = `{"digest":"${digest}","end":${this.endText},"event":`
    const tail = `,"seq":${seq}}\n`
    this.heads.push(head)
    this.texts.push(text)
    this.tails.push(tail)
    this.bytes += head.length + text.length + tail.length
  }

  join(): Buffer {
    const out = Buffer.allocUnsafe(this.bytes)
    let at = 0
    for (let i = 0; i < this.heads.length; i++) {
      at += out.write(this.heads[i]!, at, "latin1")
      out.set(this.texts[i]!, at)
      at += this.texts[i]!.length
      at += out.write(this.tails[i]!, at, "latin1")
    }
    return out
  }
}

export { APPEND_LOCK_FILE_NAME, FILE_NAME, LOCK_FILE_NAME, QUARANTINE_LOG_NAME } from "./internal/jsonlFiles.js"
export { IMPORT_MARKER_NAME } from "./internal/jsonlImportMarker.js"
export { quarantineTornTail } from "./internal/jsonlQuarantine.js"
export type { QuarantineResult } from "./internal/jsonlQuarantine.js"

/**
 * How to open a JSONL store.
 *
 * @since 0.1.0
 * @category models
 */
export interface JsonlStoreOptions {
  /** The workspace folder; a writer creates it (0700) when missing. */
  readonly workspace: string
  /** Open for reading only: no lock, no file created; a folder without a ledger is `WorkspaceNotFound`. */
  readonly readOnly?: boolean
  /** How long a writer waits for the writer lock; default 0 (a second writer fails at once with `WorkspaceLocked`). */
  readonly lockTimeoutMs?: number
  /**
   * A writer that imports (`import`): a torn tail that the interrupted-import marker proves to be the unacknowledged
   * write of an earlier import is quarantined (moved aside, logged) at open, so that this import completes it.
   * Any other torn tail still fails with `torn_row`.
   */
  readonly completeInterruptedImport?: boolean
  /**
   * A writer that shares the ledger with a running host (a person's decision: `resolve`, the console): it takes no
   * writer lock, only the append lock around its open and each write, waiting at most `lockTimeoutMs` (default
   * 2,000 ms) for it; it reads what the host appended before each write, as the host reads its lines.
   */
  readonly shared?: boolean
}

// How long a shared writer waits for the append lock by default (another writer is writing, or opening).
const SHARED_WRITER_WAIT_MS = 2_000
// How long the writer-lock holder (a host) waits for the append lock before a write: a shared writer holds it while it
// verifies the ledger at open, which takes longer on a large ledger.
const WRITER_APPEND_WAIT_MS = 30_000

import { headersCheck, makeReader, readMethods, tailFailure } from "./internal/jsonlReader.js"

// The `torn_row` of a tail that the marker proves to be an interrupted import's unacknowledged write: what to type.
const interruptedImport = (error: LedgerCorruption): LedgerCorruption =>
  new LedgerCorruption({
    runId: error.runId,
    reason: error.reason,
    ...(error.line !== undefined ? { line: error.line } : {}),
    message: `${error.message}. It is the unacknowledged write of an interrupted import (nothing in it was ` +
      "acknowledged): run the same import again, which moves it aside and completes, or repair --quarantine-torn-tail"
  })

// Creates the workspace folder (0700) when missing, and fsyncs its parent so that the folder survives.
const ensureWorkspace = (fs: FileSystem.FileSystem, workspace: string) =>
  Effect.gen(function*() {
    if (yield* exists(fs, workspace)) {
      const info = yield* fs.stat(workspace).pipe(Effect.mapError(readFailed(workspace, "stat")))
      if (info.type === "Directory") return
      return yield* Effect.fail(
        new WorkspaceNotFound({ workspace, message: `${workspace} is not a folder; a JSONL workspace must be a folder` })
      )
    }
    // Every folder it creates survives a power loss: the parent of each is fsynced, deepest first.
    yield* makeDirectoryDurably(fs, workspace, 0o700).pipe(Effect.mapError(readFailed(workspace, "create the workspace folder")))
  })

// Creates the ledger 0600 when missing, and fsyncs the directory so that the new entry survives.
const ensureLedger = (fs: FileSystem.FileSystem, paths: JsonlPaths) =>
  Effect.gen(function*() {
    if (yield* exists(fs, paths.ledger)) return
    yield* Effect.scoped(fs.open(paths.ledger, { flag: "ax", mode: 0o600 })).pipe(
      Effect.zipRight(syncDirectory(fs, paths.workspace)),
      Effect.mapError(readFailed(paths.ledger, "create"))
    )
  })

/**
 * Opens a JSONL store over `options.workspace`. A writer takes the exclusive writer lock for the scope, creates
 * the folder and ledger when missing, and reads and verifies the whole ledger once to build its tail state
 * (a torn tail fails with `torn_row`). A reader (`readOnly`) takes no lock and creates nothing.
 *
 * @since 0.1.0
 * @category layers
 */
export const make = (
  options: JsonlStoreOptions
): Effect.Effect<
  RuntimeEventStoreShape,
  WorkspaceNotFound | WorkspaceLocked | LedgerCorruption | StoreReadFailed,
  Scope.Scope | FileSystem.FileSystem | WorkspaceLock
> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const lock = yield* WorkspaceLock
    const paths = pathsOf(options.workspace)
    if (options.readOnly === true) {
      yield* requireLedger(fs, paths)
      return makeReader(fs, lock, paths)
    }

    // File hygiene: never write through a symbolic link (the workspace, the ledger, the locks or the holder file).
    yield* refuseSymlinks(fs, paths.workspace, [FILE_NAME, LOCK_FILE_NAME, `${LOCK_FILE_NAME}.holder`, APPEND_LOCK_FILE_NAME, IMPORT_MARKER_NAME])
    yield* ensureWorkspace(fs, paths.workspace)
    // A shared writer (a person's decision while a host runs) takes no writer lock; every writer holds the append lock
    // around its open and around each write (docs/stores.md "JSONL").
    const shared = options.shared === true
    const held = shared
      ? undefined
      : yield* lock.acquire({ path: paths.lock, mode: "exclusive", timeoutMs: options.lockTimeoutMs ?? 0 })
    const appendLatch = yield* lock.latch(paths.appendLock)
    const appendWait = shared ? options.lockTimeoutMs ?? SHARED_WRITER_WAIT_MS : WRITER_APPEND_WAIT_MS

    // The tail state, built from the whole file (at open, and again when another writer appended since).
    const load = (atOpen: boolean) =>
      Effect.gen(function*() {
        let index = new TailIndex()
        let verified = yield* verifyLedger(fs, paths.ledger, index.ids)
        const marker = atOpen && held !== undefined ? yield* readMarker(fs, paths) : Option.none()
        if (verified.tail !== undefined && Option.isSome(marker)) {
          const tail = verified.tail
          const ours = yield* provesTail(fs, paths, marker.value, tail).pipe(Effect.mapError(readFailed(paths.ledger, "read")))
          if (ours && options.completeInterruptedImport !== true) {
            return yield* Effect.fail(interruptedImport(tornTailError(verified.firstRunId, tail, paths)))
          }
          if (ours) {
            // The unacknowledged write of an interrupted import: moved aside (never deleted), then read again.
            yield* quarantineTornTail(paths.workspace, held !== undefined ? { lockHeld: held } : {}).pipe(
              Effect.catchTag("StoreWriteFailed", (e) =>
                Effect.fail(new StoreReadFailed({ path: paths.ledger, cause: e.cause, message: e.message })))
            )
            index = new TailIndex()
            verified = yield* verifyLedger(fs, paths.ledger, index.ids)
          }
        }
        if (verified.tail !== undefined) return yield* Effect.flatMap(tailFailure(fs, paths, verified.firstRunId, verified.tail), Effect.fail)
        // No torn tail: a marker left behind describes a write that finished or was quarantined.
        if (Option.isSome(marker)) yield* removeMarker(fs, paths).pipe(Effect.mapError(readFailed(markerPath(paths), "remove")))
        for (const [runId, verifier] of verified.fold.verifiers) {
          index.applyRun(runId, verifier.tail, verifier.calls.values(), [])
        }
        for (const [invocationId, runId] of verified.fold.tracker.invocations) index.invocations.set(invocationId, runId)
        return { index, bytes: verified.bytes }
      })

    const loaded = yield* appendLatch.hold(appendWait, Effect.zipRight(ensureLedger(fs, paths), load(true)))
    let index = loaded.index

    const file = yield* fs.open(paths.ledger, { flag: "r+" }).pipe(Effect.mapError(readFailed(paths.ledger, "open")))
    let acknowledged = loaded.bytes
    let broken: StoreWriteFailed | OwnershipLost | undefined

    // Fencing (docs/stores.md "Fencing"): while this process holds the owner lock, the owner epoch of
    // `runtime-owner.epoch` is checked under the writer lock before each write and again after its fsync, before it is
    // acknowledged, against the epoch this process holds the workspace under.
    const fenceKey = nodeKey(paths.workspace)
    const fenced = (runId: string, reachedDisk: boolean): Effect.Effect<void, OwnershipLost> =>
      Effect.suspend(() => {
        const expected = expectedEpoch(fenceKey)
        if (expected === undefined) return Effect.void
        const found = readEpochFile(paths.workspace)
        if (found === expected) return Effect.void
        const lost = ownershipLost(`${paths.ledger} (run ${runId})`, expected, found, reachedDisk)
        broken = lost
        return Effect.fail(lost)
      })
    const permit = yield* Effect.makeSemaphore(1)

    const reads = readMethods(fs, paths, {
      bound: () => acknowledged,
      // Our own bytes up to the acknowledged length hold no append in flight: any tail there is torn.
      judgeTail: () => Effect.succeed(false)
    })

    // Before each write: the writer lock's path still names the file we locked (an operator may have removed it, and a
    // second writer then locked a new one); failing writes nothing, and the store refuses every later append: it is no
    // longer the writer. (`locked` checked the owner epoch before, and `catchUp` compared the ledger's length with what
    // this writer acknowledged, both under the append lock.)
    const stillTheWriter = (runId: string): Effect.Effect<void, StoreWriteFailed | OwnershipLost> =>
      Effect.suspend(() => {
        const lost = held?.lost()
        if (lost === undefined) return Effect.void
        broken = new StoreWriteFailed({ runId, cause: "writer lock lost", message: `not appending to ${paths.ledger}: ${lost}` })
        return Effect.fail(broken)
      })

    // One write of whole lines at the acknowledged end, then fsync. On failure: truncate back and fsync; if that
    // fails too, the instance refuses everything until reopened. An import (restore mode) first writes the
    // interrupted-import marker, writes in bounded chunks, and removes the marker once the write is fsynced.
    // The writer check's own failure is not caught below: never truncate bytes another writer may have acknowledged.
    const writeDurably = (runId: string, bytes: Uint8Array, restore: boolean): Effect.Effect<void, StoreWriteFailed | OwnershipLost> =>
      Effect.zipRight(stillTheWriter(runId), (restore ? writeMarker(fs, paths, acknowledged, bytes) : Effect.void).pipe(
        Effect.zipRight(file.seek(acknowledged, "start")),
        Effect.zipRight(restore ? writeChunked(file, bytes) : file.writeAll(bytes)),
        Effect.zipRight(file.sync),
        Effect.zipRight(restore ? removeMarker(fs, paths) : Effect.void),
        Effect.catchAll((cause) => {
          const failed = writeFailed(runId, paths.ledger, "append to")(cause)
          return file.truncate(acknowledged).pipe(
            Effect.zipRight(file.sync),
            // The marker describes only this write: it must not outlive it into a later append at the same offset.
            Effect.zipRight(restore ? removeMarker(fs, paths) : Effect.void),
            Effect.matchEffect({
              onSuccess: () => Effect.fail(failed),
              onFailure: (rollback) => {
                broken = new StoreWriteFailed({
                  runId,
                  cause: `${failed.cause}; rollback: ${rollback.message}`,
                  message: `an append to ${paths.ledger} failed (${failed.cause}) and truncating back to the last ` +
                    `acknowledged length ${acknowledged} failed too (${rollback.message}); this store refuses ` +
                    "every append until it is reopened"
                })
                return Effect.fail(broken)
              }
            })
          )
        }),
        // Durable now; acknowledged only if the epoch still holds (bytes another holder may have read are never cut).
        Effect.zipRight(fenced(runId, true))
      ))

    // Checks, builds the group, runs `beforeWrite` (the inside_t2 failpoint), writes and fsyncs; callers hold the permit.
    const write = (
      batches: ReadonlyArray<RunBatch>,
      mode: LedgerRules.WriteMode,
      beforeWrite: Effect.Effect<void> = Effect.void
    ): Effect.Effect<ReadonlyArray<ReadonlyArray<CommittedRow>>, AppendError> =>
      Effect.suspend((): Effect.Effect<ReadonlyArray<ReadonlyArray<CommittedRow>>, AppendError> => {
        if (broken !== undefined) {
          const refused = broken
          if (refused._tag === "OwnershipLost") return Effect.fail(refused)
          return Effect.fail(
            new StoreWriteFailed({ runId: batches[0]?.runId ?? refused.runId, cause: refused.cause, message: refused.message })
          )
        }
        const planned = index.check(batches, mode)
        if (Either.isLeft(planned)) return Effect.fail(planned.left)
        const bytes = linesOf(planned.right)
        return beforeWrite.pipe(
          Effect.zipRight(writeDurably(planned.right[0]?.runId ?? "", bytes, mode === "restore")),
          Effect.map(() => {
            acknowledged += bytes.length
            index.apply(planned.right)
            return planned.right.map((p) => p.rows)
          })
        )
      })

    // Before a write, under the append lock: the file is as long as what this instance knows, or another writer (a
    // person's decision while this host runs) appended since; its lines are then read and verified as at open, and the
    // tail state rebuilt from the whole file (rare: once per outside write). Shorter than what was acknowledged, torn or
    // corrupt: this store refuses every later append (fail closed).
    const catchUp = (runId: string): Effect.Effect<void, StoreWriteFailed> =>
      Effect.suspend(() => {
        if (broken !== undefined) return Effect.void
        return file.stat.pipe(
          Effect.mapError(writeFailed(runId, paths.ledger, "stat")),
          Effect.flatMap((info): Effect.Effect<void, StoreWriteFailed> => {
            const size = Number(info.size)
            if (size === acknowledged) return Effect.void
            if (size < acknowledged) {
              broken = new StoreWriteFailed({
                runId,
                cause: "ledger changed under the writer lock",
                message: `not appending to ${paths.ledger}: it is ${size} bytes long, but this writer acknowledged ` +
                  `${acknowledged}; another process cut it. Stop every runtime-resume process on this workspace, then ` +
                  "run `runtime-resume verify` on it"
              })
              return Effect.fail(broken)
            }
            return load(false).pipe(
              Effect.provideService(FileSystem.FileSystem, fs),
              Effect.provideService(WorkspaceLock, lock),
              Effect.map((again) => {
                index = again.index
                acknowledged = again.bytes
              }),
              Effect.catchAll((e) => {
                const refused = new StoreWriteFailed({
                  runId,
                  cause: `another writer's append does not verify: ${e.message}`,
                  message: `not appending to ${paths.ledger}: another process appended to it since this writer's last ` +
                    `write, and what it appended does not verify (${e.message}). Stop every runtime-resume process on ` +
                    "this workspace, then run `runtime-resume verify` on it"
                })
                if (e._tag === "LedgerCorruption") broken = refused
                return Effect.fail(refused)
              })
            )
          })
        )
      })

    // Every write: one at a time in this process, uninterruptible, under the append lock; the owner epoch checked first
    // (a host whose ownership moved is told `OwnershipLost`, never what another owner wrote since), then caught up.
    const locked = <A, E>(runId: string, effect: Effect.Effect<A, E>): Effect.Effect<A, E | StoreWriteFailed | OwnershipLost> =>
      permit.withPermits(1)(Effect.uninterruptible(
        appendLatch.hold(appendWait, Effect.either(Effect.zipRight(fenced(runId, false), Effect.zipRight(catchUp(runId), effect)))).pipe(
          Effect.mapError((e) =>
            new StoreWriteFailed({
              runId,
              cause: e._tag === "WorkspaceLocked" ? "append lock busy" : e.cause,
              message: e._tag === "WorkspaceLocked"
                ? `nothing was appended to ${paths.ledger}: ${e.message} (the append lock; another writer is writing). ` +
                  "Try again"
                : `nothing was appended to ${paths.ledger}: ${e.message}`
            })
          ),
          Effect.flatMap((result) => result)
        )
      ))

    // The one write of a streamed restore (`restoreStream`, `restoreProven`): `events` cut into pieces along `plans`
    // (`forEachPiece`), each handed to `onPiece`, which checks it, records in `journal` what it changes in the tail
    // state and gives the piece's lines (and, for a run's last piece, the high-water it reached). At the acknowledged
    // end, those bytes go out in chunks of IMPORT_CHUNK_BYTES, each announced in the growing interrupted-import marker
    // before it is written; one fsync at the end, then the marker is removed. Any failure truncates back, removes the
    // marker and takes back the tail state (or, if that fails, breaks the instance). Returns each run's high-water.
    const streamedRestore = <P extends PiecePlan, A extends PieceEvent, E>(
      plans: ReadonlyArray<P>,
      events: Stream.Stream<A, E>,
      onPiece: (piece: RestorePiece<P, A>, journal: IndexJournal) => Either.Either<PieceLines, AppendError>
    ): Effect.Effect<ReadonlyArray<Reached>, AppendError | E> =>
      locked(plans[0]?.runId ?? "", Effect.suspend((): Effect.Effect<ReadonlyArray<Reached>, AppendError | E> => {
        const runId = plans[0]?.runId ?? ""
        const reached: Array<Reached> = []
        if (broken !== undefined) {
          const refused = broken
          if (refused._tag === "OwnershipLost") return Effect.fail(refused)
          return Effect.fail(new StoreWriteFailed({ runId, cause: refused.cause, message: refused.message }))
        }
        const start = acknowledged
        const journal = new IndexJournal(index.runOrder.length)
        let written = 0
        let pending: Array<Buffer> = []
        let pendingBytes = 0
        const failed = (cause: PlatformError) => writeFailed(runId, paths.ledger, "append to")(cause)
        const body = Effect.gen(function*() {
          const marker = yield* openStreamMarker(fs, paths, start).pipe(Effect.mapError(failed))
          yield* file.seek(start, "start").pipe(Effect.mapError(failed))
          // Writes every whole chunk held (all that is held, at the end), each announced first.
          const flush = (all: boolean) =>
            Effect.gen(function*() {
              while (pendingBytes >= IMPORT_CHUNK_BYTES || (all && pendingBytes > 0)) {
                const joined = pending.length === 1 ? pending[0]! : Buffer.concat(pending, pendingBytes)
                const chunk = joined.subarray(0, Math.min(IMPORT_CHUNK_BYTES, joined.length))
                const rest = joined.subarray(chunk.length)
                pending = rest.length > 0 ? [rest] : []
                pendingBytes = rest.length
                yield* marker.announce(chunk).pipe(Effect.mapError(failed))
                yield* file.writeAll(chunk).pipe(Effect.mapError(failed))
                written += chunk.length
              }
            })
          yield* forEachPiece(plans, events, PIECE_EVENTS, (piece) =>
            Effect.suspend(() => {
              const lines = onPiece(piece, journal)
              if (Either.isLeft(lines)) return Effect.fail(lines.left)
              if (lines.right.reached !== undefined) reached.push(lines.right.reached)
              pending.push(lines.right.bytes)
              pendingBytes += lines.right.bytes.length
              return flush(false)
            }))
          yield* flush(true)
          yield* file.sync.pipe(Effect.mapError(failed))
          yield* removeMarker(fs, paths).pipe(Effect.mapError(failed))
        })
        const rollback = file.truncate(start).pipe(
          Effect.zipRight(file.sync),
          Effect.zipRight(removeMarker(fs, paths))
        )
        // The writer check's own failure wrote nothing: never truncate bytes another writer may have acknowledged.
        let checkedWriter = false
        return Effect.zipRight(stillTheWriter(runId), Effect.suspend(() => {
          checkedWriter = true
          return Effect.scoped(body)
        })).pipe(
          Effect.map(() => {
            acknowledged = start + written
            return reached
          }),
          Effect.catchAllCause((cause) =>
            !checkedWriter
              ? Effect.failCause(cause)
              : rollback.pipe(
                Effect.matchCauseEffect({
                  onSuccess: () => {
                    index.undo(journal)
                    return Effect.failCause(cause)
                  },
                  onFailure: (rollbackCause) => {
                    broken = new StoreWriteFailed({
                      runId,
                      cause: `a streamed restore failed; rollback: ${Cause.pretty(rollbackCause)}`,
                      message: `a streamed restore into ${paths.ledger} failed and truncating back to the last ` +
                        `acknowledged length ${start} failed too; this store refuses every append until it is reopened`
                    })
                    return Effect.fail(broken)
                  }
                })
              ))
        )
      }))

    // A streamed restore: ONE write (`streamedRestore`), piece by piece, each checked against the tail state as the
    // pieces before it left it.
    const restoreStream: NonNullable<RuntimeEventStoreShape["restoreStream"]> = <E>(
      plans: ReadonlyArray<RestorePlan>,
      events: Stream.Stream<RuntimeEvent, E>
    ) =>
      Effect.suspend(() => {
        let end = 0
        return streamedRestore<RestorePlan, RuntimeEvent, E>(plans, events, (piece, journal) => {
          const { plan } = piece
          const expected = piece.first ? plan.expectedHighWater : undefined
          const batch = { runId: plan.runId, events: piece.events, ...(expected !== undefined ? { expectedHighWater: expected } : {}) }
          if (piece.first) end = index.tailOf(plan.runId).seq + plan.events
          const checked = index.check([batch], "restore", { endsWrite: piece.last, end })
          if (Either.isLeft(checked)) return Either.left(checked.left)
          const p = checked.right[0]!
          let text = ""
          for (const row of p.accepted.rows) text += jsonlLine(row.seq, end, row.digest, row.text)
          const bytes = Buffer.from(text, "utf8")
          index.applyJournaled(checked.right, journal)
          if (!piece.last) return Either.right({ bytes })
          const tail = p.accepted.tail
          const final = plan.expectedFinal
          if (final !== undefined && (final.seq !== tail.seq || final.digest !== tail.digest)) {
            return Either.left(restoreDiverged(plan.runId, final, tail))
          }
          return Either.right({ bytes, reached: { seq: tail.seq, digest: tail.digest } })
        })
      })

    // A streamed restore of runs the caller checked (`restoreProven`): ONE write (`streamedRestore`) cut into the
    // pieces of `restoreStream`. What only the store sees is checked as `restoreStream`'s check would refuse it, with
    // the same error: a run already stored (its high-water is not empty), an invocation owned by a stored run (at the
    // run's first event), an event id used by a stored event or by an event before it in this write (at the first
    // such event). Each event's text is chained here and its line is the one `restoreStream` writes (the run's one
    // group, `end` its event count); the run must end at its plan's tail, else nothing is written. The tail state
    // then takes the run as `restoreStream` leaves it: the plan's tail (where the chain was just seen to end), its
    // call index (each call's final entry), its invocation and its ids.
    const restoreProven: NonNullable<RuntimeEventStoreShape["restoreProven"]> = <E>(
      plans: ReadonlyArray<ProvenRestorePlan>,
      events: Stream.Stream<ProvenEvent, E>
    ) =>
      Effect.suspend(() => {
        let seq = 0
        let digest = ""
        return streamedRestore<ProvenRestorePlan, ProvenEvent, E>(plans, events, (piece, journal) => {
          const { plan } = piece
          const runId = plan.runId
          const tail = plan.tail
          const identity = provenPlanIdentity(plan)
          if (Either.isLeft(identity)) return Either.left(identity.left)
          const empty = LedgerRules.emptyTail(runId)
          const refuse = (at: number, reason: "identity_mismatch" | "duplicate_event_id", message: string) =>
            Either.left(refusedError(runId, empty, { _tag: "Refused", index: at, eventId: piece.events[at]!.id, reason, message }))
          if (piece.first) {
            const stored = index.runs.get(runId)
            if (stored !== undefined) return Either.left(offsetMismatch(runId, { seq: 0, digest: empty.digest }, stored.tail))
            const invocation = identity.right.invocationId
            const owner = index.invocations.get(invocation)
            if (owner !== undefined && owner !== runId) {
              return refuse(0, "identity_mismatch", `invocation ${invocation} already belongs to run ${owner}`)
            }
            seq = 0
            digest = empty.digest
          }
          const ids = index.ids
          const end = plan.events
          const lines = new ProvenLines(end)
          for (let i = 0; i < piece.events.length; i++) {
            const event = piece.events[i]!
            // One Set operation: `add` leaves the set unchanged (its size too) when the id is there already.
            const before = ids.size
            ids.add(event.id)
            if (ids.size === before) return refuse(i, "duplicate_event_id", `event id ${event.id} is already used by another event`)
            journal.ids.push(event.id)
            seq++
            const bytes = event.bytes
            if (bytes !== undefined) {
              digest = LedgerRules.nextDigestOfBytes(digest, seq, bytes)
              lines.add(seq, digest, bytes)
            } else {
              digest = LedgerRules.nextDigest(digest, seq, event.text)
              lines.add(seq, digest, Buffer.from(event.text, "utf8"))
            }
          }
          if (!piece.last) return Either.right({ bytes: lines.join() })
          if (seq !== tail.seq || digest !== tail.digest) return Either.left(restoreDiverged(runId, tail, { seq, digest }))
          journal.runs.set(runId, { existed: false, tail: undefined, calls: new Map() })
          journal.invocations.push(identity.right.invocationId)
          index.applyRun(runId, tail, plan.calls, [])
          index.invocations.set(identity.right.invocationId, runId)
          return Either.right({ bytes: lines.join(), reached: { seq, digest } })
        })
      })

    const appendBatch: RuntimeEventStoreShape["appendBatch"] = (batches, appendOptions) =>
      locked(batches[0]?.runId ?? "", Effect.suspend(() => write(batches, appendOptions?.mode ?? "append")))

    // A dedicated writer: an exact retry of the run's tail returns its rows (read back from the file, a rare
    // path); anything else is checked in `mode`.
    const writeTool = (
      runId: RunId,
      events: ReadonlyArray<RuntimeEvent>,
      mode: "t1" | "t2" | "recovery",
      options: AppendOptions | undefined,
      beforeWrite?: Effect.Effect<void>
    ): Effect.Effect<ReadonlyArray<CommittedRow>, AppendError> =>
      locked(runId, Effect.gen(function*() {
        if (events.every((e) => index.ids.has(e.id)) && index.runs.has(runId)) {
          const rows = yield* reads.readRun(runId).pipe(Effect.orElseSucceed((): ReadonlyArray<CommittedRow> => []))
          const retried = exactRetry(events, index.tailOf(runId), rows.slice(Math.max(0, rows.length - events.length - 1)), options)
          if (retried !== undefined) return retried
        }
        const batch = { runId, events, ...(options?.expectedHighWater ? { expectedHighWater: options.expectedHighWater } : {}) }
        return (yield* write([batch], mode, beforeWrite))[0]!
      }))

    // Group commit of recovery bundles: each checked as `appendRecovery` checks it, against the state the ones before it
    // leave; one group per bundle (its own `end`), all in one write and one fsync, or none.
    const appendRecoveryBatch: NonNullable<RuntimeEventStoreShape["appendRecoveryBatch"]> = (runId, bundles) =>
      locked(runId, Effect.suspend((): Effect.Effect<ReadonlyArray<ReadonlyArray<CommittedRow>>, AppendError> => {
        if (broken !== undefined) {
          const refused = broken
          if (refused._tag === "OwnershipLost") return Effect.fail(refused)
          return Effect.fail(new StoreWriteFailed({ runId, cause: refused.cause, message: refused.message }))
        }
        if (bundles.length === 0) return Effect.succeed([])
        const planned = index.checkRecoveryBatch(runId, bundles)
        if (Either.isLeft(planned)) return Effect.fail(planned.left)
        const bytes = linesOf(planned.right)
        return writeDurably(runId, bytes, false).pipe(
          Effect.map(() => {
            acknowledged += bytes.length
            index.apply(planned.right)
            return planned.right.map((p) => p.rows)
          })
        )
      }))

    const append: RuntimeEventStoreShape["append"] = (runId, events, appendOptions) =>
      appendBatch([{
        runId,
        events,
        ...(appendOptions?.expectedHighWater !== undefined ? { expectedHighWater: appendOptions.expectedHighWater } : {})
      }]).pipe(Effect.map((rows) => rows[0]!))

    return RuntimeEventStore.of({
      kind: "jsonl",
      append,
      appendBatch,
      restoreStream,
      restoreProven,
      appendDispatch: (runId, facts, appendOptions) =>
        Either.match(dispatchEvents(runId, facts), {
          onLeft: Effect.fail,
          onRight: (events) => writeTool(runId, events, "t1", appendOptions)
        }),
      appendOutcome: (runId, response, appendOptions) =>
        writeTool(runId, [response], "t2", appendOptions, Failpoints.hit("inside_t2", siteOf(runId, response))).pipe(
          Effect.map((rows) => rows[0]!)
        ),
      appendRecovery: (runId, events, appendOptions) => writeTool(runId, events, "recovery", appendOptions),
      appendRecoveryBatch,
      unsettledOperations: (runId) => Effect.sync(() => index.unsettled(runId)),
      toolCallState: (runId, callId) => Effect.sync(() => index.callState(runId, callId)),
      unsettledCalls: (runId) => Effect.sync(() => index.unanswered(runId)),
      readRun: reads.readRun,
      readRunPages: reads.readRunPages,
      readRowsAt: pickRows(reads.readRun),
      readRunFrom: reads.readRunFrom,
      highWater: (runId) =>
        Effect.suspend(() => {
          const state = index.runs.get(runId)
          return state === undefined
            ? Effect.fail(runNotFound(runId))
            : Effect.succeed(new HighWater({ seq: state.tail.seq, digest: state.tail.digest }, true))
        }),
      listRuns: () => Effect.sync(() => index.runOrder.map((r) => RunId.make(r, true))),
      exportRows: reads.exportRows,
      scanRuns: reads.scanRuns,
      sidecarCheck: headersCheck(fs, paths)
    })
  })

/**
 * The JSONL store over `options.workspace` as a Layer; a writer holds the lock until the layer's scope closes.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: JsonlStoreOptions
): Layer.Layer<
  RuntimeEventStore,
  WorkspaceNotFound | WorkspaceLocked | LedgerCorruption | StoreReadFailed,
  FileSystem.FileSystem | WorkspaceLock
> => Layer.scoped(RuntimeEventStore, make(options))
