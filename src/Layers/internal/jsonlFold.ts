// Turns the JSONL scanner's items into verified CommittedRows: strict row decoding (canonical bytes, schema) and
// the shared per-run rules (RunVerifier), with store-wide ids and invocations. Pure; the JSONL layer drives it.
import * as Either from "effect/Either"
import * as CanonicalJson from "../../Domain/CanonicalJson.js"
import * as Digest from "../../Domain/Digest.js"
import { LedgerCorruption } from "../../Domain/Errors.js"
import { describeParseError } from "../../Domain/ParseIssues.js"
import type { CorruptionReason } from "../../Domain/Errors.js"
import {
  CommittedRow,
  decodeEvent,
  decodeParsed,
  jsonlLine,
  makeCommittedRow,
  rememberCanonicalText
} from "../../Domain/RuntimeEvent.js"
import * as RunVerifier from "../../Domain/Rules/RunVerifier.js"
import type { BadItem, CutItem, RowItem, ScanItem, TornTail } from "./jsonlScan.js"

const ROW_KEYS = ["digest", "end", "event", "seq"]

/**
 * Whether `s` is a well-formed digest (`Digest.isDigestText`; re-exported for the readers' row checks).
 *
 * @since 0.1.0
 * @category layers
 */
export const isDigestText = Digest.isDigestText

const eventIdOf = (value: { readonly [key: string]: unknown }): string | undefined => {
  const event = value["event"]
  const id = typeof event === "object" && event !== null ? (event as { readonly id?: unknown }).id : undefined
  return typeof id === "string" ? id : undefined
}

const invocationOf = (value: { readonly [key: string]: unknown }): string | undefined => {
  const event = value["event"]
  const inv = typeof event === "object" && event !== null ? (event as { readonly invocationId?: unknown }).invocationId : undefined
  return typeof inv === "string" ? inv : undefined
}

const rowCorruption = (item: RowItem, reason: CorruptionReason, detail: string): LedgerCorruption => {
  const eventId = eventIdOf(item.value)
  return RunVerifier.corruption(item.runId, reason, detail, {
    seq: item.seq,
    line: item.line,
    ...(eventId !== undefined ? { eventId } : {})
  })
}

/**
 * Decodes one row line strictly: exactly the keys `digest`, `end`, `event`, `seq`; a well-formed digest; an event
 * within the limits; the line byte-identical to its canonical encoding (`non_canonical`); the event strictly decoded.
 *
 * @since 0.1.0
 * @category layers
 */
export const decodeRow = (item: RowItem): CommittedRow | LedgerCorruption => {
  const value = item.value
  const keys = Object.keys(value)
  if (
    keys.length !== ROW_KEYS.length || !hasOwn.call(value, "digest") || !hasOwn.call(value, "end") ||
    !hasOwn.call(value, "event") || !hasOwn.call(value, "seq")
  ) {
    return rowCorruption(item, "schema_invalid", `the row must have exactly the keys digest, end, event, seq; it has ${keys.join(", ")}`)
  }
  const digest = value["digest"]
  if (typeof digest !== "string" || !isDigestText(digest)) {
    return rowCorruption(item, "schema_invalid", "the row's digest is not `sha256:` and 64 lowercase hex digits")
  }
  const fast = decodeCanonicalRow(item, digest)
  if (fast !== undefined) return fast
  const eventText = CanonicalJson.encodeParsed(value["event"])
  if (eventText._tag === "Fail") return rowCorruption(item, "schema_invalid", eventText.failure.message)
  const canonical = jsonlLine(item.seq, item.end, digest, eventText.text)
  if (item.text.length !== canonical.length - 1 || !canonical.startsWith(item.text)) {
    return rowCorruption(item, "non_canonical", "the line's bytes differ from the canonical encoding of its own value")
  }
  const decoded = decodeEvent(value["event"])
  if (Either.isLeft(decoded)) {
    return rowCorruption(
      item,
      "schema_invalid",
      `the event fails the strict decode: ${describeParseError(decoded.left)}`
    )
  }
  rememberCanonicalText(decoded.right, eventText.text)
  return new CommittedRow({ digest, end: item.end, event: decoded.right, seq: item.seq }, true)
}

