// `import` (spec 06): validates a whole file of bare RuntimeEvents or of store-format lines against the store, then
// writes every new event in ONE `appendBatch` in restore mode. Any failure writes nothing; stored events are skipped.
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as CanonicalJson from "../Domain/CanonicalJson.js"
import * as Digest from "../Domain/Digest.js"
import type { AppendRejected, RunSealed } from "../Domain/Errors.js"
import { ImportInvalid } from "../Domain/Errors.js"
import type { ImportInvalidReason } from "../Domain/Errors.js"
import { RunId } from "../Domain/Ids.js"
import type { CommittedRow, RuntimeEvent } from "../Domain/RuntimeEvent.js"
import { CommittedRow as CommittedRowSchema, canonicalText, decodeEvent, rememberCanonicalText } from "../Domain/RuntimeEvent.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type { RunBatch } from "../Services/RuntimeEventStore.js"
import * as AppendCheck from "./AppendCheck.js"
import * as LedgerRules from "./LedgerRules.js"
import * as RunVerifier from "./RunVerifier.js"

/** What one file line holds: a bare event, or a committed row as `export` writes it. */
export type ImportFormat = "events" | "rows"

/** What the import did to one run of the file. */
export interface RunImport {
  readonly runId: string
  /** Events written by this import. */
  readonly added: number
  /** Events of the file already stored with identical bytes. */
  readonly skipped: number
  /** The run's high-water after the import. */
  readonly highWater: { readonly seq: number; readonly digest: string }
}

/** What the import did, run by run in order of each run's first line. */
export interface LedgerImport {
  readonly file: string
  /** `null` for a file with no non-blank line. */
  readonly format: ImportFormat | null
  readonly added: number
  readonly skipped: number
  readonly runs: ReadonlyArray<RunImport>
}

/** One non-blank line of an import file, decoded and canonically encoded. */
export interface ImportEntry {
  readonly line: number
  readonly event: RuntimeEvent
  readonly text: string
  /** Present for store-format lines. */
  readonly row?: { readonly seq: number; readonly end: number; readonly digest: string }
}

// A refusal while reading or checking the file, before it becomes an ImportInvalid.
class Refusal {
  constructor(
    readonly reason: ImportInvalidReason,
    readonly detail: string,
    readonly where: { readonly line?: number; readonly runId?: string; readonly eventId?: string } = {}
  ) {}
}

const invalid = (file: string, refusal: Refusal): ImportInvalid => {
  const { line, runId, eventId } = refusal.where
  const at = [
    runId !== undefined ? `run ${runId}` : undefined,
    eventId !== undefined ? `event ${eventId}` : undefined
  ].filter((s) => s !== undefined).join(", ")
  return new ImportInvalid({
    file,
    reason: refusal.reason,
    message: `${file}${line !== undefined ? `:${line}` : ""}: ${refusal.reason}${at ? ` (${at})` : ""}: ${refusal.detail}; ` +
      "nothing was imported",
    ...(line !== undefined ? { line } : {}),
    ...(runId !== undefined ? { runId } : {}),
    ...(eventId !== undefined ? { eventId } : {})
  })
}

const strict = { onExcessProperty: "error", errors: "first" } as const
const decodeRow = Schema.decodeUnknownEither(CommittedRowSchema, strict)

const isStoreFormat = (value: unknown): boolean =>
  typeof value === "object" && value !== null && !Array.isArray(value) && Object.hasOwn(value, "event")

// Decodes the file into entries: strict UTF-8 per line, one JSON value per non-blank line, one format throughout.
const parseFile = (bytes: Uint8Array): { readonly format: ImportFormat | null; readonly entries: Array<ImportEntry> } => {
  const entries: Array<ImportEntry> = []
  let format: ImportFormat | null = null
  let start = 0
  for (let line = 1; start < bytes.length; line++) {
    const newline = bytes.indexOf(0x0a, start)
    const stop = newline === -1 ? bytes.length : newline
    const slice = bytes.subarray(start, stop)
    start = stop + 1
    const text = CanonicalJson.decodeUtf8(slice)
    if (text === undefined) throw new Refusal("invalid_utf8", "the line is not valid UTF-8", { line })
    if (text.trim() === "") continue
    const parsed = CanonicalJson.parseJson(text)
    if (parsed === undefined) throw new Refusal("invalid_json", "the line is not one JSON value", { line })
    const lineFormat: ImportFormat = isStoreFormat(parsed.value) ? "rows" : "events"
    if (format === null) format = lineFormat
    else if (format !== lineFormat) {
      throw new Refusal(
        "mixed_formats",
        `a ${lineFormat === "rows" ? "store-format line" : "bare event"} in a file of ${
          format === "rows" ? "store-format lines" : "bare events"
        }: a file holds one or the other`,
        { line }
      )
    }
    entries.push(decodeEntry(line, parsed.value, lineFormat))
  }
  return { format, entries }
}

