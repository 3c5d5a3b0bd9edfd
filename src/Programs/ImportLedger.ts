// `import` (docs/spec/06-cli.md): validates a whole file of bare RuntimeEvents or of store-format lines against the store, then
// writes every new event in ONE `appendBatch` in restore mode. Any failure writes nothing; stored events are skipped.
import * as FileSystem from "@effect/platform/FileSystem"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as Digest from "../Domain/Digest.js"
import type { AppendRejected, ImportInvalid, RunSealed } from "../Domain/Errors.js"
import { RunId } from "../Domain/Ids.js"
import type { CommittedRow, RuntimeEvent } from "../Domain/RuntimeEvent.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type {
  ProvenEvent,
  ProvenRestorePlan,
  RestorePlan,
  RunBatch,
  RuntimeEventStoreShape
} from "../Services/RuntimeEventStore.js"
import type * as LedgerRules from "../Domain/Rules/LedgerRules.js"
import type { RecoverySection } from "./ImportRecoverySection.js"
import { checkGroups, checkRun, checkStoredPrefix, opensRun, StreamCheck } from "./internal/importChecks.js"
import { ledgerImportOf } from "./internal/importSummary.js"
import type { ImportEntry, ImportFormat } from "./internal/importLine.js"
import { ProvenLines } from "./internal/importLine.js"
import { FileParser } from "./internal/importParser.js"
import { guard, invalid, Refusal, unreadable } from "./internal/importRefusal.js"

export type { ImportEntry, ImportFormat } from "./internal/importLine.js"
export { MAX_LINE_BYTES, ProvenLines } from "./internal/importLine.js"
export { eventNames, provenBytes, writtenSpan } from "./internal/importScanner.js"

/**
 * What the import did to one run of the file.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunImport {
  readonly runId: string
  /** Events written by this import. */
  readonly added: number
  /** Events of the file already stored with identical bytes. */
  readonly skipped: number
  /** The run's high-water after the import. */
  readonly highWater: { readonly seq: number; readonly digest: string }
}

/**
 * What the import did, run by run in order of each run's first line.
 *
 * @since 0.1.0
 * @category models
 */
export interface LedgerImport {
  readonly file: string
  /** `null` for a file with no non-blank line. */
  readonly format: ImportFormat | null
  readonly added: number
  readonly skipped: number
  readonly runs: ReadonlyArray<RunImport>
}

// Bytes per read of the import file: the file is streamed, never held whole.
const CHUNK_SIZE = 1024 * 1024

/**
 * An import file read and checked on its own, before any store is opened, with every entry held.
 *
 * @since 0.1.0
 * @category models
 */
export interface PreparedInMemory {
  readonly _tag: "InMemory"
  readonly file: string
  /** `null` for a file with no non-blank line. */
  readonly format: ImportFormat | null
  /** Each run's entries in file order; runs in order of their first line. */
  readonly runs: ReadonlyMap<string, ReadonlyArray<ImportEntry>>
  /** The line of every event id. */
  readonly lineOfId: ReadonlyMap<string, number>
  /** Runs of the file that continue a stored run (they do not start at seq 1): checked against the store. */
  readonly increments: ReadonlySet<string>
  /** Which run of the file opens each invocation (the first that does). */
  readonly invocationOwners: ReadonlyMap<string, string>
  /** The file's recovery section: its run headers and claims (none in a version 1 file). */
  readonly section: RecoverySection
}

/**
 * One run of a file checked in one streaming pass: what writing it needs, not its events.
 *
 * @since 0.1.0
 * @category models
 */
export interface StreamedRun {
  readonly runId: string
  /** The line of its first event, and how many events the file holds for it. */
  readonly firstLine: number
  readonly events: number
  /** The high-water its events reach from an empty run (the chain over their canonical bytes). */
  readonly final: { readonly seq: number; readonly digest: string }
  /**
   * The state the check left the run in, when that check was the restore check a store makes (for `restoreProven`):
   * its tail and its call index. `undefined` when it was not (see `StreamCheck.restoreChecked`).
   */
  readonly checked: { readonly tail: LedgerRules.RunTail; readonly calls: ReadonlyArray<LedgerRules.CallEntry> } | undefined
}