// The fast path of `decodeRow` for a line that is what the store writes: the line is exactly
// `{"digest":…,"end":…,"event":<text>,"seq":…}`, `<text>` is the canonical text of the parsed event (checked by
// `decodeParsed`, which confirms without re-encoding when it can) and the event decodes strictly. Any doubt returns
// `undefined`, and the full path decides and words the error, so both paths accept and refuse the same lines.
// The shape is checked piece by piece at its offsets, the same test as `text.startsWith(head) && text.endsWith(tail)`
// with head = `{"digest":"<digest>","end":<end>,"event":` and tail = `,"seq":<seq>}` and the text longer than both,
// without building either string (test/JsonlFastRow.test.ts checks the two against each other).
const decodeCanonicalRow = (item: RowItem, digest: string): CommittedRow | undefined => {
  const text = item.text
  const span = eventSpan(text, digest, item.end, item.seq)
  if (span === undefined) return undefined
  const decoded = decodeParsed(item.value["event"], text.slice(span.from, span.to))
  if (Either.isLeft(decoded)) return undefined
  // What `new CommittedRow(…, true)` builds, without the Schema constructor's copies and default merging (the
  // fields were all just checked; test/FastDecode.test.ts checks `makeCommittedRow` against the constructor).
  return makeCommittedRow(digest, item.end, decoded.right, item.seq)
}

const hasOwn = Object.prototype.hasOwnProperty

const HEAD_OPEN = `{"digest":"`
const HEAD_END = `","end":`
const HEAD_EVENT = `,"event":`
const TAIL_SEQ = `,"seq":`

/**
 * Where the event's text lies in a row line written as the store writes it, `{"digest":"<digest>","end":<end>,
 * "event":<event>,"seq":<seq>}` with a non-empty `<event>`; `undefined` when the line is not of that shape.
 *
 * @since 0.1.0
 * @category layers
 */
export const eventSpan = (
  text: string,
  digest: string,
  end: number,
  seq: number
): { readonly from: number; readonly to: number } | undefined => {
  if (!text.startsWith(HEAD_OPEN) || !text.startsWith(digest, HEAD_OPEN.length)) return undefined
  const atEnd = HEAD_OPEN.length + digest.length
  if (!text.startsWith(HEAD_END, atEnd)) return undefined
  const endText = String(end)
  const atEvent = atEnd + HEAD_END.length + endText.length
  if (!text.startsWith(endText, atEnd + HEAD_END.length) || !text.startsWith(HEAD_EVENT, atEvent)) return undefined
  const from = atEvent + HEAD_EVENT.length
  const seqText = String(seq)
  const to = text.length - TAIL_SEQ.length - seqText.length - 1
  if (
    to <= from || !text.startsWith(TAIL_SEQ, to) || !text.startsWith(seqText, to + TAIL_SEQ.length) ||
    text.charCodeAt(text.length - 1) !== 125
  ) return undefined
  return { from, to }
}

/**
 * A corruption of the whole file (no run can be trusted), reported against `runId`.
 *
 * @since 0.1.0
 * @category layers
 */
export const fileCorruption = (
  runId: string,
  reason: CorruptionReason,
  detail: string,
  line: number
): LedgerCorruption =>
  runId.length > 0
    ? RunVerifier.corruption(runId, reason, detail, { line })
    : new LedgerCorruption({ runId, reason, line, message: `ledger line ${line}: ${reason}: ${detail}` })

/**
 * The corruption of a line that cannot be tied to a run; it fails every run.
 *
 * @since 0.1.0
 * @category layers
 */
export const badLine = (runId: string, item: BadItem): LedgerCorruption =>
  fileCorruption(
    runId,
    item.reason,
    `${item.message} (byte ${item.offset}), with a complete append group after it that one interrupted append cannot explain (so it is ` +
      "not a torn tail); a line that cannot be tied to a run fails every run",
    item.line
  )

