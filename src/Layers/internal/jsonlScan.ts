// The byte-level JSONL line scanner of docs/spec/01-ledger.md: splits the ledger into physical lines, parses them, ties them to runs,
// tracks append groups, and tells the committed part (complete groups) from the torn tail. Pure and push-based.
import { createHash } from "node:crypto"
import type { Hash } from "node:crypto"
import * as CanonicalJson from "../../Domain/CanonicalJson.js"

// The torn-tail rule (docs/spec/01-ledger.md, "torn_row"), stated exactly. The writer appends one write of whole lines at its
// acknowledged length, and fsyncs it before it acknowledges the append or writes anything else; one write holds
// at most one group per run, each starting at its run's next seq. So a power loss can only change the bytes of the
// last write: cut them anywhere, and (page reordering) turn lost blocks into NULs, on block boundaries, while later
// blocks persist. Hence:
//   * The region after the last complete group ends (is handed on as committed, damage and all) at the next
//     `seq == end` line, unless it holds damage that one interrupted append explains; then it stays a candidate
//     torn tail, and it is the torn tail (`torn_row`, quarantinable) if the file ends before it stops being one.
//   * Damage: a complete line that is not a row (invalid_json / schema_invalid), or a group cut short (Cut).
//   * One interrupted append explains the region only if (a) every damaged line is `invalid_json` whose NULs all
//     lie in runs that start on a LOST_BLOCK_SIZE boundary (or where the region starts) and end on one (a flipped
//     byte, a non-JSON line or a `schema_invalid` line never qualifies), and (b) its rows fit one write: one group
//     per run, runs not interleaved, one `end` per group, seqs increasing, starting after the run's committed seq,
//     and a row may skip seqs only right after a lost-block line (lines are lost only inside lost blocks); a group
//     cut without a lost block in between, a run coming back, a second group of a run, a seq at or below the
//     committed one: each proves a second write, so the first one was acknowledged and the damage is corruption.
// Why this never quarantines committed data: acknowledged bytes are whole groups fsynced before the next write, so
// a power loss leaves them intact and the scanner hands them on before any damage; damage to them that a power
// loss cannot produce (a flipped byte, garbage, a misaligned NUL) is reported where it is, and block-aligned NULs
// inside them are reported as soon as any later line needs a second write. The one indistinguishable case, a whole
// block of committed data zeroed by the device with nothing after it but what one append could hold, is byte for
// byte the power loss of an unacknowledged append; quarantine then moves those bytes aside (never deletes them),
// and still refuses rows that do not chain onto their run.

/**
 * The block size of the power-loss signature: a lost block of an interrupted append reads as NULs, block-aligned.
 *
 * @since 0.1.0
 * @category constants
 */
export const LOST_BLOCK_SIZE = 4096

/**
 * Whether a complete line's NULs are all lost blocks: runs of NULs that start on a `LOST_BLOCK_SIZE` boundary (or at
 * `regionStart`, where the unacknowledged bytes begin) and end on one. A line with no NUL holds no lost block.
 *
 * @since 0.1.0
 * @category layers
 */
export const holdsOnlyLostBlocks = (bytes: Uint8Array, offset: number, regionStart: number): boolean => {
  let at = bytes.indexOf(0)
  if (at < 0) return false
  while (at >= 0) {
    let end = at + 1
    while (end < bytes.length && bytes[end] === 0) end++
    const start = offset + at
    if ((start % LOST_BLOCK_SIZE !== 0 && start !== regionStart) || (offset + end) % LOST_BLOCK_SIZE !== 0) return false
    at = bytes.indexOf(0, end)
  }
  return true
}

/**
 * Whether the damaged region after the last complete group can still be the power-loss image of ONE interrupted
 * append (the rule above, part b). Fed the region's lines in order, from the group left open when damage appeared.
 */
class TornImage {
  /** Still explainable by one interrupted append. */
  possible: boolean
  /** A `seq == end` line was held back because of this image (for the tail's message). */
  heldComplete = false
  /** Per run of the region: its group's `end`, the last seq seen, and whether the `seq == end` line came. */
  readonly groups = new Map<string, { end: number; lastSeq: number; closed: boolean }>()
  private current: string | undefined = undefined
  private afterLostBlock = false

  constructor(open: { readonly runId: string; readonly lastSeq: number; readonly end: number } | undefined, openStartOk: boolean) {
    this.possible = openStartOk
    if (open !== undefined) {
      this.groups.set(open.runId, { end: open.end, lastSeq: open.lastSeq, closed: false })
      this.current = open.runId
    }
  }

  /** A complete line that is not a row; `lostBlock`: it is `invalid_json` holding only lost blocks. */
  bad(lostBlock: boolean): void {
    if (!lostBlock) this.possible = false
    this.afterLostBlock = true
  }

