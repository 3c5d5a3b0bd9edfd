// `import` (spec 06): validates a whole file of bare RuntimeEvents or of store-format lines against the store, then
// writes every new event in ONE `appendBatch` in restore mode. Any failure writes nothing; stored events are skipped.
import * as FileSystem from "@effect/platform/FileSystem"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as CanonicalJson from "../Domain/CanonicalJson.js"
import * as Digest from "../Domain/Digest.js"
import { IdSet } from "../Domain/IdSet.js"
import type { AppendRejected, RunSealed } from "../Domain/Errors.js"
import { ImportInvalid } from "../Domain/Errors.js"
import type { ImportInvalidReason } from "../Domain/Errors.js"
import { describeParseError } from "../Domain/ParseIssues.js"
import { RunId } from "../Domain/Ids.js"
import type { CommittedRow, RuntimeEvent } from "../Domain/RuntimeEvent.js"
import {
  canonicalText,
  CommittedRow as CommittedRowSchema,
  decodeEvent,
  decodeJsonEvent,
  decodeParsed,
  rememberCanonicalText
} from "../Domain/RuntimeEvent.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type {
  ProvenEvent,
  ProvenRestorePlan,
  RestorePlan,
  RunBatch,
  RuntimeEventStoreShape
} from "../Services/RuntimeEventStore.js"
import * as AppendCheck from "../Domain/Rules/AppendCheck.js"
import * as LedgerRules from "../Domain/Rules/LedgerRules.js"
import * as RunVerifier from "../Domain/Rules/RunVerifier.js"
import { RecoverySection, SectionRefusal } from "./ImportRecoverySection.js"

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

/** The longest line `import` reads: a store-format line around an event at the 16 MiB limit of spec 01. */
export const MAX_LINE_BYTES = CanonicalJson.MAX_BYTES + 1024

// Bytes per read of the import file: the file is streamed, never held whole.
const CHUNK_SIZE = 1024 * 1024

/**
 * The lines of an import file whose event text the check pass proved canonical exactly as written (the line's own
 * bytes, confirmed by `decodeParsed`): one bit per line. The write pass decodes those lines without confirming the
 * text again; what it writes is still chained by the store and compared with the check pass's chain at each run's
 * end, so a line changed in between fails the whole import, writing nothing.
 */
export class ProvenLines {
  private bits = new Uint8Array(1024)

  /** Marks `line` (1-based) proven. */
  mark(line: number): void {
    const byte = line >>> 3
    if (byte >= this.bits.length) {
      const grown = new Uint8Array(Math.max(this.bits.length * 2, byte + 1))
      grown.set(this.bits)
      this.bits = grown
    }
    this.bits[byte]! |= 1 << (line & 7)
  }

  /** Whether `line` was marked. */
  has(line: number): boolean {
    const byte = line >>> 3
    return byte < this.bits.length && (this.bits[byte]! & (1 << (line & 7))) !== 0
  }
}

// Decodes the file into entries as its bytes arrive: strict UTF-8 per line, one JSON value per non-blank line, one
// format throughout. A line is held only until its newline, and refused as `too_large` as soon as it passes
// MAX_LINE_BYTES, so a huge line costs at most that much memory.
class FileParser {
  format: ImportFormat | null = null
  private line = 1
  private carry: Array<Uint8Array> = []
  private carryLength = 0

  /**
   * `onEntry` takes each decoded line as it completes (the parser keeps none). With `proven`, the lines it holds
   * are decoded without confirming their canonical text again (the write pass); without it, the parser marks in
   * `written` the lines it confirmed as written (the check pass). With `onProven` and `provenFormat` (the file's
   * format as the check pass read it), a proven line is handed on as a `ProvenEvent` without being parsed.
   */
  constructor(
    private readonly onEntry: (entry: ImportEntry) => void,
    private readonly proven?: ProvenLines,
    private readonly onProven?: (event: ProvenEvent) => void,
    private readonly provenFormat?: ImportFormat | null
  ) {}

  /** The lines whose event text was confirmed canonical as written (filled when no `proven` was given). */
  readonly written = new ProvenLines()

  /** The file's version and its recovery section (a version 2 export's run headers and claims). */
  readonly section = new RecoverySection()

  // The check pass (no `proven`) keeps the facts of every event for the section's checks; the write pass skips them.
  private emit(entry: ImportEntry): void {
    if (this.proven === undefined) this.section.event(entry.line, entry.event, entry.row?.seq)
    this.onEntry(entry)
  }

