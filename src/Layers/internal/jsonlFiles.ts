// File plumbing of the JSONL store: its file names, streaming the ledger through the scanner, the torn-tail
// verdict of a reader (probe the writer lock), whole-file verification, and directory fsync.
import type * as FileSystem from "@effect/platform/FileSystem"
import type { PlatformError } from "@effect/platform/Error"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { createHash } from "node:crypto"
import * as NodePath from "node:path"
import { StoreReadFailed, StoreWriteFailed, WorkspaceNotFound } from "../../Domain/Errors.js"
import type { LedgerCorruption } from "../../Domain/Errors.js"
import type { CommittedRow } from "../../Domain/RuntimeEvent.js"
import type { WorkspaceLockService } from "../../Services/WorkspaceLock.js"
import { StoreFold, StoreTracker, tornTail } from "./jsonlFold.js"
import { classifyLine, LineScanner, LineSplitter } from "./jsonlScan.js"
import { refuseSymlinks } from "./symlinks.js"
import type { RowItem, ScanItem, ScannedItem, SpanItem, TornTail } from "./jsonlScan.js"

/**
 * The ledger's file name inside a workspace.
 *
 * @since 0.1.0
 * @category constants
 */
export const FILE_NAME = "runtime-events.jsonl"
/**
 * The writer lock's file name inside a workspace (a better-sqlite3 lock database, see WorkspaceLock).
 *
 * @since 0.1.0
 * @category constants
 */
export const LOCK_FILE_NAME = "runtime-events.lock"
/**
 * The append lock's file name: every writer (a host, and a person's decision while the host runs) holds it around
 * each write, and reads what others appended before writing (docs/stores.md "JSONL").
 *
 * @since 0.1.0
 * @category constants
 */
export const APPEND_LOCK_FILE_NAME = "runtime-events.append.lock"
/**
 * The quarantine log's file name inside a workspace.
 *
 * @since 0.1.0
 * @category constants
 */
export const QUARANTINE_LOG_NAME = "runtime-events.quarantine.log"
/**
 * The name of the n-th quarantine file.
 *
 * @since 0.1.0
 * @category layers
 */
export const quarantineFileName = (n: number): string => `${FILE_NAME}.quarantine-${n}`

/**
 * The paths of a workspace's files.
 *
 * @since 0.1.0
 * @category models
 */
export interface JsonlPaths {
  readonly workspace: string
  readonly ledger: string
  readonly lock: string
  readonly appendLock: string
}

/**
 * The paths of the JSONL files in `workspace`.
 *
 * @since 0.1.0
 * @category layers
 */
export const pathsOf = (workspace: string): JsonlPaths => ({
  workspace,
  ledger: NodePath.join(workspace, FILE_NAME),
  lock: NodePath.join(workspace, LOCK_FILE_NAME),
  appendLock: NodePath.join(workspace, APPEND_LOCK_FILE_NAME)
})

// Bytes per read while streaming the ledger.
const CHUNK_SIZE = 256 * 1024

const describe = (error: PlatformError): string => error.message

/**
 * A `StoreReadFailed` for an I/O failure on `path`.
 *
 * @since 0.1.0
 * @category layers
 */
export const readFailed = (path: string, what: string) => (error: PlatformError): StoreReadFailed =>
  new StoreReadFailed({ path, cause: describe(error), message: `could not ${what} ${path}: ${describe(error)}` })

/**
 * A `StoreWriteFailed` for an I/O failure on `path`.
 *
 * @since 0.1.0
 * @category layers
 */
export const writeFailed = (runId: string, path: string, what: string) => (error: PlatformError): StoreWriteFailed =>
  new StoreWriteFailed({ runId, cause: describe(error), message: `could not ${what} ${path}: ${describe(error)}` })

/**
 * Whether a path exists (`stat` only: it opens nothing).
 *
 * @since 0.1.0
 * @category layers
 */
export const exists = (fs: FileSystem.FileSystem, path: string): Effect.Effect<boolean, StoreReadFailed> =>
  fs.stat(path).pipe(
    Effect.as(true),
    Effect.catchIf((e) => e._tag === "SystemError" && e.reason === "NotFound", () => Effect.succeed(false)),
    Effect.mapError(readFailed(path, "stat"))
  )

/**
 * Fails with `WorkspaceNotFound` unless the workspace holds a JSONL ledger (`StoreReadFailed` if either is a symlink). Creates nothing.
 *
 * @since 0.1.0
 * @category layers
 */
export const requireLedger = (
  fs: FileSystem.FileSystem,
  paths: JsonlPaths
): Effect.Effect<void, WorkspaceNotFound | StoreReadFailed> =>
  Effect.flatMap(Effect.zipRight(refuseSymlinks(fs, paths.workspace, [FILE_NAME]), exists(fs, paths.ledger)), (found) =>
    found ? Effect.void : Effect.fail(
      new WorkspaceNotFound({
        workspace: paths.workspace,
        message: `${paths.workspace} holds no JSONL ledger (${FILE_NAME}); nothing was created`
      })
    ))