  /** A group cut short with no lost block in between: no power loss does that. */
  cut(): void {
    this.possible = false
  }

  /** A row of `runId`; `committedSeq` is the run's seq before the region. */
  row(runId: string, seq: number, end: number, committedSeq: number): void {
    const gap = this.afterLostBlock
    this.afterLostBlock = false
    const group = this.groups.get(runId)
    if (group === undefined) {
      if (seq <= committedSeq || (!gap && seq !== committedSeq + 1)) this.possible = false
      this.groups.set(runId, { end, lastSeq: seq, closed: seq === end })
    } else {
      if (
        runId !== this.current || group.closed || end !== group.end || seq <= group.lastSeq ||
        (!gap && seq !== group.lastSeq + 1)
      ) this.possible = false
      group.lastSeq = seq
      group.closed = seq === end
    }
    this.current = runId
  }
}

/**
 * A complete line that parsed as a row and is tied to a run (its group's run, else its event's `runId`).
 *
 * @since 0.1.0
 * @category models
 */
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

/**
 * A complete line that cannot be tied to a run: not UTF-8 JSON (`invalid_json`) or not a row (`schema_invalid`).
 *
 * @since 0.1.0
 * @category models
 */
export interface BadItem {
  readonly _tag: "Bad"
  readonly line: number
  readonly offset: number
  readonly reason: "invalid_json" | "schema_invalid"
  readonly message: string
}

/**
 * An append group of `runId` that stops before its `seq == end` line, with complete lines after it.
 *
 * @since 0.1.0
 * @category models
 */
export interface CutItem {
  readonly _tag: "Cut"
  readonly runId: string
  /** The line that interrupts the group. */
  readonly line: number
  /** The last seq the group has, and the `end` it announced. */
  readonly seq: number
  readonly end: number
}

/**
 * What the scanner hands on, in file order, once it is known not to be part of the tail.
 *
 * @since 0.1.0
 * @category models
 */
export type ScanItem = RowItem | BadItem | CutItem

/**
 * The clean first part of a committed region, handed on by its byte range instead of its rows (a reader's scanner
 * with a `spanBytes` budget, once a group outgrew it): the rows of ONE append group of `runId`, seqs `firstSeq` ..
 * `lastSeq` consecutive, each with `end`, one per line from `line`. The consumer reads the bytes again and must find
 * exactly these rows, with the same SHA-256 of their line bytes (`hash`), else the file changed under it.
 *
 * @since 0.1.0
 * @category models
 */
export interface SpanItem {
  readonly _tag: "Span"
  readonly runId: string
  /** 1-based physical line of the first row. */
  readonly line: number
  /** Byte offset of the first row, and the offset just after the last row's newline. */
  readonly offset: number
  readonly endOffset: number
  /** How many lines (rows) the span holds. */
  readonly lines: number
  readonly firstSeq: number
  readonly lastSeq: number
  readonly end: number
  /** Hex SHA-256 over the lines' bytes, each without its newline, in order. */
  readonly hash: string
}

/**
 * What a scanner pushes: items, and (readers with a `spanBytes` budget) spans to read again.
 *
 * @since 0.1.0
 * @category models
 */
export type ScannedItem = ScanItem | SpanItem

/**
 * Everything after the last complete group: a partial line, a cut group, bytes that are not JSON.
 *
 * @since 0.1.0
 * @category models
 */
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
  /**
   * The first complete tail line that is JSON but no row (`schema_invalid`), if any. No interrupted append leaves
   * one (it writes whole canonical rows), and quarantine refuses it: such a tail is no torn tail (docs/spec/01-ledger.md,
   * "torn_row": a partial line, a cut group, or bytes that are not JSON), the file is `schema_invalid` there.
   */
  readonly notRow?: { readonly line: number; readonly offset: number; readonly message: string }
}

const NEWLINE = 10

/**
 * Parses one complete line's bytes into a row candidate, or says why it cannot be one.
 *
 * @since 0.1.0
 * @category layers
 */
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