  push(bytes: Uint8Array): void {
    // A Buffer view of the chunk (no copy), so each line's slice has Buffer's searches (`provenBytes`).
    const chunk = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
    let start = 0
    for (;;) {
      const newline = chunk.indexOf(0x0a, start)
      if (newline === -1) break
      this.hold(newline - start)
      if (this.carryLength > 0) {
        this.carry.push(chunk.subarray(start, newline))
        const bytes = Buffer.concat(this.carry, this.carryLength + newline - start)
        this.carry = []
        this.carryLength = 0
        this.complete(bytes)
      } else {
        this.complete(chunk.subarray(start, newline))
      }
      start = newline + 1
    }
    if (start < chunk.length) {
      this.hold(chunk.length - start)
      // A copy: the carry outlives this chunk.
      this.carry.push(Uint8Array.prototype.slice.call(chunk, start))
      this.carryLength += chunk.length - start
    }
  }

  end(): void {
    if (this.carryLength > 0) {
      const bytes = Buffer.concat(this.carry, this.carryLength)
      this.carry = []
      this.carryLength = 0
      this.complete(bytes)
    }
    if (this.proven === undefined) this.section.finish()
  }

  // Refuses the current line once its bytes would pass the limit, before holding them.
  private hold(more: number): void {
    if (this.carryLength + more > MAX_LINE_BYTES) {
      throw new Refusal(
        "too_large",
        `the line is longer than ${MAX_LINE_BYTES} bytes, so its event is over the ${CanonicalJson.MAX_BYTES}-byte limit`,
        { line: this.line }
      )
    }
  }

  private complete(slice: Buffer): void {
    const line = this.line++
    // A proven line in the format the check pass read (`restoreProven`'s write pass): neither decoded nor parsed, its
    // bytes handed on as they are (`provenBytes`).
    if (this.onProven !== undefined && this.provenFormat != null && this.proven?.has(line) === true) {
      const light = provenBytes(slice, this.provenFormat)
      if (light !== undefined) {
        this.format ??= this.provenFormat
        return this.onProven(light)
      }
    }
    const text = CanonicalJson.decodeUtf8(slice)
    if (text === undefined) throw new Refusal("invalid_utf8", "the line is not valid UTF-8", { line })
    if (text.trim() === "") return
    const parsed = CanonicalJson.parseJson(text)
    if (parsed === undefined) throw new Refusal("invalid_json", "the line is not one JSON value", { line })
    // The marker, run header, claim and trailer records of a version 2 export (docs/wire-format.md, "Export file").
    if (this.section.take(line, parsed.value)) return
    const lineFormat: ImportFormat = isStoreFormat(parsed.value) ? "rows" : "events"
    if (lineFormat === "events" && this.section.version === 2) {
      throw new Refusal("record_invalid", "a version 2 export holds store-format lines, and this line is not one", { line })
    }
    if (this.format === null) this.format = lineFormat
    else if (this.format !== lineFormat) {
      throw new Refusal(
        "mixed_formats",
        `a ${lineFormat === "rows" ? "store-format line" : "bare event"} in a file of ${
          this.format === "rows" ? "store-format lines" : "bare events"
        }: a file holds one or the other`,
        { line }
      )
    }
    if (this.onProven !== undefined && this.proven?.has(line) === true) {
      const light = provenEvent(parsed.value, lineFormat, text)
      if (light !== undefined) return this.onProven(light)
    }
    const fast = fastEntry(line, parsed.value, lineFormat, text, this.proven?.has(line) === true)
    if (fast === undefined) return this.emit(decodeEntry(line, parsed.value, lineFormat))
    if (fast.written && this.proven === undefined) this.written.mark(line)
    this.emit(fast.entry)
  }
}

const ROW_KEYS = ["digest", "end", "event", "seq"] as const
const isPositiveSafeInt = (u: unknown): u is number => typeof u === "number" && Number.isSafeInteger(u) && u >= 1

// The event of a line, when it is certainly valid: its canonical text confirmed against the line's own bytes when the
// line holds them as written (`decodeParsed`), else the fast strict decoder and the fast canonical encoder.
// `proven`: the check pass confirmed this line's text as written; the text is taken as it is (see `ProvenLines`).
// `written`: the result's text is the line's own.
const fastEvent = (
  value: unknown,
  text: string | undefined,
  proven: boolean
): { readonly event: RuntimeEvent; readonly text: string; readonly written: boolean } | undefined => {
  if (text !== undefined) {
    if (proven) {
      const event = decodeJsonEvent(value)
      if (event !== undefined) {
        rememberCanonicalText(event, text)
        return { event, text, written: true }
      }
    }
    const decoded = decodeParsed(value, text)
    if (Either.isRight(decoded)) return { event: decoded.right, text, written: true }
  }
  const event = decodeJsonEvent(value)
  if (event === undefined) return undefined
  const canonical = canonicalText(event)
  if (Either.isLeft(canonical)) return undefined
  rememberCanonicalText(event, canonical.right)
  return { event, text: canonical.right, written: false }
}