const decodeEntry = (line: number, value: unknown, format: ImportFormat): ImportEntry => {
  let event: RuntimeEvent
  let row: ImportEntry["row"]
  if (format === "rows") {
    const decoded = decodeRow(value)
    if (Either.isLeft(decoded)) {
      throw new Refusal("schema_invalid", `not a store-format line: ${ParseResult.TreeFormatter.formatErrorSync(decoded.left)}`, {
        line
      })
    }
    event = decoded.right.event
    row = { seq: decoded.right.seq, end: decoded.right.end, digest: decoded.right.digest }
  } else {
    const decoded = decodeEvent(value)
    if (Either.isLeft(decoded)) {
      throw new Refusal("schema_invalid", `not a RuntimeEvent: ${ParseResult.TreeFormatter.formatErrorSync(decoded.left)}`, {
        line
      })
    }
    event = decoded.right
  }
  const text = canonicalText(event)
  if (Either.isLeft(text)) {
    const failure = text.left
    const reason = failure._tag === "TooDeep" ? "too_deep" : failure._tag === "TooLarge" ? "too_large" : "schema_invalid"
    throw new Refusal(reason, failure.message, { line, runId: event.runId, eventId: event.id })
  }
  // The chain hashes this text; remember it so the checks below do not encode the event again.
  rememberCanonicalText(event, text.right)
  return { line, event, text: text.right, ...(row !== undefined ? { row } : {}) }
}

// Store-format lines come in groups: one run's contiguous lines of one append, the last with `seq == end`.
const checkGroups = (entries: ReadonlyArray<ImportEntry>): void => {
  let open: ImportEntry | undefined
  for (const entry of entries) {
    const row = entry.row!
    const where = { line: entry.line, runId: entry.event.runId, eventId: entry.event.id }
    if (row.end < row.seq) throw new Refusal("group_invalid", `end ${row.end} is before seq ${row.seq}`, where)
    if (open !== undefined && (open.event.runId !== entry.event.runId || open.row!.end !== row.end)) {
      throw new Refusal(
        "group_invalid",
        `the group of run ${open.event.runId} that ends at seq ${open.row!.end} is cut after line ${open.line}`,
        where
      )
    }
    open = row.seq === row.end ? undefined : entry
  }
  if (open !== undefined) {
    throw new Refusal("group_invalid", `the file ends inside a group that ends at seq ${open.row!.end}`, {
      line: open.line,
      runId: open.event.runId,
      eventId: open.event.id
    })
  }
}

// One run's entries checked against the rules of spec 01 from an empty run: store-format lines with their own seq
// and chain (read rules), bare events as one restore-mode append. A stored prefix is compared byte for byte later,
// so checking from empty is the same check as checking the new events after it.
const checkRun = (
  runId: string,
  entries: ReadonlyArray<ImportEntry>,
  invocationOwner: (invocationId: string) => string | undefined
): void => {
  if (entries[0]?.row !== undefined) {
    const verifier = RunVerifier.make(runId, { invocationOwner })
    for (const entry of entries) {
      const failure = RunVerifier.step(verifier, { ...entry.row!, event: entry.event }, { line: entry.line })
      if (failure !== undefined) {
        throw new Refusal(failure.reason, failure.message, { line: entry.line, runId, eventId: entry.event.id })
      }
    }
    const cut = RunVerifier.finish(verifier)
    if (cut !== undefined) {
      const at = entries.find((e) => e.row!.seq === cut.seq) ?? entries[entries.length - 1]!
      throw new Refusal(cut.reason, cut.message, { line: at.line, runId, eventId: at.event.id })
    }
    return
  }
  const lookups: LedgerRules.Lookups = { call: () => undefined, eventIdTaken: () => false, invocationOwner }
  const checked = AppendCheck.checkAppend(LedgerRules.emptyTail(runId), lookups, entries.map((e) => e.event), "restore")
  if (checked._tag === "Refused") {
    const entry = entries[checked.index]!
    throw new Refusal(checked.reason === "sealed" || checked.reason === "not_sealed" ? "event_after_terminal" : checked.reason, checked.message, {
      line: entry.line,
      runId,
      eventId: entry.event.id
    })
  }
}