/**
 * fsyncs a directory, so that a file created in it survives a power loss.
 *
 * @since 0.1.0
 * @category layers
 */
export const syncDirectory = (fs: FileSystem.FileSystem, dir: string): Effect.Effect<void, PlatformError> =>
  Effect.scoped(Effect.flatMap(fs.open(dir, { flag: "r" }), (d) => d.sync))

// Whether a path exists, keeping other failures as they are.
const present = (fs: FileSystem.FileSystem, path: string): Effect.Effect<boolean, PlatformError> =>
  fs.stat(path).pipe(
    Effect.as(true),
    Effect.catchIf((e) => e._tag === "SystemError" && e.reason === "NotFound", () => Effect.succeed(false))
  )

/**
 * Creates `dir` and its missing parents (each with `mode`), then fsyncs the parent of every folder it created,
 * deepest first: a recursive mkdir makes no entry durable, and a folder whose own entry is lost takes everything
 * in it along, however well that was synced.
 *
 * @since 0.1.0
 * @category layers
 */
export const makeDirectoryDurably = (
  fs: FileSystem.FileSystem,
  dir: string,
  mode: number
): Effect.Effect<void, PlatformError> =>
  Effect.gen(function*() {
    const target = NodePath.resolve(dir)
    // The folders this call creates, deepest first (a concurrent creator only makes us fsync one more parent).
    const missing: Array<string> = []
    for (let at = target; !(yield* present(fs, at)); at = NodePath.dirname(at)) {
      missing.push(at)
      if (NodePath.dirname(at) === at) break
    }
    yield* fs.makeDirectory(target, { recursive: true, mode })
    for (const created of missing) yield* syncDirectory(fs, NodePath.dirname(created))
  })

/**
 * How many line bytes of an append group a reader holds before it keeps the group as a byte range to read again
 * (`SpanItem`), and test hooks: `beforeReread` runs before each such re-read, `onScanEnd` when a scan's input ends.
 * Internal. 1 MiB: an ordinary append's group stays far below it (read once); an import's group (a whole run) and
 * a bulk writer's 5,000-line groups are read twice, in exchange for holding at most 1 MiB of lines (plus their
 * parsed values) instead of the group (docs/benchmarks.md, session 9).
 *
 * @since 0.1.0
 * @category layers
 */
export const readerTuning: {
  spanBytes: number
  beforeReread: ((span: SpanItem) => void) | undefined
  onScanEnd: ((scanner: LineScanner) => void) | undefined
} = { spanBytes: 1024 * 1024, beforeReread: undefined, onScanEnd: undefined }

/**
 * What one scan step produced: the rows verified so far, and the failure that stopped it, if any.
 *
 * @since 0.1.0
 * @category models
 */
export interface ScanStep<A, E> {
  readonly rows: ReadonlyArray<A>
  readonly failure: E | undefined
}

// The reader's error when a region read again is not what the first read saw.
const changedUnder = (path: string, span: SpanItem, detail: string): StoreReadFailed =>
  new StoreReadFailed({
    path,
    cause: "the ledger changed under the reader",
    message: `${path} changed while it was read: lines ${span.line}..${span.line + span.lines - 1} (bytes ` +
      `${span.offset}..${span.endOffset}, one append group of run ${span.runId}) were read again and ${detail}. ` +
      "Committed lines are never rewritten: stop every process on this workspace, then run `runtime-resume verify` on it"
  })

/**
 * Streams the ledger (its first `bytesToRead` bytes when given) through a scanner. `step` turns the items that
 * became committed into output; `finish` runs at the end with the torn tail, if any.
 *
 * Readers (`keepRows` without `provisional`) hold at most `readerTuning.spanBytes` of an open group: past that, the
 * scanner keeps the group's byte range, and once the group completes its lines are read again here, checked to be
 * exactly the rows the first read saw (each a row continuing the group, the same seqs, lines and SHA-256 of their
 * bytes; else `StoreReadFailed`, the file changed under the reader) and handed to `step` in order, chunk by chunk.
 *
 * @since 0.1.0
 * @category layers
 */
