// The byte-level JSONL line scanner of spec 01: splits the ledger into physical lines, parses them, ties them to runs,
// tracks append groups, and tells the committed part (complete groups) from the torn tail. Pure and push-based.
import * as CanonicalJson from "../../Domain/CanonicalJson.js"

/** A complete line that parsed as a row and is tied to a run (its group's run, else its event's `runId`). */
export interface RowItem {
  readonly _tag: "Row"
  readonly runId: string
  /** 1-based physical line. */
  readonly line: number
  /** Byte offset of the line's first byte. */
  readonly offset: number
  readonly seq: number
  readonly end: number
  /** The line's text, without its newline. */
  readonly text: string
  /** `JSON.parse(text)`: a plain object with safe-integer `seq` and `end`. */
  readonly value: { readonly [key: string]: unknown }
}

/** A complete line that cannot be tied to a run: not UTF-8 JSON (`invalid_json`) or not a row (`schema_invalid`). */
export interface BadItem {
  readonly _tag: "Bad"
  readonly line: number
  readonly offset: number
  readonly reason: "invalid_json" | "schema_invalid"
  readonly message: string
}

/** An append group of `runId` that stops before its `seq == end` line, with complete lines after it. */
export interface CutItem {
  readonly _tag: "Cut"
  readonly runId: string
  /** The line that interrupts the group. */
  readonly line: number
  /** The last seq the group has, and the `end` it announced. */
  readonly seq: number
  readonly end: number
}

/** What the scanner hands on, in file order, once it is known not to be part of the tail. */
export type ScanItem = RowItem | BadItem | CutItem

/** Everything after the last complete group: a partial line, a cut group, bytes that are not JSON. */
export interface TornTail {
  /** Byte offset where the tail starts (the end of the last complete group). */
  readonly offset: number
  readonly length: number
  /** 1-based physical line where the tail starts. */
  readonly line: number
  /** Runs named by tail lines that parse, in order of appearance. */
  readonly runIds: ReadonlyArray<string>
  /** Why the first tail line is torn, for messages. */
  readonly detail: string
}

const NEWLINE = 10

/** Parses one complete line's bytes into a row candidate, or says why it cannot be one. */
export const classifyLine = (
  bytes: Uint8Array
):
  | { readonly _tag: "Row"; readonly text: string; readonly value: { readonly [key: string]: unknown }; readonly seq: number; readonly end: number; readonly eventRunId: string | undefined }
  | { readonly _tag: "Bad"; readonly reason: "invalid_json" | "schema_invalid"; readonly message: string } =>
{
  const text = CanonicalJson.decodeUtf8(bytes)
  if (text === undefined) return { _tag: "Bad", reason: "invalid_json", message: "the line is not valid UTF-8" }
  const parsed = CanonicalJson.parseJson(text)
  if (parsed === undefined) {
    return {
      _tag: "Bad",
      reason: "invalid_json",
      message: text.length === 0 ? "the line is empty" : text.includes("\u0000") ? "the line holds NUL bytes" : "the line is not valid JSON"
    }
  }
  const value = parsed.value
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { _tag: "Bad", reason: "schema_invalid", message: "the line is JSON but not a ledger row object" }
  }
  const row = value as { readonly [key: string]: unknown }
  const seq = row["seq"]
  const end = row["end"]
  if (!isPositiveSafeInt(seq) || !isPositiveSafeInt(end) || end < seq) {
    return {
      _tag: "Bad",
      reason: "schema_invalid",
      message: "the line is JSON but not a ledger row (it needs positive integer `seq` and `end`, with end >= seq)"
    }
  }
  const event = row["event"]
  const runId = typeof event === "object" && event !== null ? (event as { readonly runId?: unknown }).runId : undefined
  return {
    _tag: "Row",
    text,
    value: row,
    seq,
    end,
    eventRunId: typeof runId === "string" && runId.length > 0 ? runId : undefined
  }
}

const isPositiveSafeInt = (u: unknown): u is number => typeof u === "number" && Number.isSafeInteger(u) && u >= 1

/** Splits bytes into newline-terminated lines as they arrive; a line may span chunks. */
export class LineSplitter {
  /** Bytes consumed so far. */
  bytes = 0
  /** Complete lines seen so far. */
  lines = 0
  private carry: Array<Uint8Array> = []
  private carryLength = 0
  private nextLineStart = 0

  /** Calls `onLine` for each complete line (without its newline) with its 1-based number and byte range. */
  push(chunk: Uint8Array, onLine: (bytes: Uint8Array, line: number, offset: number, endOffset: number) => void): void {
    let start = 0
    for (;;) {
      const nl = chunk.indexOf(NEWLINE, start)
      if (nl < 0) break
      let lineBytes: Uint8Array
      if (this.carryLength > 0) {
        this.carry.push(chunk.subarray(start, nl))
        lineBytes = Buffer.concat(this.carry, this.carryLength + nl - start)
        this.carry = []
        this.carryLength = 0
      } else {
        lineBytes = chunk.subarray(start, nl)
      }
      const offset = this.nextLineStart
      this.nextLineStart = this.bytes + nl + 1
      onLine(lineBytes, ++this.lines, offset, this.nextLineStart)
      start = nl + 1
    }
    if (start < chunk.length) {
      // A copy: the carry outlives this chunk, and a small view would pin the whole chunk.
      const rest = Uint8Array.prototype.slice.call(chunk, start)
      this.carry.push(rest)
      this.carryLength += rest.length
    }
    this.bytes += chunk.length
  }