// `decodeEntry` for a line that is certainly valid, with no Schema at work (most lines: an export's, a store's);
// `undefined` on any doubt, and `decodeEntry` decides and words the refusal, so both accept exactly the same lines.
const fastEntry = (
  line: number,
  value: unknown,
  format: ImportFormat,
  lineText: string,
  proven: boolean
): { readonly entry: ImportEntry; readonly written: boolean } | undefined => {
  if (format === "events") {
    const fast = fastEvent(value, lineText, proven)
    return fast === undefined ? undefined : { entry: { line, event: fast.event, text: fast.text }, written: fast.written }
  }
  const row = value as { readonly [key: string]: unknown }
  if (Object.keys(row).length !== ROW_KEYS.length || !ROW_KEYS.every((k) => Object.hasOwn(row, k))) return undefined
  const { digest, end, seq } = row
  if (typeof digest !== "string" || !Digest.isDigestText(digest) || !isPositiveSafeInt(seq) || !isPositiveSafeInt(end)) return undefined
  // A line as the store writes it: the event's own text lies inside the wrapper.
  const span = writtenSpan(lineText, digest, end, seq)
  const fast = fastEvent(row["event"], span !== undefined ? lineText.slice(span[0], span[1]) : undefined, proven)
  if (fast === undefined) return undefined
  // The row as `RunVerifier.step` takes it (seq, digest, event), so the check pass builds no second object per line.
  const verified = { seq, end, digest, event: fast.event }
  return { entry: { line, event: fast.event, text: fast.text, row: verified }, written: fast.written }
}

// The decimal digits of t[from, to) are those of `n` (a positive safe integer) exactly: no sign, no leading zero.
const digitsAre = (t: string, from: number, to: number, n: number): boolean => {
  if (to - from < 1 || to - from > 16 || (t.charCodeAt(from) === 0x30 && to - from > 1)) return false
  let value = 0
  for (let i = from; i < to; i++) value = value * 10 + (t.charCodeAt(i) - 0x30)
  return value === n
}

/**
 * Where the event's text lies in a store-format line whose parsed members are `digest`, `end` and `seq`, when the line
 * is written exactly as the store writes it (`{"digest":"<digest>","end":<end>,"event":` + text + `,"seq":<seq>}`):
 * [from, to) in UTF-16 units, else `undefined`. The same answer as comparing the line's start and end with that head and
 * tail built as strings (property-tested), without building them. `digest` must be a digest's text
 * (`Digest.isDigestText`), `end` and `seq` positive safe integers. Exported for tests.
 */
export const writtenSpan = (
  lineText: string,
  digest: string,
  end: number,
  seq: number
): readonly [number, number] | undefined => {
  const span = rowEventSpan(lineText)
  if (span === undefined) return undefined
  const [from, to] = span
  return lineText.startsWith(digest, 11) && digitsAre(lineText, 90, from - 9, end) &&
      digitsAre(lineText, to + 7, lineText.length - 1, seq)
    ? span
    : undefined
}

// What a `restoreProven` needs of a line the check pass proved canonical as written (`ProvenLines`), with no decode:
// its run and id as the line names them, and the event's text, the line's own (the store-format wrapper taken off
// exactly as `fastEntry` takes it off, `writtenSpan`). `undefined` when the line is not of that shape (it changed
// since): the line is then decoded in full. Nothing here is trusted: the store chains these texts, and a run whose chain does not end
// where the check pass's did fails the whole import.
const provenEvent = (value: unknown, format: ImportFormat, lineText: string): ProvenEvent | undefined => {
  let event: unknown = value
  let text = lineText
  if (format === "rows") {
    const row = value as { readonly [key: string]: unknown }
    if (Object.keys(row).length !== ROW_KEYS.length || !ROW_KEYS.every((k) => Object.hasOwn(row, k))) return undefined
    const { digest, end, seq } = row
    if (typeof digest !== "string" || !Digest.isDigestText(digest) || !isPositiveSafeInt(seq) || !isPositiveSafeInt(end)) return undefined
    const span = writtenSpan(lineText, digest, end, seq)
    if (span === undefined) return undefined
    event = row["event"]
    text = lineText.slice(span[0], span[1])
  }
  if (typeof event !== "object" || event === null || Array.isArray(event)) return undefined
  const { id, runId } = event as { readonly [key: string]: unknown }
  return typeof id === "string" && typeof runId === "string" ? { runId, id, text } : undefined
}