/**
 * An import file checked in one streaming pass, holding O(runs + ids): each run opens in the file, its lines are
 * contiguous, and only its tail and call index were kept while checking. `importPrepared` reads the file again to
 * write it (`restoreProven` when every run's check was a restore check and the store has it, else `restoreStream`), or,
 * when a run of it is already stored or the store cannot stream, reads it in memory.
 *
 * @since 0.1.0
 * @category models
 */
export interface PreparedStream {
  readonly _tag: "Stream"
  readonly file: string
  /** `null` for a file with no non-blank line. */
  readonly format: ImportFormat | null
  /** Runs in order of their first line (which is file order: each run's lines are contiguous). */
  readonly runs: ReadonlyMap<string, StreamedRun>
  /** The lines whose event text the check confirmed as written (the write pass does not confirm them again). */
  readonly proven: ProvenLines
  /** Always empty: a file with an increment is prepared in memory. */
  readonly increments: ReadonlySet<string>
  /** Which run of the file opens each invocation (the first that does). */
  readonly invocationOwners: ReadonlyMap<string, string>
  /** The file's recovery section: its run headers and claims (none in a version 1 file). */
  readonly section: RecoverySection
}

/**
 * An import file read and checked on its own, before any store is opened.
 *
 * @since 0.1.0
 * @category models
 */
export type PreparedImport = PreparedInMemory | PreparedStream

/**
 * Reads FILE as a stream of strict UTF-8 lines (bounded: a line over `MAX_LINE_BYTES` is `too_large`), one JSON
 * value per line (blank lines ignored), all bare RuntimeEvents or all store-format lines, and checks everything
 * that does not depend on the store: the strict decode, ids unique in the file, store-format groups, and the rules
 * of docs/spec/01-ledger.md for each run that starts in the file. A run that continues a stored run (an increment) is checked by
 * `importPrepared` from the stored tail. Refusals are `ImportInvalid` naming the line.
 */
const prepareInMemory = Effect.fn("ImportLedger.prepareInMemory")(function*(file: string) {
  const fs = yield* FileSystem.FileSystem
  const entries: Array<ImportEntry> = []
  const parser = new FileParser((entry) => entries.push(entry))
  yield* fs.stream(file, { chunkSize: CHUNK_SIZE }).pipe(
    Stream.mapError(unreadable(file)),
    Stream.runForEach((chunk) => guard(file, () => parser.push(chunk)))
  )
  return yield* guard(file, (): PreparedInMemory => {
    parser.end()
    const { format } = parser
    const lineOfId = new Map<string, number>()
    const runs = new Map<string, Array<ImportEntry>>()
    for (const entry of entries) {
      const first = lineOfId.get(entry.event.id)
      if (first !== undefined) {
        throw new Refusal("duplicate_event_id", `event id ${entry.event.id} is already used at line ${first}`, {
          line: entry.line,
          runId: entry.event.runId,
          eventId: entry.event.id
        })
      }
      lineOfId.set(entry.event.id, entry.line)
      let list = runs.get(entry.event.runId)
      if (list === undefined) runs.set(entry.event.runId, list = [])
      list.push(entry)
    }
    if (format === "rows") checkGroups(entries)
    // An invocation belongs to the first run of the file that opens with it.
    const owners = new Map<string, string>()
    const increments = new Set<string>()
    for (const [runId, list] of runs) {
      if (!opensRun(list[0]!)) {
        increments.add(runId)
        continue
      }
      const inv = list[0]!.event.invocationId
      if (!owners.has(inv)) owners.set(inv, runId)
    }
    // A run that starts in the file is checked here from empty: its stored prefix must reappear byte for byte, so
    // this is the same check as checking its new events from the stored tail.
    for (const [runId, list] of runs) {
      if (!increments.has(runId)) checkRun(runId, [], list, (inv) => owners.get(inv))
    }
    return { _tag: "InMemory", file, format, runs, lineOfId, increments, invocationOwners: owners, section: parser.section }
  })
})

/**
 * Reads FILE as a stream of strict UTF-8 lines (bounded: a line over `MAX_LINE_BYTES` is `too_large`), one JSON
 * value per line (blank lines ignored), all bare RuntimeEvents or all store-format lines, and checks everything
 * that does not depend on the store: the strict decode, ids unique in the file, store-format groups, and the rules
 * of docs/spec/01-ledger.md for each run that starts in the file. A run that continues a stored run (an increment) is checked by
 * `importPrepared` from the stored tail. Refusals are `ImportInvalid` naming the line.
 *
 * One streaming pass holds only each run's tail and call index and the file's ids (`PreparedStream`); a file with an
 * increment, or whose runs' lines interleave, is then read again and held in memory (`PreparedInMemory`).
 *
 * @since 0.1.0
 * @category programs
 */
