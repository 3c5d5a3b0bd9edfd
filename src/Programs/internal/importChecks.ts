// The two check folds of `import`: over a run held in memory (`checkRun`, `checkStoredPrefix`, `checkGroups`) and over
// the file's entries as they stream (`StreamCheck`), refusing the same lines with the rules of docs/ledger.md.
import * as Either from "effect/Either"
import type { ImportInvalidReason } from "../../Domain/Errors.js"
import { IdSet } from "../../Domain/IdSet.js"
import type { CommittedRow, RuntimeEvent } from "../../Domain/RuntimeEvent.js"
import { canonicalText } from "../../Domain/RuntimeEvent.js"
import * as AppendCheck from "../../Domain/Rules/AppendCheck.js"
import * as LedgerRules from "../../Domain/Rules/LedgerRules.js"
import * as RunVerifier from "../../Domain/Rules/RunVerifier.js"
import type { ImportEntry } from "./importLine.js"
import { Refusal } from "./importRefusal.js"

/**
 * Store-format lines come in groups: one run's contiguous lines of one append, the last with `seq == end`.
 *
 * @since 0.1.0
 * @category programs
 */
export const checkGroups = (entries: ReadonlyArray<ImportEntry>): void => {
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

/**
 * Whether a run of the file starts where a run starts: a store-format line with seq 1, or a bare opener. Such a run
 * can be checked in the file alone (its stored prefix, if any, must reappear byte for byte); any other is an
 * increment of a stored run, checked from that run's stored tail.
 *
 * @since 0.1.0
 * @category programs
 */
export const opensRun = (entry: ImportEntry): boolean =>
  entry.row !== undefined
    ? entry.row.seq === 1
    : entry.event.body._tag === "RunOpened" || entry.event.body._tag === "ContinuationStarted"

/**
 * Checks `fresh`, entries of one run, with the rules of docs/spec/01-ledger.md as the store applies them, continuing `stored` (the
 * run's committed rows, taken as the store verified them): store-format lines with their own seq and chain (read
 * rules), bare events as one restore-mode append from the stored tail. Throws the first refusal.
 *
 * @since 0.1.0
 * @category programs
 */
export const checkRun = (
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

/**
 * The part of the file's run that the store already holds must be byte for byte what it holds (same seq, same
 * canonical bytes); returns how many of the file's entries it covers.
 *
 * @since 0.1.0
 * @category programs
 */
export const checkStoredPrefix = (
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

// One run's state in the streaming pass: its first and last lines, and the checker of docs/spec/01-ledger.md from an empty run
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

/**
 * The streaming pass's checks, entry by entry, refusing exactly what `prepareInMemory` refuses: a line it cannot
 * read at once (thrown by the parser); then, once the file is read, the first duplicate id, then the first broken
 * group, then the first refusal of the first run (in order of first line) that has one.
 *
 * @since 0.1.0
 * @category programs
 */
export class StreamCheck {
  /** The file's event ids (no line per id: the line of a refused id is looked up again, on the refusal path only). */
  readonly ids = new IdSet()
  /**
   * `keepIds: false` keeps no id (`ids` stays empty and `duplicate` unset): for a caller whose store refuses an id
   * used twice as it writes (`ImportOnePass`, over `UNIQUE(event_id)`), so the pass does not hold O(events) ids.
   */
  constructor(private readonly options: { readonly keepIds?: boolean } = {}) {}
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
    if (this.options.keepIds !== false && !this.ids.add(event.id)) this.duplicate ??= { eventId: event.id, line: entry.line, runId: event.runId }
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

// The facts of a recovery bundle (docs/spec/05-reconciliation.md), as `LedgerRules` names them.
const isRecoveryFact = (event: RuntimeEvent): boolean => {
  const tag = event.body._tag
  return tag === "ReconcileObserved" || tag === "RecoveryDecided" ||
    (tag === "FunctionResponse" && event.body.operationId !== undefined)
}