const isDigit = (c: number): boolean => c >= 0x30 && c <= 0x39

// Where the event's text lies in a line written as the store writes it, `{"digest":"sha256:<64>","end":<digits>,"event":`
// + text + `,"seq":<digits>}`: [from, to) in UTF-16 units; `undefined` when the line is not of that shape. Nothing
// but the position is read (the line's seq, end and digest were checked by the check pass; the write pass writes
// its own).
const rowEventSpan = (t: string): readonly [number, number] | undefined => {
  if (!t.startsWith(`{"digest":"sha256:`)) return undefined
  let i = 82
  if (!t.startsWith(`","end":`, i)) return undefined
  i += 8
  const digits = i
  while (i < t.length && isDigit(t.charCodeAt(i))) i++
  if (i === digits || !t.startsWith(`,"event":`, i)) return undefined
  const from = i + 9
  let j = t.length - 1
  if (t.charCodeAt(j) !== 0x7d) return undefined
  const last = --j
  while (j > from && isDigit(t.charCodeAt(j))) j--
  const to = j - 6
  if (j === last || to <= from || !t.startsWith(`,"seq":`, to)) return undefined
  return [from, to]
}

// The opening quote of the JSON string whose closing quote is at `close`: the first quote before it that no backslash
// escapes (inside a string a quote is always escaped; outside one, no backslash comes before a quote).
const openingQuote = (t: string, close: number): number => {
  let at = close - 1
  for (;;) {
    at = t.lastIndexOf(`"`, at)
    if (at < 0) return -1
    let backslashes = 0
    while (at - 1 - backslashes >= 0 && t.charCodeAt(at - 1 - backslashes) === 0x5c) backslashes++
    if (backslashes % 2 === 0) return at
    at--
  }
}

// A JSON string's value as a string of its own: never a slice of the line (a store keeps ids for as long as it is open,
// and a slice would keep its whole line alive with it).
const unquote = (quoted: string): string | undefined => {
  try {
    const value: unknown = JSON.parse(quoted)
    return typeof value === "string" ? value : undefined
  } catch {
    return undefined
  }
}

/**
 * The `id` and `runId` of a RuntimeEvent from its canonical text, read from the text's end without parsing it: with
 * sorted keys, the members after `body` are `hidden`, `id`, `invocationId`, `runId`, `sessionId`, `ts`, `turnId`, all
 * strings, numbers or `true`, so the members are walked back from the closing brace to `id`. For any canonical
 * RuntimeEvent text this is what `JSON.parse` reads (property-tested); on anything else it may answer `undefined` or
 * other names, which is why only a text the check pass proved is given to it (and the store's chain over the text
 * must still end where the check pass's did). Exported for tests.
 */
export const eventNames = (text: string): { readonly id: string; readonly runId: string } | undefined => {
  let end = text.length - 1
  if (text.charCodeAt(end) !== 0x7d) return undefined
  end--
  let runId: string | undefined
  for (let member = 0; member < 8 && end > 0; member++) {
    // The value ends at `end`: a string, or a number or `true` (no colon in either).
    let start: number
    if (text.charCodeAt(end) === 0x22) start = openingQuote(text, end)
    else {
      start = end
      while (start > 0 && text.charCodeAt(start - 1) !== 0x3a) start--
    }
    if (start <= 1 || text.charCodeAt(start - 1) !== 0x3a || text.charCodeAt(start - 2) !== 0x22) return undefined
    const keyStart = text.lastIndexOf(`"`, start - 3)
    if (keyStart < 1 || text.charCodeAt(keyStart - 1) !== 0x2c) return undefined
    const key = text.slice(keyStart + 1, start - 2)
    if (key === "runId" || key === "id") {
      if (text.charCodeAt(start) !== 0x22) return undefined
      const value = unquote(text.slice(start, end + 1))
      if (value === undefined) return undefined
      if (key === "runId") runId = value
      else return runId === undefined ? undefined : { id: value, runId }
    } else if (key === "body") return undefined
    end = keyStart - 2
  }
  return undefined
}

// `rowEventSpan` over a line's bytes (the wrapper is ASCII, so its offsets are the same): [from, to) in bytes.
const rowEventSpanBytes = (b: Buffer): readonly [number, number] | undefined => {
  if (b.length < 100 || !bytesAt(b, 0, DIGEST_HEAD) || !bytesAt(b, 82, END_KEY)) return undefined
  let i = 90
  const digits = i
  while (i < b.length && isDigit(b[i]!)) i++
  if (i === digits || !bytesAt(b, i, EVENT_KEY)) return undefined
  const from = i + 9
  let j = b.length - 1
  if (b[j] !== 0x7d) return undefined
  const last = --j
  while (j > from && isDigit(b[j]!)) j--
  const to = j - 6
  if (j === last || to <= from || !bytesAt(b, to, SEQ_KEY)) return undefined
  return [from, to]
}

