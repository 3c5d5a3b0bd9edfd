// The JSONL RuntimeEventStore of spec 01: `<workspace>/runtime-events.jsonl`, one canonical line per row, one write
// and one fsync per append, one writer at a time under an OS-level lock; readers stream and verify, never lock.
import * as FileSystem from "@effect/platform/FileSystem"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { RuntimeOffsetMismatch, StoreWriteFailed, WorkspaceNotFound } from "../Domain/Errors.js"
import type { LedgerCorruption, RunNotFound, StoreReadFailed, WorkspaceLocked } from "../Domain/Errors.js"
import { HighWater } from "../Domain/HighWater.js"
import { RunId } from "../Domain/Ids.js"
import type { CommittedRow, RuntimeEvent } from "../Domain/RuntimeEvent.js"
import { jsonlLine } from "../Domain/RuntimeEvent.js"
import type * as LedgerRules from "../Programs/LedgerRules.js"
import * as Failpoints from "../Services/Failpoints.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type { AppendError, AppendOptions, RunBatch, RuntimeEventStoreShape } from "../Services/RuntimeEventStore.js"
import { WorkspaceLock } from "../Services/WorkspaceLock.js"
import type { WorkspaceLockService } from "../Services/WorkspaceLock.js"
import { RunFold, StoreFold, StoreTracker } from "./internal/jsonlFold.js"
import {
  exists,
  FILE_NAME,
  LOCK_FILE_NAME,
  makeDirectoryDurably,
  pathsOf,
  readFailed,
  requireLedger,
  scanLedger,
  syncDirectory,
  tailInFlight,
  tornTailError,
  verifyLedger,
  writeFailed
} from "./internal/jsonlFiles.js"
import type { JsonlPaths } from "./internal/jsonlFiles.js"
import type { TornTail } from "./internal/jsonlScan.js"
import { refuseSymlinks } from "./internal/symlinks.js"
import { callStateFromRows, dispatchEvents, exactRetry, siteOf, TailIndex, unsettledFromRows } from "./internal/TailIndex.js"
import { cutPrefix, runNotFound } from "./internal/verifyRows.js"

export { FILE_NAME, LOCK_FILE_NAME, QUARANTINE_LOG_NAME } from "./internal/jsonlFiles.js"
export { quarantineTornTail } from "./internal/jsonlQuarantine.js"
export type { QuarantineResult } from "./internal/jsonlQuarantine.js"

/** How to open a JSONL store. */
export interface JsonlStoreOptions {
  /** The workspace folder; a writer creates it (0700) when missing. */
  readonly workspace: string
  /** Open for reading only: no lock, no file created; a folder without a ledger is `WorkspaceNotFound`. */
  readonly readOnly?: boolean
  /** How long a writer waits for the writer lock; default 0 (a second writer fails at once with `WorkspaceLocked`). */
  readonly lockTimeoutMs?: number
}

// How the read methods treat the file: a writer reads only what it acknowledged; a reader reads to EOF and
// judges a torn tail by probing the lock.
interface ReadMode {
  readonly bound: () => number | undefined
  readonly judgeTail: (tail: TornTail, scannedBytes: number) => Effect.Effect<boolean, StoreReadFailed>
}