// The stored prefix of a run must reappear in the file byte for byte (same seq, same canonical bytes); returns its length.
const checkStoredPrefix = (
  runId: string,
  entries: ReadonlyArray<ImportEntry>,
  stored: ReadonlyArray<CommittedRow>
): number => {
  const overlap = Math.min(entries.length, stored.length)
  for (let i = 0; i < overlap; i++) {
    const entry = entries[i]!
    const storedRow = stored[i]!
    const storedText = Either.getOrUndefined(canonicalText(storedRow.event))
    if (entry.text !== storedText || (entry.row !== undefined && entry.row.digest !== storedRow.digest)) {
      throw new Refusal(
        "stored_conflict",
        `the store already holds seq ${storedRow.seq} of run ${runId} (event ${storedRow.event.id}) with other bytes`,
        { line: entry.line, runId, eventId: entry.event.id }
      )
    }
  }
  return overlap
}

/** An import file read and checked on its own, before any store is opened. */
export interface PreparedImport {
  readonly file: string
  /** `null` for a file with no non-blank line. */
  readonly format: ImportFormat | null
  /** Each run's entries in file order; runs in order of their first line. */
  readonly runs: ReadonlyMap<string, ReadonlyArray<ImportEntry>>
  /** The line of every event id. */
  readonly lineOfId: ReadonlyMap<string, number>
}

const guard = <A>(file: string, f: () => A): Effect.Effect<A, ImportInvalid> =>
  Effect.try({
    try: f,
    catch: (error) => {
      if (error instanceof Refusal) return invalid(file, error)
      throw error
    }
  })

/**
 * Reads FILE as strict UTF-8, one JSON value per line (blank lines ignored), all bare RuntimeEvents or all
 * store-format lines, and checks everything that does not depend on the store: the strict decode, ids unique in
 * the file, store-format groups, and the rules of spec 01 per run. Refusals are `ImportInvalid` naming the line.
 */
export const prepareImport = Effect.fn("ImportLedger.prepareImport")(function*(file: string) {
  const fs = yield* FileSystem.FileSystem
  const bytes = yield* fs.readFile(file).pipe(
    Effect.mapError((error) => invalid(file, new Refusal("unreadable", `cannot read the file: ${error.message}`)))
  )
  return yield* guard(file, (): PreparedImport => {
    const { entries, format } = parseFile(bytes)
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
    for (const [runId, list] of runs) {
      const inv = list[0]!.event.invocationId
      if (!owners.has(inv)) owners.set(inv, runId)
    }
    for (const [runId, list] of runs) checkRun(runId, list, (inv) => owners.get(inv))
    return { file, format, runs, lineOfId }
  })
})

/**
 * Imports a prepared file into the store: events already stored with identical bytes (the stored prefix of each
 * run) are skipped, the rest is written in ONE `appendBatch` in restore mode, expecting each run's current
 * high-water. The store checks what only it can see (ids and invocations of stored runs); any refusal writes nothing.
 */
export const importPrepared = Effect.fn("ImportLedger.importPrepared")(function*(prepared: PreparedImport) {
  const store = yield* RuntimeEventStore
  const { file, lineOfId, runs } = prepared
  const listed = new Set<string>(yield* store.listRuns())
  const storedRows = new Map<string, ReadonlyArray<CommittedRow>>()
  for (const runId of runs.keys()) {
    storedRows.set(runId, listed.has(runId) ? yield* store.readRun(RunId.make(runId, true)) : [])
  }
  const fresh = yield* guard(file, () => {
    const fresh = new Map<string, ReadonlyArray<ImportEntry>>()
    for (const [runId, list] of runs) fresh.set(runId, list.slice(checkStoredPrefix(runId, list, storedRows.get(runId)!)))
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
        AppendRejected: (error) => Effect.fail(storeRefusal(file, error, lineOfId)),
        RunSealed: (error) => Effect.fail(storeRefusal(file, error, lineOfId))
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
  const result: LedgerImport = {
    file,
    format: prepared.format,
    added: report.reduce((n, r) => n + r.added, 0),
    skipped: report.reduce((n, r) => n + r.skipped, 0),
    runs: report
  }
  return result
})

/** `prepareImport` then `importPrepared`: the whole `import` of spec 06 over the store. */
export const importLedger = (file: string) => Effect.flatMap(prepareImport(file), importPrepared)

// The store refused the batch (a rule only it can see, such as an id or invocation used by a stored run).
const storeRefusal = (file: string, error: AppendRejected | RunSealed, lineOfId: ReadonlyMap<string, number>) => {
  const eventId = error._tag === "AppendRejected" ? error.eventId : undefined
  const line = eventId !== undefined ? lineOfId.get(eventId) : undefined
  return invalid(
    file,
    new Refusal(error._tag === "AppendRejected" ? error.reason : "event_after_terminal", error.message, {
      runId: error.runId,
      ...(line !== undefined ? { line } : {}),
      ...(eventId !== undefined ? { eventId } : {})
    })
  )
}