/**
 * The corruption of an append group cut short before other complete groups.
 *
 * @since 0.1.0
 * @category layers
 */
export const cutGroup = (item: CutItem): LedgerCorruption =>
  RunVerifier.corruption(
    item.runId,
    "torn_row",
    `the append group stops at seq ${item.seq} of ${item.end}: line ${item.line} does not continue it, and complete groups follow`,
    { seq: item.seq, line: item.line }
  )

/**
 * The corruption of a torn tail; it fails every run. A tail holding a complete line that is JSON but no row is no
 * torn tail (`TornTail.notRow`): it fails as `schema_invalid` at that line, which no repair can mend (docs/recovery.md,
 * state unreadable_file), never as a `torn_row` whose quarantine would refuse it.
 *
 * @since 0.1.0
 * @category layers
 */
export const tornTail = (runId: string, tail: TornTail, path: string): LedgerCorruption =>
  tail.notRow !== undefined
    ? fileCorruption(
      runId,
      "schema_invalid",
      `${path} line ${tail.notRow.line} (byte ${tail.notRow.offset}): ${tail.notRow.message}; no interrupted append ` +
        "leaves a complete line that is no row, so this is not a torn tail that quarantine can cut: no repair can " +
        "mend the file, run `runtime-resume repair --quarantine-ledger` to move it aside whole (kept)",
      tail.notRow.line
    )
    : fileCorruption(
    runId,
    "torn_row",
    `torn tail in ${path}: ${tail.detail}; ${tail.length} bytes from byte ${tail.offset} follow the last complete ` +
      "append group. No writer holds the workspace lock, so this is not an append in flight: run " +
      "`runtime-resume repair --quarantine-torn-tail` to move the tail aside",
    tail.line
  )

/**
 * Store-wide facts a run's verification needs from the lines before it: event ids and invocation owners.
 *
 * @since 0.1.0
 * @category layers
 */
export class StoreTracker {
  readonly invocations = new Map<string, string>()
  private readonly seen = new Set<string>()
  /** Lookups for a RunVerifier: ids and invocations of earlier lines. */
  readonly lookups: RunVerifier.StoreLookups
  // The id the last lookup added to `ids` (one Set operation per row: the lookup adds as it tests, and `note` then
  // skips it). An id added for a row that is then refused does not matter: every fold stops at a refused row, or
  // (ScanFold) notes its id anyway, and a retracted provisional pass clears the set.
  private addedId: string | undefined = undefined

  constructor(readonly ids: Set<string> = new Set()) {
    this.lookups = {
      // Every checked row's id is noted here (its run's included), so a verifier needs no id set of its own: one
      // set per store, not two (the store-wide set is the O(events) state of a JSONL writer).
      eventIdsUnique: true,
      eventIdTakenElsewhere: (id) => {
        const ids = this.ids
        const before = ids.size
        ids.add(id)
        if (ids.size === before) return true
        this.addedId = id
        return false
      },
      invocationOwner: (inv) => this.invocations.get(inv)
    }
  }

  /** Records a row of `runId` after it was checked. */
  note(runId: string, eventId: string | undefined, invocationId: string | undefined): void {
    if (eventId !== undefined && eventId !== this.addedId) this.ids.add(eventId)
    this.addedId = undefined
    if (!this.seen.has(runId)) {
      this.seen.add(runId)
      if (invocationId !== undefined && !this.invocations.has(invocationId)) this.invocations.set(invocationId, runId)
    }
  }

  /** Records a row that was not decoded (another run's), from its parsed value. */
  noteRaw(item: RowItem): void {
    this.note(item.runId, eventIdOf(item.value), invocationOf(item.value))
  }
}

/**
 * Verifies one run's rows out of the file's items; other runs only feed the store-wide lookups.
 *
 * @since 0.1.0
 * @category layers
 */