const readMethods = (fs: FileSystem.FileSystem, paths: JsonlPaths, mode: ReadMode) => {
  // Fails with the torn tail unless it is an append in flight.
  const onTail = <A, E>(
    tail: TornTail | undefined,
    scannedBytes: number,
    runId: string | undefined,
    after: Stream.Stream<A, E>
  ): Stream.Stream<A, E | LedgerCorruption | StoreReadFailed> =>
    tail === undefined ? after : Stream.unwrap(
      Effect.map(
        mode.judgeTail(tail, scannedBytes),
        (inFlight): Stream.Stream<A, E | LedgerCorruption> => inFlight ? after : Stream.fail(tornTailError(runId, tail, paths))
      )
    )

  const readRunPages: RuntimeEventStoreShape["readRunPages"] = (runId, pageSize) =>
    Stream.suspend(() => {
      const fold = new RunFold(runId)
      const bytesToRead = mode.bound()
      return scanLedger(
        fs,
        paths.ledger,
        { keepRows: true, ...(bytesToRead !== undefined ? { bytesToRead } : {}) },
        (items) => {
          const out: Array<CommittedRow> = []
          return { rows: out, failure: fold.process(items, out) }
        },
        (tail, scanner) =>
          onTail(
            tail,
            scanner.bytes,
            runId,
            Stream.suspend((): Stream.Stream<never, RunNotFound | LedgerCorruption> => {
              if (fold.last === undefined) return Stream.fail(runNotFound(runId))
              const cut = fold.finish()
              return cut === undefined ? Stream.empty : Stream.fail(cut)
            })
          )
      ).pipe(Stream.rechunk(Math.max(1, pageSize)))
    })

  const readRun: RuntimeEventStoreShape["readRun"] = (runId, options) =>
    Effect.flatMap(Stream.runCollect(readRunPages(runId, 4096)), (chunk): Effect.Effect<ReadonlyArray<CommittedRow>, RuntimeOffsetMismatch | LedgerCorruption> => {
      const rows = Chunk.toReadonlyArray(chunk)
      const upTo = options?.upToSeq
      if (upTo === undefined) return Effect.succeed(rows)
      if (upTo > rows.length) {
        const last = rows[rows.length - 1]!
        return Effect.fail(
          new RuntimeOffsetMismatch({
            runId,
            expected: { seq: upTo },
            actual: { seq: last.seq, digest: last.digest },
            message: `run ${runId}: upToSeq ${upTo} is beyond the high-water seq ${last.seq}`
          })
        )
      }
      return cutPrefix(runId, rows, upTo)
    })

  const scannedHighWater: RuntimeEventStoreShape["highWater"] = (runId) =>
    Stream.runFold(readRunPages(runId, 4096), undefined as CommittedRow | undefined, (_, row) => row).pipe(
      Effect.flatMap((last) =>
        last === undefined
          ? Effect.fail(runNotFound(runId))
          : Effect.succeed(new HighWater({ seq: last.seq, digest: last.digest }, true))
      )
    )

  const scannedRuns: RuntimeEventStoreShape["listRuns"] = () =>
    Effect.suspend(() => {
      let runs: ReadonlyArray<string> = []
      const bytesToRead = mode.bound()
      return scanLedger(
        fs,
        paths.ledger,
        { keepRows: false, ...(bytesToRead !== undefined ? { bytesToRead } : {}) },
        () => ({ rows: [] as Array<never>, failure: undefined as never }),
        (tail, scanner) => {
          runs = scanner.runs
          if (tail === undefined) return Stream.empty
          // Runs seen only in a torn tail are listed, so that reading them reports the tail; not those of an append in flight.
          return Stream.fromEffect(
            Effect.map(mode.judgeTail(tail, scanner.bytes), (inFlight) => {
              if (!inFlight) runs = [...runs, ...tail.runIds.filter((r) => !runs.includes(r))]
            })
          ).pipe(Stream.drain)
        }
      ).pipe(Stream.runDrain, Effect.map(() => runs.map((r) => RunId.make(r, true))))
    })

  const exportRows: RuntimeEventStoreShape["exportRows"] = () =>
    Stream.suspend(() => {
      let fold: StoreFold | undefined
      const bytesToRead = mode.bound()
      return scanLedger(
        fs,
        paths.ledger,
        { keepRows: true, ...(bytesToRead !== undefined ? { bytesToRead } : {}) },
        (items, scanner) => {
          fold ??= new StoreFold(new StoreTracker(), () => scanner.firstRunId)
          const out: Array<CommittedRow> = []
          return { rows: out, failure: fold.process(items, out) }
        },
        (tail, scanner) =>
          onTail(
            tail,
            scanner.bytes,
            scanner.firstRunId,
            Stream.suspend(() => {
              const cut = fold?.finish()
              return cut === undefined ? Stream.empty : Stream.fail(cut)
            })
          )
      )
    })

  return { readRunPages, readRun, scannedHighWater, scannedRuns, exportRows }
}

const readOnlyRefusal = (runId: string, paths: JsonlPaths) =>
  new StoreWriteFailed({
    runId,
    cause: "read-only store",
    message: `the JSONL store over ${paths.workspace} was opened read-only; open it for writing to append`
  })