// Whether `b` holds `key` at `at` (no subarray made).
const bytesAt = (b: Buffer, at: number, key: Buffer): boolean => {
  if (at < 0 || at + key.length > b.length) return false
  for (let k = 0; k < key.length; k++) if (b[at + k] !== key[k]) return false
  return true
}
const DIGEST_HEAD = Buffer.from(`{"digest":"sha256:`)
const END_KEY = Buffer.from(`","end":`)
const EVENT_KEY = Buffer.from(`,"event":`)
const SEQ_KEY = Buffer.from(`,"seq":`)
const ID_KEY = Buffer.from(`,"id":"`)

/**
 * A line of the write pass that the check pass proved canonical as written, handed to `restoreProven` as its bytes
 * (`ProvenEvent.bytes`), which both stores chain and write as they are. `text` is decoded from them only if a store
 * asks for it. Nothing here is trusted: the bytes are the ones the store chains and writes in the same step, and a
 * run whose chain does not end where the check pass's did fails the whole import, writing nothing.
 */
class ProvenBytes implements ProvenEvent {
  constructor(readonly runId: string, readonly id: string, readonly bytes: Buffer) {}
  get text(): string {
    // Not UTF-8 (the line changed since the check): a text the chain cannot reach, so the import fails.
    return CanonicalJson.decodeUtf8(this.bytes) ?? ""
  }
}

/**
 * A proven line's run, id and event bytes, with no decode of the line: the event's bytes are the line (bare events) or the
 * span inside the store-format wrapper; its `id` and `runId` are read by `eventNames` off the text's end from its last
 * `,"id":"` on. In a canonical event text that is the top-level `id` member (only the members `invocationId`, `runId`,
 * `sessionId`, `ts`, `turnId` follow it, and inside a string every quote is escaped), so only that short end is
 * decoded. `undefined` when the line is not of that shape: it is then decoded and parsed as any other line. Exported
 * for tests.
 */
export const provenBytes = (line: Buffer, format: ImportFormat): ProvenEvent | undefined => {
  let bytes = line
  if (format === "rows") {
    const span = rowEventSpanBytes(line)
    if (span === undefined) return undefined
    bytes = line.subarray(span[0], span[1])
  }
  const at = bytes.lastIndexOf(ID_KEY)
  if (at <= 0) return undefined
  const names = eventNames(bytes.toString("utf8", at))
  return names === undefined ? undefined : new ProvenBytes(names.runId, names.id, bytes)
}