export class RunFold {
  readonly tracker = new StoreTracker()
  readonly verifier: RunVerifier.RunVerifier
  /** The last verified row of the run. */
  last: CommittedRow | undefined = undefined

  /**
   * `marks: false` for a followed read (`VerifiedRead.register`): its planner shares `verifier` and needs no mark on
   * the rows.
   */
  constructor(readonly runId: string, options: { readonly marks?: boolean } = {}) {
    this.verifier = RunVerifier.make(runId, this.tracker.lookups, options.marks === false ? { marks: false } : {})
  }

  /** Verifies the run's rows among `items`, pushing them to `out`; returns the first corruption. */
  process(items: ReadonlyArray<ScanItem>, out: Array<CommittedRow>): LedgerCorruption | undefined {
    for (const item of items) {
      switch (item._tag) {
        case "Bad":
          return badLine(this.runId, item)
        case "Cut":
          if (item.runId === this.runId) return cutGroup(item)
          break
        case "Row": {
          if (item.runId !== this.runId) {
            this.tracker.noteRaw(item)
            break
          }
          const row = decodeRow(item)
          if (row instanceof LedgerCorruption) return row
          const failure = RunVerifier.step(this.verifier, row, { line: item.line })
          if (failure !== undefined) return failure
          this.tracker.note(item.runId, row.event.id, row.event.invocationId)
          this.last = row
          out.push(row)
        }
      }
    }
    return undefined
  }

  /** Ends the read: the rows must not end inside a recovery bundle. */
  finish(): LedgerCorruption | undefined {
    return this.last === undefined ? undefined : RunVerifier.finish(this.verifier)
  }
}

/**
 * Verifies every run's rows out of the file's items, in file order, with one RunVerifier per run.
 *
 * @since 0.1.0
 * @category layers
 */
export class StoreFold {
  readonly verifiers = new Map<string, RunVerifier.RunVerifier>()
  /** The line of the item that `process` last failed on. */
  failedLine = 0
  private readonly options: RunVerifier.VerifierOptions

  /**
   * `marks: false` when the rows are never handed to a planner (the whole-file verification keeps none): no mark is
   * stamped on each row, which a planner would only need to take a row on trust.
   */
  constructor(
    readonly tracker: StoreTracker,
    private readonly firstRunId: () => string | undefined,
    options: { readonly marks?: boolean } = {}
  ) {
    this.options = options.marks === false ? { marks: false } : {}
  }

  /** Verifies `items`, pushing rows to `out` when given; returns the first corruption. */
  process(items: ReadonlyArray<ScanItem>, out?: Array<CommittedRow>): LedgerCorruption | undefined {
    for (const item of items) {
      this.failedLine = item.line
      switch (item._tag) {
        case "Bad":
          return badLine(this.firstRunId() ?? "", item)
        case "Cut":
          return cutGroup(item)
        case "Row": {
          let verifier = this.verifiers.get(item.runId)
          if (verifier === undefined) {
            verifier = RunVerifier.make(item.runId, this.tracker.lookups, this.options)
            this.verifiers.set(item.runId, verifier)
          }
          const row = decodeRow(item)
          if (row instanceof LedgerCorruption) return row
          const failure = RunVerifier.step(verifier, row, { line: item.line })
          if (failure !== undefined) return failure
          this.tracker.note(item.runId, row.event.id, row.event.invocationId)
          out?.push(row)
        }
      }
    }
    return undefined
  }

  /** Ends the read of the whole file: no run may end inside a recovery bundle. */
  finish(): LedgerCorruption | undefined {
    for (const verifier of this.verifiers.values()) {
      const cut = RunVerifier.finish(verifier)
      if (cut !== undefined) return cut
    }
    return undefined
  }
}

/**
 * What `ScanFold` hands on: a verified row, or a run's end with its corruption and its last row that verified.
 *
 * @since 0.1.0
 * @category models
 */