export const prepareImport = Effect.fn("ImportLedger.prepareImport")(function*(file: string) {
  const fs = yield* FileSystem.FileSystem
  const check = new StreamCheck()
  const parser = new FileParser((entry) => check.add(entry))
  yield* fs.stream(file, { chunkSize: CHUNK_SIZE }).pipe(
    Stream.mapError(unreadable(file)),
    Stream.runForEach((chunk) => guard(file, () => parser.push(chunk)))
  )
  yield* guard(file, () => parser.end())
  const duplicate = check.duplicate
  if (duplicate !== undefined) {
    const first = yield* firstLineOf(fs, file, duplicate.eventId)
    return yield* Effect.fail(invalid(file, new Refusal("duplicate_event_id", `event id ${duplicate.eventId} is already used at line ${first}`, {
      line: duplicate.line,
      runId: duplicate.runId,
      eventId: duplicate.eventId
    })))
  }
  yield* guard(file, () => check.finish())
  if (check.needsMemory) return yield* prepareInMemory(file)
  const runs = new Map<string, StreamedRun>()
  for (const run of check.runs.values()) {
    runs.set(run.runId, {
      runId: run.runId,
      firstLine: run.firstLine,
      events: run.events,
      final: { seq: run.tail.seq, digest: run.tail.digest },
      checked: check.restoreChecked
        ? { tail: run.tail, calls: [...(run.verifier?.calls ?? run.calls).values()] }
        : undefined
    })
  }
  const prepared: PreparedImport = {
    _tag: "Stream",
    file,
    format: parser.format,
    runs,
    proven: parser.written,
    increments: new Set(),
    invocationOwners: check.owners,
    section: parser.section
  }
  return prepared
})

// The first line of FILE that holds the event `eventId` (a refusal's wording: the check pass keeps ids, not lines).
const firstLineOf = (fs: FileSystem.FileSystem, file: string, eventId: string): Effect.Effect<number | undefined, ImportInvalid> =>
  Effect.suspend(() => {
    let found: number | undefined
    const parser = new FileParser((entry) => {
      if (found === undefined && entry.event.id === eventId) found = entry.line
    })
    return fs.stream(file, { chunkSize: CHUNK_SIZE }).pipe(
      Stream.mapError(unreadable(file)),
      Stream.runForEach((chunk) => guard(file, () => parser.push(chunk))),
      Effect.zipRight(guard(file, () => parser.end())),
      Effect.map(() => found)
    )
  })

// A checked file read again through a `FileParser` that pushes what it yields into `out`, streamed as it is read.
const parsedStream = <A>(
  fs: FileSystem.FileSystem,
  file: string,
  parserFor: (push: (item: A) => void) => FileParser
): Stream.Stream<A, ImportInvalid> =>
  Stream.suspend(() => {
    let out: Array<A> = []
    const parser = parserFor((item) => void out.push(item))
    const take = () => {
      const chunk = Chunk.unsafeFromArray(out)
      out = []
      return chunk
    }
    return fs.stream(file, { chunkSize: CHUNK_SIZE }).pipe(
      Stream.mapError(unreadable(file)),
      Stream.mapChunksEffect((chunks) => guard(file, () => {
        for (const chunk of chunks) parser.push(chunk)
        return take()
      })),
      Stream.concat(Stream.suspend(() => Stream.fromEffect(guard(file, () => {
        parser.end()
        return take()
      })).pipe(Stream.flattenChunks)))
    )
  })

// The events of a file checked by `prepareImport` as `restoreProven` takes them, as they are read: a line the check
// proved canonical as written gives its text and the run and id it names, undecoded (`provenEvent`); any other line is
// decoded again in full.
const provenEventsOf = (
  fs: FileSystem.FileSystem,
  file: string,
  proven: ProvenLines,
  format: ImportFormat | null
): Stream.Stream<ProvenEvent, ImportInvalid> =>
  parsedStream<ProvenEvent>(fs, file, (push) =>
    new FileParser((entry) => push({ runId: entry.event.runId, id: entry.event.id, text: entry.text }), proven, push, format))

