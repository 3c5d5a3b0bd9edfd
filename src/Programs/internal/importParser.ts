// The parser of an import file: strict UTF-8 lines as the bytes arrive, one JSON value per non-blank line, one format
// throughout, each line decoded into an ImportEntry (fast when certainly valid, else by the Schema, which words the refusal).
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as CanonicalJson from "../../Domain/CanonicalJson.js"
import * as Digest from "../../Domain/Digest.js"
import { describeParseError } from "../../Domain/ParseIssues.js"
import type { RuntimeEvent } from "../../Domain/RuntimeEvent.js"
import {
  canonicalText,
  CommittedRow as CommittedRowSchema,
  decodeEvent,
  decodeJsonEvent,
  decodeParsed,
  rememberCanonicalText
} from "../../Domain/RuntimeEvent.js"
import type { ProvenEvent } from "../../Services/RuntimeEventStore.js"
import { RecoverySection } from "../ImportRecoverySection.js"
import { MAX_LINE_BYTES, ProvenLines } from "./importLine.js"
import type { ImportEntry, ImportFormat } from "./importLine.js"
import { Refusal } from "./importRefusal.js"
import { provenBytes, rowEventSpan, writtenSpan } from "./importScanner.js"

const strict = { onExcessProperty: "error", errors: "first" } as const
const decodeRow = Schema.decodeUnknownEither(CommittedRowSchema, strict)

const isStoreFormat = (value: unknown): boolean =>
  typeof value === "object" && value !== null && !Array.isArray(value) && Object.hasOwn(value, "event")

// Decodes the file into entries as its bytes arrive: strict UTF-8 per line, one JSON value per non-blank line, one
// format throughout. A line is held only until its newline, and refused as `too_large` as soon as it passes
// MAX_LINE_BYTES, so a huge line costs at most that much memory.
/**
 * The parser of an import file's bytes into entries (the check pass and the write pass).
 *
 * @since 0.1.0
 * @category programs
 */
export class FileParser {
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

  /**
   * Whether entries carry their text's bytes (`ImportEntry.bytes`, views of the bytes read): for a caller that writes
   * each entry at once (`ImportOnePass`), never one that holds entries (each would keep its whole chunk alive).
   */
  keepBytes = false

  /** The file's version and its recovery section (a version 2 export's run headers and claims). */
  readonly section = new RecoverySection()

  /** The bytes of the line being decoded (valid while `onEntry` runs for it): a one-pass import copies them. */
  lineBytes: Buffer = Buffer.alloc(0)

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
    this.lineBytes = slice
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
    // A store-format line written as the store writes it, in a pass that proves lines (no `proven`): only its event's
    // text is parsed (`writtenEntry`); any other line, or any doubt, takes the way below.
    if (this.proven === undefined && this.format !== "events" && this.section.rowsNext()) {
      const written = writtenEntry(line, text, slice, this.keepBytes)
      if (written !== undefined) {
        this.format = "rows"
        this.written.mark(line)
        return this.emit(written)
      }
    }
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
    const fast = fastEntry(line, parsed.value, lineFormat, text, this.proven?.has(line) === true, this.keepBytes ? slice : undefined)
    if (fast === undefined) return this.emit(decodeEntry(line, parsed.value, lineFormat))
    if (fast.written && this.proven === undefined) this.written.mark(line)
    this.emit(fast.entry)
  }
}

const ROW_KEYS = ["digest", "end", "event", "seq"] as const