export const scanLedger = <A, E, E2>(
  fs: FileSystem.FileSystem,
  path: string,
  options: { readonly bytesToRead?: number; readonly keepRows: boolean; readonly provisional?: boolean },
  step: (items: ReadonlyArray<ScanItem>, scanner: LineScanner) => ScanStep<A, E>,
  finish: (tail: TornTail | undefined, scanner: LineScanner) => Stream.Stream<A, E2>
): Stream.Stream<A, E | E2 | StoreReadFailed> =>
  Stream.suspend(() => {
    const provisional = options.provisional === true
    const scanner = new LineScanner(
      options.keepRows,
      provisional,
      options.keepRows && !provisional ? readerTuning.spanBytes : undefined
    )
    // `step` over items, its rows, then its failure if any.
    const stepped = (items: ReadonlyArray<ScanItem>): Stream.Stream<A, E> => {
      const result = step(items, scanner)
      const rows = Stream.fromChunk(Chunk.unsafeFromArray(result.rows))
      // The rows verified before a failure are emitted first, so a consumer knows the last good row.
      return result.failure === undefined ? rows : Stream.concat(rows, Stream.fail(result.failure))
    }
    const reread = (span: SpanItem): Stream.Stream<A, E | StoreReadFailed> =>
      Stream.suspend(() => {
        readerTuning.beforeReread?.(span)
        const splitter = new LineSplitter()
        const hash = createHash("sha256")
        const length = span.endOffset - span.offset
        let seq = span.firstSeq
        let changed: string | undefined
        const body = fs.stream(path, { chunkSize: CHUNK_SIZE, offset: span.offset, bytesToRead: length }).pipe(
          Stream.mapError(readFailed(path, "read")),
          Stream.chunks,
          Stream.flatMap((chunks): Stream.Stream<A, E | StoreReadFailed> => {
            const items: Array<RowItem> = []
            for (const chunk of chunks) {
              splitter.push(chunk, (bytes, n, offset) => {
                if (changed !== undefined) return
                hash.update(bytes)
                const c = classifyLine(bytes)
                if (
                  n > span.lines || c._tag !== "Row" || c.seq !== seq || c.end !== span.end ||
                  (n === 1 && c.eventRunId !== span.runId)
                ) {
                  changed = `line ${span.line + n - 1} is no longer the row of seq ${seq} of that group`
                  return
                }
                seq++
                const line = span.line + n - 1
                items.push({ _tag: "Row", runId: span.runId, line, offset: span.offset + offset, seq: c.seq, end: c.end, text: c.text, value: c.value })
              })
            }
            const rows = items.length > 0 ? Stream.suspend(() => stepped(items)) : Stream.empty
            return changed === undefined ? rows : Stream.concat(rows, Stream.fail(changedUnder(path, span, changed)))
          })
        )
        return Stream.concat(body, Stream.suspend((): Stream.Stream<never, StoreReadFailed> => {
          if (changed !== undefined) return Stream.fail(changedUnder(path, span, changed))
          if (splitter.bytes !== length || splitter.partialLength > 0 || splitter.lines !== span.lines) {
            return Stream.fail(changedUnder(path, span, `${splitter.bytes} of its ${length} bytes were found, in ${splitter.lines} lines of ${span.lines}`))
          }
          if (hash.digest("hex") !== span.hash) return Stream.fail(changedUnder(path, span, "their bytes differ"))
          return Stream.empty
        }))
      })
    const body = fs.stream(path, {
      chunkSize: CHUNK_SIZE,
      ...(options.bytesToRead !== undefined ? { bytesToRead: options.bytesToRead } : {})
    }).pipe(
      Stream.mapError(readFailed(path, "read")),
      Stream.chunks,
      Stream.flatMap((chunks): Stream.Stream<A, E | StoreReadFailed> => {
        const items: Array<ScannedItem> = []
        for (const chunk of chunks) scanner.push(chunk, items)
        if (items.length === 0) return Stream.empty
        if (!items.some((item) => item._tag === "Span")) return stepped(items as Array<ScanItem>)
        // In file order: the items before a span, the span read again, the items after it.
        const parts: Array<Array<ScanItem> | SpanItem> = []
        for (const item of items) {
          if (item._tag === "Span") parts.push(item)
          else {
            const lastPart = parts[parts.length - 1]
            if (Array.isArray(lastPart)) lastPart.push(item)
            else parts.push([item])
          }
        }
        return Stream.flatMap(
          Stream.fromIterable(parts),
          (part): Stream.Stream<A, E | StoreReadFailed> => Array.isArray(part) ? Stream.suspend(() => stepped(part)) : reread(part)
        )
      })
    )
    return Stream.concat(body, Stream.suspend(() => {
      const tail = scanner.end()
      readerTuning.onScanEnd?.(scanner)
      return finish(tail, scanner)
    }))
  })

/**
 * A reader's verdict on a torn tail: `true` when it is an append in flight, to be ignored. That is when a writer
 * holds the lock (the instant probe, the only lock a reader touches), or when the file changed since it was read
 * (a writer finished or rolled back in between; a writer never opens over a torn tail).
 *
 * @since 0.1.0
 * @category layers
 */