// The events of a file checked by `prepareImport`, decoded again as they are read (for `restoreStream`); the lines
// the check confirmed as written are not confirmed again (`ProvenLines`).
const eventsOf = (fs: FileSystem.FileSystem, file: string, proven: ProvenLines): Stream.Stream<RuntimeEvent, ImportInvalid> =>
  parsedStream<RuntimeEvent>(fs, file, (push) => new FileParser((entry) => push(entry.event), proven))

/**
 * For a workspace that holds no ledger yet: checks the file's increments against empty runs (where they fail,
 * `opener_invalid` or `seq_gap`), so that a refused file is refused before any ledger is created.
 *
 * @since 0.1.0
 * @category programs
 */
export const checkIncrementsFromEmpty = (prepared: PreparedImport): Effect.Effect<void, ImportInvalid> =>
  guard(prepared.file, () => {
    if (prepared._tag === "Stream") return
    for (const runId of prepared.increments) {
      const list = prepared.runs.get(runId)!
      const fresh = list.slice(checkStoredPrefix(runId, list, []))
      checkRun(runId, [], fresh, (inv) => prepared.invocationOwners.get(inv))
    }
  })

/**
 * Imports a prepared file into the store: events already stored with identical bytes are skipped, an increment of
 * a stored run is checked from that run's stored tail (its seal included), and the rest is written in ONE
 * `appendBatch` in restore mode, expecting each run's current high-water. The store checks again, with what only it
 * can see (ids and invocations of stored runs); any refusal writes nothing. Events only: a version 2 export's run
 * headers and claims (`prepared.section`) are written by `RestoreRunHeaders.importWithHeaders`.
 *
 * @since 0.1.0
 * @category programs
 */
export const importPrepared = Effect.fn("ImportLedger.importPrepared")(function*(prepared: PreparedImport) {
  const store = yield* RuntimeEventStore
  const listed = new Set<string>(yield* store.listRuns())
  if (prepared._tag === "Stream") {
    // Every run proven by the check pass streams through `restoreProven` (PostgreSQL has only that one); any other
    // file through `restoreStream`.
    const proven = store.restoreProven !== undefined && [...prepared.runs.values()].every((run) => run.checked !== undefined)
    if ((proven || store.restoreStream !== undefined) && ![...prepared.runs.keys()].some((runId) => listed.has(runId))) {
      return yield* importStreamed(prepared, store.restoreStream, store.restoreProven)
    }
    // A run of the file is stored (its stored prefix is compared event by event), or the store cannot stream.
    return yield* importInMemory(yield* prepareInMemory(prepared.file), listed)
  }
  return yield* importInMemory(prepared, listed)
})

// Every run of the file is new to the store: the file is read again and written in ONE `restoreStream`, each run
// expected to reach the high-water the check computed (a file changed in between fails, writing nothing).
const importStreamed = (
  prepared: PreparedStream,
  restore: RuntimeEventStoreShape["restoreStream"],
  restoreProven: RuntimeEventStoreShape["restoreProven"]
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const { file } = prepared
    const runs = [...prepared.runs.values()]
    const plans: Array<RestorePlan> = runs.map((run) => ({
      runId: RunId.make(run.runId, true),
      events: run.events,
      expectedHighWater: { seq: 0, digest: Digest.genesis(run.runId) },
      expectedFinal: run.final
    }))
    // The line of a refused event is looked up in the file again (the check pass kept no line per id).
    const refused = (error: AppendRejected | RunSealed) =>
      Effect.flatMap(
        error._tag === "AppendRejected" && error.eventId !== undefined
          ? firstLineOf(fs, file, error.eventId)
          : Effect.succeed(undefined),
        (line) => Effect.fail(storeRefusal(file, error, () => line))
      )
    // Runs the check pass checked as a store's restore would (every run, or none) are written by `restoreProven`
    // when the store has it: the store then neither decodes nor checks each event again (it still chains them).
    const proven: Array<ProvenRestorePlan> = []
    for (const run of runs) if (run.checked !== undefined) {
      proven.push({ runId: RunId.make(run.runId, true), events: run.events, tail: run.checked.tail, calls: run.checked.calls })
    }
    // (`importPrepared` comes here without `restoreStream` only when every run is proven and the store has `restoreProven`.)
    const write = restoreProven !== undefined && proven.length === runs.length
      ? restoreProven(proven, provenEventsOf(fs, file, prepared.proven, prepared.format))
      : restore!(plans, eventsOf(fs, file, prepared.proven))
    const reached = runs.length === 0 ? [] : yield* write.pipe(
      Effect.catchTags({ AppendRejected: refused, RunSealed: refused })
    )
    const report: Array<RunImport> = runs.map((run, i) => ({ runId: run.runId, added: run.events, skipped: 0, highWater: reached[i]! }))
    return ledgerImportOf(file, prepared.format, report)
  })