/**
 * Splits bytes into newline-terminated lines as they arrive; a line may span chunks.
 *
 * @since 0.1.0
 * @category layers
 */
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
 *
 * With `provisional: true` (the writer's whole-file verification), the rows of a group still open are handed on as
 * they come, while the region after the last complete group holds no damage: a group of any length costs no memory.
 * They are then provisional (`line >= committedLine`) until a complete group ends the region; the consumer must be
 * able to take them back (`handedOnUncommitted` says whether it has to, once the file ends in a torn tail). Damage
 * in the region (a cut group, a line that is no row) is held back as without the option, and what follows it too.
 *
 * @since 0.1.0
 * @category layers
 */
export class LineScanner {
  /** Runs named by lines handed on (not the tail), in order of first appearance. */
  readonly runs: Array<string> = []
  private readonly runSet = new Set<string>()
  private readonly splitter = new LineSplitter()
  // End of the last complete group, and the line after it.
  private committedEnd = 0
  private regionLine = 1
  // Per run, the seq of its last line handed on (where its next append must start).
  private readonly committedSeq = new Map<string, number>()
  // The region after the last complete group.
  private pending: Array<ScanItem> = []
  private pendingRuns: Array<string> = []
  private pendingBad = false
  private pendingDetail: string | undefined = undefined
  // The region's first complete line that is JSON but no row (set once, cleared when the region commits).
  private pendingNotRow: { line: number; offset: number; message: string } | undefined = undefined
  private open: { runId: string; firstSeq: number; lastSeq: number; end: number } | undefined = undefined
  // Set once the region holds damage: whether one interrupted append still explains it (the rule at the top).
  private image: TornImage | undefined = undefined
  private out: Array<ScannedItem> = []
  private readonly onLine = (bytes: Uint8Array, line: number, offset: number, endOffset: number) =>
    this.completeLine(bytes, line, offset, endOffset)

  // Rows of the region after the last complete group already handed on (provisional mode).
  private handedOn = false
  // Line bytes of the rows held in `pending`, and the most ever held at once (what a test reads).
  private heldBytes = 0
  /** The most line bytes of rows this scanner held back at once. */
  peakHeldBytes = 0
  // The clean first part of the region, once it outgrew `spanBytes`: kept as a byte range (a reader re-reads it).
  private span: { runId: string; line: number; offset: number; endOffset: number; lines: number; firstSeq: number; lastSeq: number; end: number; hash: Hash } | undefined = undefined
  // Frozen once damage appears in the region (the span then stops growing; what follows is held as rows).
  private spanClosed = false

  /**
   * `spanBytes` (readers, not `provisional`): once the rows held back in a clean region (one open group, no damage)
   * exceed this many line bytes, they are dropped and the region's clean part is kept as a `SpanItem` (its byte
   * range, seqs and hash), handed on in their place when the region commits: a group of any length costs no memory.
   */
  constructor(
    private readonly keepRows: boolean = true,
    private readonly provisional: boolean = false,
    private readonly spanBytes: number | undefined = undefined
  ) {}

  /** The 1-based line where the region after the last complete group starts: items from it on are provisional. */
  get committedLine(): number {
    return this.regionLine
  }

  /** Whether rows after the last complete group were handed on (provisional mode): a torn tail must take them back. */
  get handedOnUncommitted(): boolean {
    return this.handedOn
  }

  /** Bytes consumed so far. */
  get bytes(): number {
    return this.splitter.bytes
  }

  /** The first run the file names (handed on or not), for file-level errors. */
  get firstRunId(): string | undefined {
    return this.runs[0] ?? this.pendingRuns[0]
  }

  /** Feeds the next bytes; items that became committed are pushed to `out`. */
  push(chunk: Uint8Array, out: Array<ScannedItem>): void {
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
    const detail = this.pendingDetail ??
      (this.open !== undefined
        ? `the append group of run ${this.open.runId} stops at seq ${this.open.lastSeq} of ${this.open.end}`
        : "bytes after the last complete group")
    return {
      offset: this.committedEnd,
      length: this.bytes - this.committedEnd,
      line: this.regionLine,
      runIds: this.pendingRuns.slice(),
      ...(this.pendingNotRow !== undefined ? { notRow: this.pendingNotRow } : {}),
      detail: this.image?.heldComplete === true
        ? `${detail} (blocks of NULs a power loss left); the complete lines after them can only be the rest of the ` +
          "same interrupted append, never acknowledged"
        : detail
    }
  }

  // The region holds damage from now on: judge it as a possible torn image, starting from the group left open.
  private damaged(): TornImage {
    if (this.image === undefined) {
      const open = this.open
      this.image = new TornImage(open, open === undefined || open.firstSeq === (this.committedSeq.get(open.runId) ?? 0) + 1)
    }
    return this.image
  }

  private notePendingRun(runId: string): void {
    if (!this.pendingRuns.includes(runId)) this.pendingRuns.push(runId)
  }

  private hold(item: ScanItem, bytes?: Uint8Array): void {
    if (!this.keepRows || this.pendingBad) return
    if (this.provisional && item._tag === "Row" && this.image === undefined && this.pending.length === 0) {
      // No damage in the region yet: the row goes on at once, provisionally.
      this.handedOn = true
      this.out.push(item)
      return
    }
    if (this.image !== undefined) this.spanClosed = true
    if (item._tag === "Row" && this.spanBytes !== undefined && !this.spanClosed && bytes !== undefined) {
      const span = this.span
      if (span !== undefined) {
        // The clean region goes on (the open group's next row): the span grows, nothing is held.
        span.hash.update(bytes)
        span.endOffset = item.offset + bytes.length + 1
        span.lines++
        span.lastSeq = item.seq
        return
      }
      if (this.heldBytes + bytes.length > this.spanBytes) {
        // The clean region outgrew the budget: keep its byte range, drop its rows (all of the one open group).
        const hash = createHash("sha256")
        const first = this.pending[0] as RowItem | undefined
        for (const held of this.pending) hash.update((held as RowItem).text, "utf8")
        hash.update(bytes)
        this.span = {
          runId: item.runId,
          line: first?.line ?? item.line,
          offset: first?.offset ?? item.offset,
          endOffset: item.offset + bytes.length + 1,
          lines: this.pending.length + 1,
          firstSeq: first?.seq ?? item.seq,
          lastSeq: item.seq,
          end: item.end,
          hash
        }
        this.pending = []
        this.heldBytes = 0
        return
      }
    }
    this.pending.push(item)
    if (bytes !== undefined) {
      this.heldBytes += bytes.length
      if (this.heldBytes > this.peakHeldBytes) this.peakHeldBytes = this.heldBytes
    }
  }

  // Hands on what the committed region held: its span first (it came first), then the rows and damage held.
  private commitRegion(): void {
    const span = this.span
    if (span !== undefined) {
      this.out.push({
        _tag: "Span",
        runId: span.runId,
        line: span.line,
        offset: span.offset,
        endOffset: span.endOffset,
        lines: span.lines,
        firstSeq: span.firstSeq,
        lastSeq: span.lastSeq,
        end: span.end,
        hash: span.hash.digest("hex")
      })
    }
    for (const item of this.pending) this.out.push(item)
    this.span = undefined
    this.spanClosed = false
    this.pending = []
    this.heldBytes = 0
  }

  private completeLine(bytes: Uint8Array, line: number, offset: number, endOffset: number): void {
    const c = classifyLine(bytes)
    if (c._tag === "Bad") {
      if (this.pendingDetail === undefined) this.pendingDetail = `line ${line}: ${c.message}`
      if (c.reason === "schema_invalid" && this.pendingNotRow === undefined) this.pendingNotRow = { line, offset, message: c.message }
      // The image first: `hold` hands nothing on once the region holds damage.
      this.damaged().bad(c.reason === "invalid_json" && holdsOnlyLostBlocks(bytes, offset, this.committedEnd))
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
        this.damaged().cut()
        this.hold({ _tag: "Cut", runId: open.runId, line, seq: open.lastSeq, end: open.end })
        this.open = undefined
      }
    }
    if (runId === undefined) {
      runId = c.eventRunId
      if (runId === undefined) {
        const message = "the line is a row whose event names no run"
        if (this.pendingDetail === undefined) this.pendingDetail = `line ${line}: ${message}`
        if (this.pendingNotRow === undefined) this.pendingNotRow = { line, offset, message }
        this.damaged().bad(false)
        this.hold({ _tag: "Bad", line, offset, reason: "schema_invalid", message })
        this.pendingBad = true
        return
      }
    }
    this.notePendingRun(runId)
    this.hold({ _tag: "Row", runId, line, offset, seq: c.seq, end: c.end, text: c.text, value: c.value }, bytes)
    const image = this.image
    if (image !== undefined) image.row(runId, c.seq, c.end, this.committedSeq.get(runId) ?? 0)
    if (c.seq === c.end) {
      this.open = undefined
      if (image !== undefined && image.possible) {
        // Damage before it that one interrupted append explains: this line is part of that append, not a
        // complete group; the region stays a candidate torn tail.
        image.heldComplete = true
        return
      }
      // A complete group: everything held back is committed.
      if (image === undefined) this.committedSeq.set(runId, c.seq)
      else for (const [r, g] of image.groups) this.committedSeq.set(r, g.lastSeq)
      this.image = undefined
      for (const r of this.pendingRuns) {
        if (!this.runSet.has(r)) {
          this.runSet.add(r)
          this.runs.push(r)
        }
      }
      this.commitRegion()
      this.handedOn = false
      this.pendingRuns = []
      this.pendingBad = false
      this.pendingDetail = undefined
      this.pendingNotRow = undefined
      this.committedEnd = endOffset
      this.regionLine = line + 1
    } else {
      // `this.open` is still set only when this line continued it.
      this.open = this.open !== undefined
        ? { runId, firstSeq: this.open.firstSeq, lastSeq: c.seq, end: c.end }
        : { runId, firstSeq: c.seq, lastSeq: c.seq, end: c.end }
    }
  }
}
