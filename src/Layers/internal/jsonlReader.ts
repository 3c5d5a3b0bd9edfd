// The read side of the JSONL store (docs/spec/01-ledger.md, "Reading"): the read methods a writer and a reader share
// (a writer reads only what it acknowledged; a reader reads to EOF and judges a torn tail by probing the locks), and
// the read-only store.
import * as FileSystem from "@effect/platform/FileSystem"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { LedgerCorruption, RuntimeOffsetMismatch, StoreReadFailed, StoreWriteFailed } from "../../Domain/Errors.js"
import type { RunNotFound } from "../../Domain/Errors.js"
import { HighWater } from "../../Domain/HighWater.js"
import { RunId } from "../../Domain/Ids.js"
import type { RunVerifier } from "../../Domain/Rules/RunVerifier.js"
import * as VerifiedRead from "../../Domain/Rules/VerifiedRead.js"
import type { CommittedRow } from "../../Domain/RuntimeEvent.js"
import { RuntimeEventStore } from "../../Services/RuntimeEventStore.js"
import type {
  RunScanItem,
  RuntimeEventStoreShape
} from "../../Services/RuntimeEventStore.js"
import type { WorkspaceLockService } from "../../Services/WorkspaceLock.js"
import { RunFold, ScanFold, StoreFold, StoreTracker } from "./jsonlFold.js"
import {
  scanLedger,
  tailInFlight,
  tornTailError,
  verifyLedger
} from "./jsonlFiles.js"
import type { JsonlPaths } from "./jsonlFiles.js"
import type { TornTail } from "./jsonlScan.js"
import { wholeFileTailRefusal } from "./jsonlQuarantine.js"
import * as JsonlRunHeaderStore from "../JsonlRunHeaderStore.js"
import { callStateFromRows, TailIndex, unsettledFromRows } from "./TailIndex.js"
import { cutPrefix, pickRows, runNotFound } from "./verifyRows.js"

/**
 * The failure of a torn tail for `runId`: `torn_row`, unless the tail is the whole file and quarantine would refuse it
 * (a first row that does not decode or chain): then that refusal, which no repair can mend (docs/recovery.md).
 *
 * @since 0.1.0
 * @category layers
 */
export const tailFailure = (
  fs: FileSystem.FileSystem,
  paths: JsonlPaths,
  runId: string | undefined,
  tail: TornTail
): Effect.Effect<LedgerCorruption, StoreReadFailed> =>
  Effect.map(wholeFileTailRefusal(fs, paths, tail), (refusal) =>
    refusal === undefined
      ? tornTailError(runId, tail, paths)
      : runId === undefined || refusal.runId === runId
      ? refusal
      : new LedgerCorruption({ runId, reason: refusal.reason, message: refusal.message, ...(refusal.line !== undefined ? { line: refusal.line } : {}) }))

/**
 * How the read methods treat the file: a writer reads only what it acknowledged; a reader reads to EOF and
 * judges a torn tail by probing the lock.
 *
 * @since 0.1.0
 * @category models
 */
export interface ReadMode {
  readonly bound: () => number | undefined
  readonly judgeTail: (tail: TornTail, scannedBytes: number) => Effect.Effect<boolean, StoreReadFailed>
}

/**
 * The read methods over the ledger file, bounded and judged as `readMode` says (a writer's or a reader's).
 *
 * @since 0.1.0
 * @category layers
 */