const importInMemory = (prepared: PreparedInMemory, listed: ReadonlySet<string>) =>
  Effect.gen(function*() {
  const store = yield* RuntimeEventStore
  const { file, lineOfId, runs } = prepared
  const storedRows = new Map<string, ReadonlyArray<CommittedRow>>()
  for (const runId of runs.keys()) {
    storedRows.set(runId, listed.has(runId) ? yield* store.readRun(RunId.make(runId, true)) : [])
  }
  const fresh = yield* guard(file, () => {
    const fresh = new Map<string, ReadonlyArray<ImportEntry>>()
    for (const [runId, list] of runs) {
      const stored = storedRows.get(runId)!
      const rest = list.slice(checkStoredPrefix(runId, list, stored))
      if (prepared.increments.has(runId)) checkRun(runId, stored, rest, (inv) => prepared.invocationOwners.get(inv))
      fresh.set(runId, rest)
    }
    return fresh
  })

  const tailOf = (runId: string) => {
    const stored = storedRows.get(runId)!
    const last = stored[stored.length - 1]
    return last === undefined ? { seq: 0, digest: Digest.genesis(runId) } : { seq: last.seq, digest: last.digest }
  }
  // Runs in the order of their first new event, so a JSONL crash mid-import leaves a prefix of whole groups.
  const batches: Array<RunBatch> = [...fresh]
    .filter(([, list]) => list.length > 0)
    .sort(([, a], [, b]) => a[0]!.line - b[0]!.line)
    .map(([runId, list]) => ({
      runId: RunId.make(runId, true),
      events: list.map((e) => e.event),
      expectedHighWater: tailOf(runId)
    }))

  const written = new Map<string, { readonly seq: number; readonly digest: string }>()
  if (batches.length > 0) {
    const committed = yield* store.appendBatch(batches, { mode: "restore" }).pipe(
      Effect.catchTags({
        AppendRejected: (error) => Effect.fail(storeRefusal(file, error, (id) => lineOfId.get(id))),
        RunSealed: (error) => Effect.fail(storeRefusal(file, error, (id) => lineOfId.get(id)))
      })
    )
    for (const rows of committed) {
      const last = rows[rows.length - 1]
      if (last !== undefined) written.set(last.event.runId, { seq: last.seq, digest: last.digest })
    }
  }

  const report: Array<RunImport> = []
  for (const [runId, list] of runs) {
    const added = fresh.get(runId)!.length
    report.push({ runId, added, skipped: list.length - added, highWater: written.get(runId) ?? tailOf(runId) })
  }
  return ledgerImportOf(file, prepared.format, report)
  })

/**
 * `prepareImport` then `importPrepared`: the events of an `import` of docs/spec/06-cli.md over the store. A version 2 export's run
 * headers and claims are checked but not written here: `RestoreRunHeaders.importWithHeaders` writes them too (the CLI).
 *
 * @since 0.1.0
 * @category programs
 */
export const importLedger = (file: string) => Effect.flatMap(prepareImport(file), importPrepared)

// The store refused the batch (a rule only it can see, such as an id or invocation used by a stored run).
const storeRefusal = (file: string, error: AppendRejected | RunSealed, lineOf: (eventId: string) => number | undefined) => {
  const eventId = error._tag === "AppendRejected" ? error.eventId : undefined
  const line = eventId !== undefined ? lineOf(eventId) : undefined
  return invalid(
    file,
    new Refusal(error._tag === "AppendRejected" ? error.reason : "event_after_terminal", error.message, {
      runId: error.runId,
      ...(line !== undefined ? { line } : {}),
      ...(eventId !== undefined ? { eventId } : {})
    })
  )
}