export type ScanOutput =
  | { readonly _tag: "Row"; readonly row: CommittedRow }
  | { readonly _tag: "Failed"; readonly runId: string; readonly error: LedgerCorruption; readonly lastGood: CommittedRow | undefined }

/**
 * Verifies every run of the file in one pass, each exactly as `RunFold` would verify it alone: a corrupt run ends
 * with its `Failed` item and the others go on; a line that cannot be tied to a run fails every run, those seen
 * before it and those after. Store-wide ids and invocations come from every row before, as in `RunFold`.
 *
 * @since 0.1.0
 * @category layers
 */
export class ScanFold {
  readonly tracker = new StoreTracker()
  /**
   * `onVerifier`, for a followed scan (`VerifiedRead.registerScan`): each run's verifier is handed to it before the
   * run's first item, and no row is marked (the run's planner shares the verifier).
   */
  constructor(private readonly onVerifier?: (verifier: RunVerifier.RunVerifier) => void) {}

  private readonly verifiers = new Map<string, RunVerifier.RunVerifier>()
  private readonly last = new Map<string, CommittedRow | undefined>()
  private readonly failed = new Set<string>()
  /** The line that fails every run, once one was found. */
  private bad: BadItem | undefined = undefined

  /** Runs seen so far, in order of first appearance. */
  get runs(): ReadonlyArray<string> {
    return [...this.last.keys()]
  }

  private fail(runId: string, error: LedgerCorruption, out: Array<ScanOutput>): void {
    if (this.failed.has(runId)) return
    if (!this.last.has(runId)) this.last.set(runId, undefined)
    this.failed.add(runId)
    out.push({ _tag: "Failed", runId, error, lastGood: this.last.get(runId) })
  }

  /** Verifies `items`, pushing rows and verdicts to `out`. */
  process(items: ReadonlyArray<ScanItem>, out: Array<ScanOutput>): void {
    for (const item of items) {
      switch (item._tag) {
        case "Bad":
          if (this.bad === undefined) {
            this.bad = item
            for (const runId of this.last.keys()) this.fail(runId, badLine(runId, item), out)
          }
          break
        case "Cut":
          this.fail(item.runId, cutGroup(item), out)
          break
        case "Row": {
          const runId = item.runId
          if (this.bad !== undefined) this.fail(runId, badLine(runId, this.bad), out)
          if (this.failed.has(runId)) {
            this.tracker.noteRaw(item)
            break
          }
          let verifier = this.verifiers.get(runId)
          if (verifier === undefined) {
            const onVerifier = this.onVerifier
            verifier = RunVerifier.make(runId, this.tracker.lookups, onVerifier !== undefined ? { marks: false } : {})
            this.verifiers.set(runId, verifier)
            this.last.set(runId, undefined)
            onVerifier?.(verifier)
          }
          const row = decodeRow(item)
          const failure = row instanceof LedgerCorruption ? row : RunVerifier.step(verifier, row, { line: item.line })
          if (failure !== undefined) {
            this.fail(runId, failure, out)
            this.tracker.noteRaw(item)
            break
          }
          const good = row as CommittedRow
          this.tracker.note(runId, good.event.id, good.event.invocationId)
          this.last.set(runId, good)
          out.push({ _tag: "Row", row: good })
        }
      }
    }
  }

  /** Ends the pass: `error(runId)` (a torn tail) fails every run not failed yet, and those only the tail names. */
  finish(tailRuns: ReadonlyArray<string>, error: ((runId: string) => LedgerCorruption) | undefined, out: Array<ScanOutput>): void {
    if (error !== undefined) {
      for (const runId of [...this.last.keys(), ...tailRuns]) this.fail(runId, error(runId), out)
    }
    // No run may end inside a recovery bundle (docs/spec/05-reconciliation.md: reported at the bundle's first seq).
    for (const [runId, verifier] of this.verifiers) {
      if (this.failed.has(runId)) continue
      const cut = RunVerifier.finish(verifier)
      if (cut !== undefined) this.fail(runId, cut, out)
    }
  }
}