  /** How many bytes of an unfinished last line (no newline yet) are held. */
  get partialLength(): number {
    return this.carryLength
  }
}

/**
 * Splits a ledger into lines as its bytes arrive and classifies them. Lines after the last complete group are
 * held back (they may be the torn tail); they are handed on, in order, once a complete group follows them.
 * With `keepRows: false` nothing is handed on (only the run list and the tail are kept, for `listRuns`).
 */
export class LineScanner {
  /** Runs named by lines handed on (not the tail), in order of first appearance. */
  readonly runs: Array<string> = []
  private readonly runSet = new Set<string>()
  private readonly splitter = new LineSplitter()
  // End of the last complete group, and the line after it.
  private committedEnd = 0
  private committedLine = 1
  // The region after the last complete group.
  private pending: Array<ScanItem> = []
  private pendingRuns: Array<string> = []
  private pendingBad = false
  private pendingDetail: string | undefined = undefined
  private open: { runId: string; lastSeq: number; end: number } | undefined = undefined
  private out: Array<ScanItem> = []
  private readonly onLine = (bytes: Uint8Array, line: number, offset: number, endOffset: number) =>
    this.completeLine(bytes, line, offset, endOffset)

  constructor(private readonly keepRows: boolean = true) {}

  /** Bytes consumed so far. */
  get bytes(): number {
    return this.splitter.bytes
  }

  /** The first run the file names (handed on or not), for file-level errors. */
  get firstRunId(): string | undefined {
    return this.runs[0] ?? this.pendingRuns[0]
  }

  /** Feeds the next bytes; items that became committed are pushed to `out`. */
  push(chunk: Uint8Array, out: Array<ScanItem>): void {
    this.out = out
    this.splitter.push(chunk, this.onLine)
  }

  /** Ends the input: returns the torn tail, if any. Nothing more is handed on. */
  end(): TornTail | undefined {
    const partial = this.splitter.partialLength > 0
    if (partial && this.pendingDetail === undefined && this.open === undefined) {
      this.pendingDetail = `line ${this.splitter.lines + 1} has no newline (a partial write)`
    }
    if (this.bytes === this.committedEnd) return undefined
    return {
      offset: this.committedEnd,
      length: this.bytes - this.committedEnd,
      line: this.committedLine,
      runIds: this.pendingRuns.slice(),
      detail: this.pendingDetail ??
        (this.open !== undefined
          ? `the append group of run ${this.open.runId} stops at seq ${this.open.lastSeq} of ${this.open.end}`
          : "bytes after the last complete group")
    }
  }

  private notePendingRun(runId: string): void {
    if (!this.pendingRuns.includes(runId)) this.pendingRuns.push(runId)
  }

  private hold(item: ScanItem): void {
    if (this.keepRows && !this.pendingBad) this.pending.push(item)
  }

  private completeLine(bytes: Uint8Array, line: number, offset: number, endOffset: number): void {
    const c = classifyLine(bytes)
    if (c._tag === "Bad") {
      if (this.pendingDetail === undefined) this.pendingDetail = `line ${line}: ${c.message}`
      this.hold({ _tag: "Bad", line, offset, reason: c.reason, message: c.message })
      this.pendingBad = true
      this.open = undefined
      return
    }
    let runId: string | undefined
    const open = this.open
    if (open !== undefined) {
      if (c.seq === open.lastSeq + 1 && c.end === open.end) {
        runId = open.runId
      } else {
        if (this.pendingDetail === undefined) {
          this.pendingDetail = `line ${line}: the append group of run ${open.runId} stops at seq ${open.lastSeq} of ${open.end}`
        }
        this.hold({ _tag: "Cut", runId: open.runId, line, seq: open.lastSeq, end: open.end })
        this.open = undefined
      }
    }
    if (runId === undefined) {
      runId = c.eventRunId
      if (runId === undefined) {
        const message = "the line is a row whose event names no run"
        if (this.pendingDetail === undefined) this.pendingDetail = `line ${line}: ${message}`
        this.hold({ _tag: "Bad", line, offset, reason: "schema_invalid", message })
        this.pendingBad = true
        return
      }
    }
    this.notePendingRun(runId)
    this.hold({ _tag: "Row", runId, line, offset, seq: c.seq, end: c.end, text: c.text, value: c.value })
    if (c.seq === c.end) {
      // A complete group: everything held back is committed.
      this.open = undefined
      for (const r of this.pendingRuns) {
        if (!this.runSet.has(r)) {
          this.runSet.add(r)
          this.runs.push(r)
        }
      }
      for (const item of this.pending) this.out.push(item)
      this.pending = []
      this.pendingRuns = []
      this.pendingBad = false
      this.pendingDetail = undefined
      this.committedEnd = endOffset
      this.committedLine = line + 1
    } else {
      this.open = { runId, lastSeq: c.seq, end: c.end }
    }
  }
}