const makeReader = (
  fs: FileSystem.FileSystem,
  lock: WorkspaceLockService,
  paths: JsonlPaths
): RuntimeEventStoreShape => {
  const reads = readMethods(fs, paths, {
    bound: () => undefined,
    judgeTail: (_, scannedBytes) => tailInFlight(fs, lock, paths, scannedBytes)
  })
  return RuntimeEventStore.of({
    kind: "jsonl",
    append: (runId) => Effect.fail(readOnlyRefusal(runId, paths)),
    appendBatch: (batches) => Effect.fail(readOnlyRefusal(batches[0]?.runId ?? "", paths)),
    appendDispatch: (runId) => Effect.fail(readOnlyRefusal(runId, paths)),
    appendOutcome: (runId) => Effect.fail(readOnlyRefusal(runId, paths)),
    appendRecovery: (runId) => Effect.fail(readOnlyRefusal(runId, paths)),
    // A reader keeps no index: it folds the whole file once (a torn tail fails unless it is an append in flight).
    unsettledOperations: (runId) =>
      Effect.flatMap(verifyLedger(fs, paths.ledger), (verified) => {
        const index = new TailIndex()
        for (const [id, verifier] of verified.fold.verifiers) index.applyRun(id, verifier.tail, verifier.calls.values(), [])
        const listed = Effect.sync(() => index.unsettled(runId))
        return verified.tail === undefined ? listed : Effect.flatMap(
          tailInFlight(fs, lock, paths, verified.bytes),
          (inFlight) => inFlight ? listed : Effect.fail(tornTailError(verified.firstRunId, verified.tail!, paths))
        )
      }),
    // A reader keeps no index: it reads the run (spec 01: readers stream and verify).
    toolCallState: (runId, callId) =>
      reads.readRun(runId).pipe(
        Effect.map((rows) => callStateFromRows(rows, callId)),
        Effect.catchTag("RunNotFound", () => Effect.succeed(callStateFromRows([], callId))),
        Effect.catchTag("RuntimeOffsetMismatch", Effect.die)
      ),
    unsettledCalls: (runId) =>
      reads.readRun(runId).pipe(
        Effect.map(unsettledFromRows),
        Effect.catchTag("RunNotFound", () => Effect.succeed(unsettledFromRows([]))),
        Effect.catchTag("RuntimeOffsetMismatch", Effect.die)
      ),
    readRun: reads.readRun,
    readRunPages: reads.readRunPages,
    highWater: reads.scannedHighWater,
    listRuns: reads.scannedRuns,
    exportRows: reads.exportRows
  })
}

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

    // File hygiene: never write through a symbolic link (the workspace, the ledger, the lock or its holder file).
    yield* refuseSymlinks(fs, paths.workspace, [FILE_NAME, LOCK_FILE_NAME, `${LOCK_FILE_NAME}.holder`])
    yield* ensureWorkspace(fs, paths.workspace)
    yield* lock.acquire({ path: paths.lock, mode: "exclusive", timeoutMs: options.lockTimeoutMs ?? 0 })
    yield* ensureLedger(fs, paths)

    // The tail state, built once from the whole file.
    const index = new TailIndex()
    const verified = yield* verifyLedger(fs, paths.ledger, index.ids)
    if (verified.tail !== undefined) return yield* Effect.fail(tornTailError(verified.firstRunId, verified.tail, paths))
    for (const [runId, verifier] of verified.fold.verifiers) {
      index.applyRun(runId, verifier.tail, verifier.calls.values(), [])
    }
    for (const [invocationId, runId] of verified.fold.tracker.invocations) index.invocations.set(invocationId, runId)

    const file = yield* fs.open(paths.ledger, { flag: "r+" }).pipe(Effect.mapError(readFailed(paths.ledger, "open")))
    let acknowledged = verified.bytes
    let broken: StoreWriteFailed | undefined
    const permit = yield* Effect.makeSemaphore(1)

    const reads = readMethods(fs, paths, {
      bound: () => acknowledged,
      // Our own bytes up to the acknowledged length hold no append in flight: any tail there is torn.
      judgeTail: () => Effect.succeed(false)
    })

    // One write of whole lines at the acknowledged end, then fsync. On failure: truncate back and fsync; if that
    // fails too, the instance refuses everything until reopened.
    const writeDurably = (runId: string, bytes: Uint8Array): Effect.Effect<void, StoreWriteFailed> =>
      file.seek(acknowledged, "start").pipe(
        Effect.zipRight(file.writeAll(bytes)),
        Effect.zipRight(file.sync),
        Effect.catchAll((cause) => {
          const failed = writeFailed(runId, paths.ledger, "append to")(cause)
          return file.truncate(acknowledged).pipe(
            Effect.zipRight(file.sync),
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
        })
      )

    // Checks, builds the group, runs `beforeWrite` (the inside_t2 failpoint), writes and fsyncs; callers hold the permit.
    const write = (
      batches: ReadonlyArray<RunBatch>,
      mode: LedgerRules.WriteMode,
      beforeWrite: Effect.Effect<void> = Effect.void
    ): Effect.Effect<ReadonlyArray<ReadonlyArray<CommittedRow>>, AppendError> =>
      Effect.suspend((): Effect.Effect<ReadonlyArray<ReadonlyArray<CommittedRow>>, AppendError> => {
        if (broken !== undefined) {
          const refused = broken
          return Effect.fail(
            new StoreWriteFailed({ runId: batches[0]?.runId ?? refused.runId, cause: refused.cause, message: refused.message })
          )
        }
        const planned = index.check(batches, mode)
        if (Either.isLeft(planned)) return Effect.fail(planned.left)
        let text = ""
        for (const p of planned.right) {
          const end = p.accepted.tail.seq
          for (const row of p.accepted.rows) text += jsonlLine(row.seq, end, row.digest, row.text)
        }
        const bytes = Buffer.from(text, "utf8")
        return beforeWrite.pipe(
          Effect.zipRight(writeDurably(planned.right[0]?.runId ?? "", bytes)),
          Effect.map(() => {
            acknowledged += bytes.length
            index.apply(planned.right)
            return planned.right.map((p) => p.rows)
          })
        )
      })

    const locked = <A, E>(effect: Effect.Effect<A, E>) => permit.withPermits(1)(Effect.uninterruptible(effect))

    const appendBatch: RuntimeEventStoreShape["appendBatch"] = (batches, appendOptions) =>
      locked(write(batches, appendOptions?.mode ?? "append"))

    // A dedicated writer: an exact retry of the run's tail returns its rows (read back from the file, a rare
    // path); anything else is checked in `mode`.
    const writeTool = (
      runId: RunId,
      events: ReadonlyArray<RuntimeEvent>,
      mode: "t1" | "t2" | "recovery",
      options: AppendOptions | undefined,
      beforeWrite?: Effect.Effect<void>
    ): Effect.Effect<ReadonlyArray<CommittedRow>, AppendError> =>
      locked(Effect.gen(function*() {
        if (events.every((e) => index.ids.has(e.id)) && index.runs.has(runId)) {
          const rows = yield* reads.readRun(runId).pipe(Effect.orElseSucceed((): ReadonlyArray<CommittedRow> => []))
          const retried = exactRetry(events, index.tailOf(runId), rows.slice(Math.max(0, rows.length - events.length - 1)), options)
          if (retried !== undefined) return retried
        }
        const batch = { runId, events, ...(options?.expectedHighWater ? { expectedHighWater: options.expectedHighWater } : {}) }
        return (yield* write([batch], mode, beforeWrite))[0]!
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
      unsettledOperations: (runId) => Effect.sync(() => index.unsettled(runId)),
      toolCallState: (runId, callId) => Effect.sync(() => index.callState(runId, callId)),
      unsettledCalls: (runId) => Effect.sync(() => index.unanswered(runId)),
      readRun: reads.readRun,
      readRunPages: reads.readRunPages,
      highWater: (runId) =>
        Effect.suspend(() => {
          const state = index.runs.get(runId)
          return state === undefined
            ? Effect.fail(runNotFound(runId))
            : Effect.succeed(new HighWater({ seq: state.tail.seq, digest: state.tail.digest }, true))
        }),
      listRuns: () => Effect.sync(() => index.runOrder.map((r) => RunId.make(r, true))),
      exportRows: reads.exportRows
    })
  })

/** The JSONL store over `options.workspace` as a Layer; a writer holds the lock until the layer's scope closes. */
export const layer = (
  options: JsonlStoreOptions
): Layer.Layer<
  RuntimeEventStore,
  WorkspaceNotFound | WorkspaceLocked | LedgerCorruption | StoreReadFailed,
  FileSystem.FileSystem | WorkspaceLock
> => Layer.scoped(RuntimeEventStore, make(options))