export const tailInFlight = (
  fs: FileSystem.FileSystem,
  lock: WorkspaceLockService,
  paths: JsonlPaths,
  scannedBytes: number
): Effect.Effect<boolean, StoreReadFailed> =>
  Effect.flatMap(Effect.zipWith(lock.probe(paths.lock), lock.probe(paths.appendLock), (a, b) => a === "held" || b === "held"), (held) =>
    held ? Effect.succeed(true) : fs.stat(paths.ledger).pipe(
      Effect.map((info) => Number(info.size) !== scannedBytes),
      Effect.mapError(readFailed(paths.ledger, "stat"))
    ))

/**
 * The outcome of verifying a whole ledger: every run's verifier, the torn tail if any, and the bytes read.
 *
 * @since 0.1.0
 * @category models
 */
export interface VerifiedLedger {
  readonly fold: StoreFold
  readonly tail: TornTail | undefined
  readonly bytes: number
  readonly firstRunId: string | undefined
}

// The whole-file verification keeps no rows, so none needs a planner's mark.
const NO_MARKS = { marks: false } as const

/**
 * Reads and verifies the whole ledger with every rule of 01 (store-wide ids and invocations included), without
 * keeping rows. Corruption before the tail fails; the tail is returned for the caller to judge.
 *
 * The rows of a group are verified as they come, not held until the group's last line (an import writes a run as
 * ONE group, of any size): the scanner hands them on provisionally. A failure in a provisional row waits for the
 * group to complete (it is then the file's first failure, as it would have been) or to turn out a torn tail (it is
 * then no failure: the tail is). When the file ends in a torn tail after provisional rows, their effect on the fold
 * is taken back by verifying again up to the tail's offset (whole groups only: the same verdict as a first pass
 * that held the tail back). `ids`, when given, is filled with the ids of the committed rows, those of the tail not.
 *
 * @since 0.1.0
 * @category layers
 */
export const verifyLedger = (
  fs: FileSystem.FileSystem,
  path: string,
  ids?: Set<string>,
  bytesToRead?: number
): Effect.Effect<VerifiedLedger, LedgerCorruption | StoreReadFailed> =>
  Effect.suspend(() => {
    let fold: StoreFold | undefined
    let result: VerifiedLedger | undefined
    // A failure in a row not committed yet, and its line: it counts once that line is committed.
    let deferred: { readonly error: LedgerCorruption; readonly line: number } | undefined
    let retract = false
    const pass = scanLedger<CommittedRow, LedgerCorruption, LedgerCorruption>(
      fs,
      path,
      { keepRows: true, provisional: true, ...(bytesToRead !== undefined ? { bytesToRead } : {}) },
      (items, scanner) => {
        fold ??= new StoreFold(new StoreTracker(ids), () => scanner.firstRunId, NO_MARKS)
        if (deferred === undefined) {
          const failure = fold.process(items)
          if (failure === undefined || fold.failedLine < scanner.committedLine) return { rows: [], failure }
          deferred = { error: failure, line: fold.failedLine }
          return { rows: [], failure: undefined }
        }
        return { rows: [], failure: deferred.line < scanner.committedLine ? deferred.error : undefined }
      },
      (tail, scanner) => {
        if (tail === undefined && deferred !== undefined) return Stream.fail(deferred.error)
        retract = tail !== undefined && scanner.handedOnUncommitted
        const cut = retract ? undefined : fold?.finish()
        if (cut !== undefined) return Stream.fail(cut)
        result = {
          fold: fold ?? new StoreFold(new StoreTracker(ids), () => scanner.firstRunId, NO_MARKS),
          tail,
          bytes: scanner.bytes,
          firstRunId: scanner.firstRunId
        }
        return Stream.empty
      }
    ).pipe(Stream.runDrain, Effect.map(() => result!))
    return Effect.flatMap(pass, (first) => {
      if (!retract || first.tail === undefined) return Effect.succeed(first)
      // Rows of the torn tail were verified: verify the whole groups before it again, from a clean fold.
      const tail = first.tail
      ids?.clear()
      if (tail.offset === 0) {
        return Effect.succeed<VerifiedLedger>({ ...first, fold: new StoreFold(new StoreTracker(ids), () => first.firstRunId, NO_MARKS) })
      }
      return Effect.map(verifyLedger(fs, path, ids, tail.offset), (again): VerifiedLedger => ({
        fold: again.fold,
        // The file cut at the tail's offset ends on a complete group; if it shrank meanwhile, its own tail counts.
        tail: again.tail ?? tail,
        bytes: again.tail === undefined ? first.bytes : again.bytes,
        firstRunId: first.firstRunId
      }))
    })
  })

/**
 * The `torn_row` failure of a torn tail for `runId` (or the file's first run).
 *
 * @since 0.1.0
 * @category layers
 */
export const tornTailError = (runId: string | undefined, tail: TornTail, paths: JsonlPaths): LedgerCorruption =>
  tornTail(runId ?? tail.runIds[0] ?? "", tail, paths.ledger)