// Whether a parsed line's keys are exactly a store-format line's (`ROW_KEYS`), counted without an array per line.
const hasRowKeys = (row: object): boolean => {
  let n = 0
  for (const key in row) {
    if (key !== "digest" && key !== "end" && key !== "event" && key !== "seq") return false
    n++
  }
  return n === ROW_KEYS.length && Object.hasOwn(row, "digest") && Object.hasOwn(row, "end") && Object.hasOwn(row, "event") &&
    Object.hasOwn(row, "seq")
}
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
  proven: boolean,
  lineBytes: Uint8Array | undefined
): { readonly entry: ImportEntry; readonly written: boolean } | undefined => {
  if (format === "events") {
    const fast = fastEvent(value, lineText, proven)
    if (fast === undefined) return undefined
    // Written as it is, the event's text is the whole line: its bytes are the line's.
    const entry: ImportEntry = fast.written && lineBytes !== undefined
      ? { line, event: fast.event, text: fast.text, bytes: lineBytes }
      : { line, event: fast.event, text: fast.text }
    return { entry, written: fast.written }
  }
  const row = value as { readonly [key: string]: unknown }
  if (!hasRowKeys(row)) return undefined
  const { digest, end, seq } = row
  if (typeof digest !== "string" || !Digest.isDigestText(digest) || !isPositiveSafeInt(seq) || !isPositiveSafeInt(end)) return undefined
  // A line as the store writes it: the event's own text lies inside the wrapper.
  const span = writtenSpan(lineText, digest, end, seq)
  const fast = fastEvent(row["event"], span !== undefined ? lineText.slice(span[0], span[1]) : undefined, proven)
  if (fast === undefined) return undefined
  // The row as `RunVerifier.step` takes it (seq, digest, event), so the check pass builds no second object per line.
  const verified = { seq, end, digest, event: fast.event }
  // A line of ASCII only (as many bytes as UTF-16 units) has the event's text at the same offsets in its bytes.
  if (fast.written && span !== undefined && lineBytes !== undefined && lineBytes.length === lineText.length) {
    return { entry: { line, event: fast.event, text: fast.text, bytes: lineBytes.subarray(span[0], span[1]), row: verified }, written: true }
  }
  return { entry: { line, event: fast.event, text: fast.text, row: verified }, written: fast.written }
}

// The positive safe integer written in t[from, to) as JSON writes it (digits, no leading zero), else `undefined`.
const writtenInt = (t: string, from: number, to: number): number | undefined => {
  if (to - from < 1 || to - from > 16 || t.charCodeAt(from) === 0x30) return undefined
  let value = 0
  for (let i = from; i < to; i++) {
    const c = t.charCodeAt(i)
    if (c < 0x30 || c > 0x39) return undefined
    value = value * 10 + (c - 0x30)
  }
  return Number.isSafeInteger(value) ? value : undefined
}

// `fastEntry` of a store-format line written exactly as the store writes it (`rowEventSpan`: `{"digest":"<digest>",
// "end":<end>,"event":` + text + `,"seq":<seq>}`), parsing only the event's text: that line is one JSON value with
// exactly the members `digest`, `end`, `event` and `seq` if and only if its event's text is one JSON value, so the
// entry is the one `JSON.parse` of the whole line and `fastEntry` would give, with its text confirmed as written.
// `undefined` on any doubt (the caller then parses the whole line as before, which accepts or refuses it).
// `lineBytes` are the line's bytes; with `keepBytes`, the entry holds the view of its event's (`ImportEntry.bytes`).
const writtenEntry = (line: number, lineText: string, lineBytes: Buffer, keepBytes: boolean): ImportEntry | undefined => {
  const span = rowEventSpan(lineText)
  if (span === undefined) return undefined
  const [from, to] = span
  const end = writtenInt(lineText, 90, from - 9)
  const seq = writtenInt(lineText, to + 7, lineText.length - 1)
  if (end === undefined || seq === undefined || !Digest.isDigestText(lineText.slice(11, 82))) return undefined
  // The digest as a string of its own, from the line's bytes (the line's first 82 characters are ASCII, so its first 82
  // bytes): a slice of the line's text would keep the whole line alive for as long as the digest is (a piece of rows
  // waiting for its insert holds thousands).
  const digest = lineBytes.toString("latin1", 11, 82)
  const text = lineText.slice(from, to)
  const parsed = CanonicalJson.parseJson(text)
  if (parsed === undefined) return undefined
  const decoded = decodeParsed(parsed.value, text)
  if (Either.isLeft(decoded)) return undefined
  const event = decoded.right
  const row = { seq, end, digest, event }
  // A line of ASCII only (as many bytes as UTF-16 units) has the event's text at the same offsets in its bytes.
  return keepBytes && lineBytes.length === lineText.length
    ? { line, event, text, bytes: lineBytes.subarray(from, to), row }
    : { line, event, text, row }
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