export const readMethods = (fs: FileSystem.FileSystem, paths: JsonlPaths, readMode: ReadMode) => {
  // A tail with a complete line that is JSON but no row is never an append in flight (a writer appends whole rows):
  // it fails whatever the lock says (docs/spec/01-ledger.md, "torn_row"; `TornTail.notRow`).
  const mode: ReadMode = {
    bound: readMode.bound,
    judgeTail: (tail, scannedBytes) => tail.notRow !== undefined ? Effect.succeed(false) : readMode.judgeTail(tail, scannedBytes)
  }
  // Fails with the torn tail unless it is an append in flight.
  const onTail = <A, E>(
    tail: TornTail | undefined,
    scannedBytes: number,
    runId: string | undefined,
    after: Stream.Stream<A, E>
  ): Stream.Stream<A, E | LedgerCorruption | StoreReadFailed> =>
    tail === undefined ? after : Stream.unwrap(
      Effect.flatMap(
        mode.judgeTail(tail, scannedBytes),
        (inFlight): Effect.Effect<Stream.Stream<A, E | LedgerCorruption>, StoreReadFailed> =>
          inFlight ? Effect.succeed(after) : Effect.map(tailFailure(fs, paths, runId, tail), (error) => Stream.fail(error))
      )
    )

  // Registered as a verified read: `planResume` given this very stream shares its reader's call index.
  const readRunPages: RuntimeEventStoreShape["readRunPages"] = (runId, pageSize) =>
    VerifiedRead.register(runPages(runId, pageSize), (onVerifier) => runPages(runId, pageSize, onVerifier))

  // `onVerifier`: the followed read, handing its verifier over before its first row and marking no row.
  const runPages = (runId: RunId, pageSize: number, onVerifier?: (verifier: RunVerifier) => void) =>
    Stream.suspend(() => {
      const fold = new RunFold(runId, onVerifier !== undefined ? { marks: false } : {})
      onVerifier?.(fold.verifier)
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

  // The file has no seq index: the window is cut from a verified read of the run (stopping once it is full).
  const readRunFrom: RuntimeEventStoreShape["readRunFrom"] = (runId, fromSeq, limit) => {
    const from = Math.max(1, Math.floor(fromSeq) || 1)
    const size = Math.max(0, Math.floor(limit) || 0)
    return readRunPages(runId, 4096).pipe(
      Stream.filter((row) => size === 0 || row.seq >= from),
      Stream.take(Math.max(1, size)),
      Stream.runCollect,
      Effect.map((chunk) => size === 0 ? [] : Chunk.toReadonlyArray(chunk))
    )
  }

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
            Effect.flatMap(mode.judgeTail(tail, scanner.bytes), (inFlight) => {
              if (inFlight) return Effect.void
              // A file whose every byte is a torn tail naming no run (a torn first append, lines that are no row)
              // holds no run that can be read: it fails, never reads as "no runs".
              if (runs.length === 0 && tail.runIds.length === 0) return Effect.fail(tornTailError(undefined, tail, paths))
              runs = [...runs, ...tail.runIds.filter((r) => !runs.includes(r))]
              return Effect.void
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
          // No planner's mark on the rows: an export writes them out and drops them (a mark only lets a planner
          // given the same row object skip its re-check; without one it checks the row). Less garbage per row.
          fold ??= new StoreFold(new StoreTracker(), () => scanner.firstRunId, { marks: false })
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

  // Every run in one read of the file (docs/spec/06-cli.md: a read verb reads the file once, whatever the number of runs).
  // Registered as a verified scan: a planner that follows it (`VerifiedRead.scanFollowOf`) gets each run's verifier
  // before the run's first item and shares its call index.
  const scanRuns: NonNullable<RuntimeEventStoreShape["scanRuns"]> = (_, only) => {
    const mine = (item: RunScanItem) => only === undefined || (item._tag === "Row" ? item.row.event.runId : item.runId) === only
    return VerifiedRead.registerScan(
      Stream.filter(scanAll(), mine),
      (onVerifier) =>
        Stream.filter(scanAll((verifier) => {
          if (only === undefined || verifier.runId === only) onVerifier(verifier)
        }), mine)
    )
  }
  const scanAll = (onVerifier?: (verifier: RunVerifier) => void): Stream.Stream<RunScanItem, LedgerCorruption | StoreReadFailed> =>
    Stream.suspend(() => {
      const fold = new ScanFold(onVerifier)
      const bytesToRead = mode.bound()
      return scanLedger(
        fs,
        paths.ledger,
        { keepRows: true, ...(bytesToRead !== undefined ? { bytesToRead } : {}) },
        (items) => {
          const out: Array<RunScanItem> = []
          fold.process(items, out)
          return { rows: out, failure: undefined as never }
        },
        (tail, scanner) =>
          tail === undefined ? Stream.suspend(() => {
            const out: Array<RunScanItem> = []
            fold.finish([], undefined, out)
            return Stream.fromIterable(out)
          }) : Stream.unwrap(
            Effect.map(Effect.flatMap(mode.judgeTail(tail, scanner.bytes), (inFlight) =>
              inFlight || fold.runs.length > 0
                ? Effect.succeed({ inFlight, refusal: undefined as LedgerCorruption | undefined })
                : Effect.map(wholeFileTailRefusal(fs, paths, tail), (refusal) => ({ inFlight, refusal }))),
            ({ inFlight, refusal }): Stream.Stream<RunScanItem, LedgerCorruption> => {
              if (inFlight) {
                const out: Array<RunScanItem> = []
                fold.finish([], undefined, out)
                return Stream.fromIterable(out)
              }
              // A file with no run at all that is not whole (a torn first append, bytes that are no row): it holds
              // no runs that can be read, never "no runs".
              if (fold.runs.length === 0 && tail.runIds.length === 0) return Stream.fail(tornTailError(undefined, tail, paths))
              const out: Array<RunScanItem> = []
              // A whole-file tail that quarantine would refuse fails as that refusal (`tailFailure`).
              fold.finish(tail.runIds, (runId) =>
                refusal === undefined ? tornTailError(runId, tail, paths) : refusal.runId === runId ? refusal :
                  new LedgerCorruption({ runId, reason: refusal.reason, message: refusal.message, ...(refusal.line !== undefined ? { line: refusal.line } : {}) }), out)
              return Stream.fromIterable(out)
            })
          )
      )
    })

  return { readRunPages, readRunFrom, readRun, scannedHighWater, scannedRuns, exportRows, scanRuns }
}

const readOnlyRefusal = (runId: string, paths: JsonlPaths) =>
  new StoreWriteFailed({
    runId,
    cause: "read-only store",
    message: `the JSONL store over ${paths.workspace} was opened read-only; open it for writing to append`
  })

/**
 * The read-only JSONL store: no lock, no index; every append is refused, every read streams and verifies the file.
 *
 * @since 0.1.0
 * @category layers
 */
export const makeReader = (
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
          verified.tail.notRow !== undefined ? Effect.succeed(false) : tailInFlight(fs, lock, paths, verified.bytes),
          (inFlight) => inFlight ? listed : Effect.flatMap(tailFailure(fs, paths, verified.firstRunId, verified.tail!), Effect.fail)
        )
      }),
    // A reader keeps no index: it reads the run (docs/spec/01-ledger.md: readers stream and verify).
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
    readRowsAt: pickRows(reads.readRun),
    readRunFrom: reads.readRunFrom,
    highWater: reads.scannedHighWater,
    listRuns: reads.scannedRuns,
    exportRows: reads.exportRows,
    scanRuns: reads.scanRuns,
    sidecarCheck: headersCheck(fs, paths)
  })
}

/**
 * The run headers beside the ledger (docs/spec/04-continuation.md) recover like its events: a torn last line is reported, not read past.
 *
 * @since 0.1.0
 * @category layers
 */
export const headersCheck = (fs: FileSystem.FileSystem, paths: JsonlPaths) => () =>
  Effect.provideService(JsonlRunHeaderStore.checkFile(paths.workspace), FileSystem.FileSystem, fs)