const decodeEntry = (line: number, value: unknown, format: ImportFormat): ImportEntry => {
  let event: RuntimeEvent
  let row: ImportEntry["row"]
  if (format === "rows") {
    const decoded = decodeRow(value)
    if (Either.isLeft(decoded)) {
      throw new Refusal("schema_invalid", `not a store-format line: ${describeParseError(decoded.left)}`, {
        line
      })
    }
    event = decoded.right.event
    row = { seq: decoded.right.seq, end: decoded.right.end, digest: decoded.right.digest }
  } else {
    const decoded = decodeEvent(value)
    if (Either.isLeft(decoded)) {
      throw new Refusal("schema_invalid", `not a RuntimeEvent: ${describeParseError(decoded.left)}`, {
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

// Whether a run of the file starts where a run starts: a store-format line with seq 1, or a bare opener. Such a run
// can be checked in the file alone (its stored prefix, if any, must reappear byte for byte); any other is an
// increment of a stored run, checked from that run's stored tail.
const opensRun = (entry: ImportEntry): boolean =>
  entry.row !== undefined
    ? entry.row.seq === 1
    : entry.event.body._tag === "RunOpened" || entry.event.body._tag === "ContinuationStarted"

/**
 * Checks `fresh`, entries of one run, with the rules of spec 01 as the store applies them, continuing `stored` (the
 * run's committed rows, taken as the store verified them): store-format lines with their own seq and chain (read
 * rules), bare events as one restore-mode append from the stored tail. Throws the first refusal.
 */
const checkRun = (
  runId: string,
  stored: ReadonlyArray<CommittedRow>,
  fresh: ReadonlyArray<ImportEntry>,
  invocationOwner: (invocationId: string) => string | undefined
): void => {
  if (fresh.length === 0) return
  // The stored rows are taken as the store verified them; the file's invocations apply to the new events only.
  let replaying = true
  const verifier = RunVerifier.make(runId, { invocationOwner: (inv) => replaying ? undefined : invocationOwner(inv) })
  for (const row of stored) {
    const failure = RunVerifier.stepTrusted(verifier, row)
    if (failure !== undefined) throw new Refusal(failure.reason, `the stored run does not verify: ${failure.message}`, { runId })
  }
  replaying = false
  const sealed = verifier.tail.terminal
  const refuse = (entry: ImportEntry, reason: ImportInvalidReason, message: string): never => {
    throw new Refusal(
      reason,
      sealed !== undefined && reason === "event_after_terminal"
        ? `${message}; the store holds run ${runId} sealed at seq ${sealed.seq}, and a sealed run takes no new event`
        : message,
      { line: entry.line, runId, eventId: entry.event.id }
    )
  }
  if (fresh[0]!.row !== undefined) {
    for (const entry of fresh) {
      const failure = RunVerifier.step(verifier, { ...entry.row!, event: entry.event }, { line: entry.line })
      if (failure !== undefined) refuse(entry, failure.reason, failure.message)
    }
    const cut = RunVerifier.finish(verifier)
    if (cut !== undefined) {
      const at = fresh.find((e) => e.row!.seq === cut.seq) ?? fresh[fresh.length - 1]!
      throw new Refusal(cut.reason, cut.message, { line: at.line, runId, eventId: at.event.id })
    }
    return
  }
  const checked = AppendCheck.checkAppend(verifier.tail, verifier.lookups, fresh.map((e) => e.event), "restore")
  if (checked._tag === "Refused") {
    refuse(
      fresh[checked.index]!,
      checked.reason === "sealed" || checked.reason === "not_sealed" ? "event_after_terminal" : checked.reason,
      checked.message
    )
  }
}

// Where the file's run starts in the stored run (0-based): a store-format line names its seq; a bare opener is
// seq 1; another bare event is the stored event with its id, else the seq after the stored tail.
const startIndex = (entries: ReadonlyArray<ImportEntry>, stored: ReadonlyArray<CommittedRow>): number => {
  const first = entries[0]!
  if (first.row !== undefined) return first.row.seq - 1
  if (opensRun(first)) return 0
  const at = stored.findIndex((row) => row.event.id === first.event.id)
  return at === -1 ? stored.length : at
}

// The part of the file's run that the store already holds must be byte for byte what it holds (same seq, same
// canonical bytes); returns how many of the file's entries it covers.
const checkStoredPrefix = (
  runId: string,
  entries: ReadonlyArray<ImportEntry>,
  stored: ReadonlyArray<CommittedRow>
): number => {
  const start = startIndex(entries, stored)
  if (start > stored.length) {
    const first = entries[0]!
    throw new Refusal(
      "seq_gap",
      `the line has seq ${start + 1}, but the store holds run ${runId} up to seq ${stored.length}`,
      { line: first.line, runId, eventId: first.event.id }
    )
  }
  const overlap = Math.min(entries.length, stored.length - start)
  for (let i = 0; i < overlap; i++) {
    const entry = entries[i]!
    const storedRow = stored[start + i]!
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

/** An import file read and checked on its own, before any store is opened, with every entry held. */
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

/** One run of a file checked in one streaming pass: what writing it needs, not its events. */
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

/** An import file read and checked on its own, before any store is opened. */
export type PreparedImport = PreparedInMemory | PreparedStream

// One run's state in the streaming pass: its first and last lines, and the checker of spec 01 from an empty run
// (a RunVerifier for store-format lines; the restore-mode append check, event by event, for bare events).
interface RunCheck {
  readonly runId: string
  readonly firstLine: number
  events: number
  last: { line: number; eventId: string; seq: number }
  readonly verifier: RunVerifier.RunVerifier | undefined
  tail: LedgerRules.RunTail
  readonly calls: Map<string, LedgerRules.CallEntry>
  // The first entry of the recovery bundle left open, for the refusal of a run that ends inside it.
  bundleStart: { line: number; eventId: string } | undefined
  failure: Refusal | undefined
}

// The streaming pass's checks, entry by entry, refusing exactly what `prepareInMemory` refuses: a line it cannot
// read at once (thrown by the parser); then, once the file is read, the first duplicate id, then the first broken
// group, then the first refusal of the first run (in order of first line) that has one.
class StreamCheck {
  /** The file's event ids (no line per id: the line of a refused id is looked up again, on the refusal path only). */
  readonly ids = new IdSet()
  readonly runs = new Map<string, RunCheck>()
  readonly owners = new Map<string, string>()
  /** A run comes back after another run's line, or a run does not open in the file: prepare it in memory. */
  needsMemory = false
  /**
   * Whether every run's check was the one a store's restore makes. Bare events are checked in restore mode; store-format
   * lines by the read-side verifier, which leaves out one check of restore mode (a `ReconcileObserved`'s evidence
   * digest against its dispatch's): a file of them with a recovery fact is not, and is written by `restoreStream`,
   * whose store checks every event again.
   */
  restoreChecked = true
  /** The first id used twice, at `line` (its first line is looked up once the file is read). */
  duplicate: { readonly eventId: string; readonly line: number; readonly runId: string } | undefined
  private group: Refusal | undefined
  private openGroup: ImportEntry | undefined
  private current: RunCheck | undefined

  add(entry: ImportEntry): void {
    const { event } = entry
    if (!this.ids.add(event.id)) this.duplicate ??= { eventId: event.id, line: entry.line, runId: event.runId }
    if (entry.row !== undefined) this.checkGroup(entry)
    let run = this.current !== undefined && this.current.runId === event.runId ? this.current : this.runs.get(event.runId)
    if (run === undefined) {
      if (!opensRun(entry)) this.needsMemory = true
      else if (!this.owners.has(event.invocationId)) this.owners.set(event.invocationId, event.runId)
      run = {
        runId: event.runId,
        firstLine: entry.line,
        events: 0,
        last: { line: entry.line, eventId: event.id, seq: 0 },
        verifier: entry.row !== undefined
          ? RunVerifier.make(event.runId, { eventIdsUnique: true, invocationOwner: (inv) => this.owners.get(inv) }, { marks: false })
          : undefined,
        tail: LedgerRules.emptyTail(event.runId),
        calls: new Map(),
        bundleStart: undefined,
        failure: undefined
      }
      this.runs.set(event.runId, run)
    } else if (run !== this.current) this.needsMemory = true
    this.current = run
    run.events++
    if (this.needsMemory || run.failure !== undefined || this.duplicate !== undefined) return
    this.step(run, entry)
  }

  private step(run: RunCheck, entry: ImportEntry): void {
    if (run.verifier !== undefined) {
      if (this.restoreChecked && isRecoveryFact(entry.event)) this.restoreChecked = false
      const open = run.verifier.tail.bundle !== undefined
      // `fastEntry` builds the row with its event; a row decoded by the Schema gets one here.
      const row = entry.row as ImportEntry["row"] & { readonly event?: RuntimeEvent }
      const failure = RunVerifier.step(run.verifier, row.event === entry.event ? row as RunVerifier.VerifiedRow : { ...row, event: entry.event }, { line: entry.line })
      if (failure !== undefined) {
        run.failure = new Refusal(failure.reason, failure.message, { line: entry.line, runId: run.runId, eventId: entry.event.id })
        return
      }
      run.tail = run.verifier.tail
      if (!open && run.tail.bundle !== undefined) run.bundleStart = { line: entry.line, eventId: entry.event.id }
    } else {
      const lookups: LedgerRules.Lookups = {
        call: (callId) => run.calls.get(callId),
        // Ids repeated in the file are refused as duplicates before any run check counts.
        eventIdTaken: () => false,
        invocationOwner: (inv) => this.owners.get(inv)
      }
      const checked = AppendCheck.checkAppend(run.tail, lookups, [entry.event], "restore", false)
      if (checked._tag === "Refused") {
        const reason = checked.reason === "sealed" || checked.reason === "not_sealed" ? "event_after_terminal" : checked.reason
        run.failure = new Refusal(reason, checked.message, { line: entry.line, runId: run.runId, eventId: entry.event.id })
        return
      }
      if (run.tail.bundle === undefined && checked.tail.bundle !== undefined) {
        run.bundleStart = { line: entry.line, eventId: entry.event.id }
      }
      run.tail = checked.tail
      for (const call of checked.calls.values()) run.calls.set(call.callId, call)
    }
    run.last = { line: entry.line, eventId: entry.event.id, seq: run.tail.seq }
  }

  // `checkGroups`, one line at a time.
  private checkGroup(entry: ImportEntry): void {
    if (this.group !== undefined) return
    const row = entry.row!
    const where = { line: entry.line, runId: entry.event.runId, eventId: entry.event.id }
    const open = this.openGroup
    if (row.end < row.seq) {
      this.group = new Refusal("group_invalid", `end ${row.end} is before seq ${row.seq}`, where)
    } else if (open !== undefined && (open.event.runId !== entry.event.runId || open.row!.end !== row.end)) {
      this.group = new Refusal(
        "group_invalid",
        `the group of run ${open.event.runId} that ends at seq ${open.row!.end} is cut after line ${open.line}`,
        where
      )
    }
    this.openGroup = row.seq === row.end ? undefined : entry
  }

  /** Once the file is read and no id was used twice: throws the refusal `prepareInMemory` would throw, if any. */
  finish(): void {
    const open = this.openGroup
    if (this.group === undefined && open !== undefined) {
      this.group = new Refusal("group_invalid", `the file ends inside a group that ends at seq ${open.row!.end}`, {
        line: open.line,
        runId: open.event.runId,
        eventId: open.event.id
      })
    }
    if (this.group !== undefined) throw this.group
    if (this.needsMemory) return
    for (const run of this.runs.values()) {
      if (run.failure !== undefined) throw run.failure
      if (run.verifier !== undefined) {
        const cut = RunVerifier.finish(run.verifier)
        if (cut === undefined) continue
        const at = run.bundleStart ?? run.last
        throw new Refusal(cut.reason, cut.message, { line: at.line, runId: run.runId, eventId: at.eventId })
      }
      const unclosed = LedgerRules.unclosedBundle(run.tail)
      if (unclosed === undefined) continue
      const reason = unclosed.reason === "sealed" || unclosed.reason === "not_sealed" ? "event_after_terminal" : unclosed.reason
      throw new Refusal(reason, unclosed.message, { line: run.last.line, runId: run.runId, eventId: run.last.eventId })
    }
  }
}

// The facts of a recovery bundle (spec 05), as `LedgerRules` names them.
const isRecoveryFact = (event: RuntimeEvent): boolean => {
  const tag = event.body._tag
  return tag === "ReconcileObserved" || tag === "RecoveryDecided" ||
    (tag === "FunctionResponse" && event.body.operationId !== undefined)
}

const unreadable = (file: string) => (error: { readonly message: string }) =>
  invalid(file, new Refusal("unreadable", `cannot read the file: ${error.message}`))

const guard = <A>(file: string, f: () => A): Effect.Effect<A, ImportInvalid> =>
  Effect.try({
    try: f,
    catch: (error) => {
      if (error instanceof Refusal) return invalid(file, error)
      if (error instanceof SectionRefusal) return invalid(file, new Refusal(error.reason, error.detail, error.where))
      throw error
    }
  })

/**
 * Reads FILE as a stream of strict UTF-8 lines (bounded: a line over `MAX_LINE_BYTES` is `too_large`), one JSON
 * value per line (blank lines ignored), all bare RuntimeEvents or all store-format lines, and checks everything
 * that does not depend on the store: the strict decode, ids unique in the file, store-format groups, and the rules
 * of spec 01 for each run that starts in the file. A run that continues a stored run (an increment) is checked by
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
 * of spec 01 for each run that starts in the file. A run that continues a stored run (an increment) is checked by
 * `importPrepared` from the stored tail. Refusals are `ImportInvalid` naming the line.
 *
 * One streaming pass holds only each run's tail and call index and the file's ids (`PreparedStream`); a file with an
 * increment, or whose runs' lines interleave, is then read again and held in memory (`PreparedInMemory`).
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
 */
export const importPrepared = Effect.fn("ImportLedger.importPrepared")(function*(prepared: PreparedImport) {
  const store = yield* RuntimeEventStore
  const listed = new Set<string>(yield* store.listRuns())
  if (prepared._tag === "Stream") {
    const restore = store.restoreStream
    if (restore !== undefined && ![...prepared.runs.keys()].some((runId) => listed.has(runId))) {
      return yield* importStreamed(prepared, restore, store.restoreProven)
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
  restore: NonNullable<RuntimeEventStoreShape["restoreStream"]>,
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
    const write = restoreProven !== undefined && proven.length === runs.length
      ? restoreProven(proven, provenEventsOf(fs, file, prepared.proven, prepared.format))
      : restore(plans, eventsOf(fs, file, prepared.proven))
    const reached = runs.length === 0 ? [] : yield* write.pipe(
      Effect.catchTags({ AppendRejected: refused, RunSealed: refused })
    )
    const report: Array<RunImport> = runs.map((run, i) => ({ runId: run.runId, added: run.events, skipped: 0, highWater: reached[i]! }))
    const result: LedgerImport = {
      file,
      format: prepared.format,
      added: report.reduce((n, r) => n + r.added, 0),
      skipped: 0,
      runs: report
    }
    return result
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
  const result: LedgerImport = {
    file,
    format: prepared.format,
    added: report.reduce((n, r) => n + r.added, 0),
    skipped: report.reduce((n, r) => n + r.skipped, 0),
    runs: report
  }
  return result
  })

/**
 * `prepareImport` then `importPrepared`: the events of an `import` of spec 06 over the store. A version 2 export's run
 * headers and claims are checked but not written here: `RestoreRunHeaders.importWithHeaders` writes them too (the CLI).
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
