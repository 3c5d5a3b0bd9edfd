// FastCheck generators for the fuzz suite (test/Fuzz.test.ts): valid multi-run ledgers, their JSONL bytes and rows,
// byte- and line-level mutations, one generator per corruption reason of docs/spec/01-ledger.md, and oversized, deep and odd text.
import { Either, FastCheck as fc } from "effect"
import * as CanonicalJson from "../../src/Domain/CanonicalJson.js"
import * as Digest from "../../src/Domain/Digest.js"
import { CorruptionReason } from "../../src/Domain/Errors.js"
import { CallId, deriveOperationId, EventId, InvocationId, RunId, SessionId, TurnId } from "../../src/Domain/Ids.js"
import * as RE from "../../src/Domain/RuntimeEvent.js"
import * as LedgerRules from "../../src/Domain/Rules/LedgerRules.js"

/** The draw function of `FastCheck.gen()`. */
export type Gen = fc.GeneratorValue

// Arbitraries are built once and reused: building one per draw (a regex-based one especially) dominates the cost.
const intArbs = new Map<string, fc.Arbitrary<number>>()
const intArb = (min: number, max: number): fc.Arbitrary<number> => {
  const key = `${min}:${max}`
  let arb = intArbs.get(key)
  if (arb === undefined) intArbs.set(key, arb = fc.integer({ min, max }))
  return arb
}
const int = (g: Gen, min: number, max: number): number => g(intArb, min, max)
const FULL_UNICODE = fc.fullUnicodeString({ maxLength: 8 })
const SHORT_STRING = fc.string({ maxLength: 6 })
const STRING = fc.string({ maxLength: 12 })
const STRING_20 = fc.string({ maxLength: 20 })
const ID_PART = fc.stringMatching(/^[a-z0-9_-]{1,6}$/)
const JSON_VALUE = fc.jsonValue({ maxDepth: 3 })
const BYTES_64 = fc.uint8Array({ maxLength: 64 })
const BYTES_512 = fc.uint8Array({ maxLength: 512 })
const LINES = fc.array(fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.string()), { maxLength: 6 })
const bool = (g: Gen, trueOneIn = 2): boolean => int(g, 1, trueOneIn) === 1
const pick = <A>(g: Gen, items: ReadonlyArray<A>): A => items[int(g, 0, items.length - 1)]!

/** Strings that stress the canonical encoder: escapes, C0 controls, separators, astral characters, lone surrogates. */
export const TRICKY_STRINGS: ReadonlyArray<string> = [
  "",
  "hello",
  "\u0000",
  "\u001f\u007f",
  "\"\\/\b\f\n\r\t",
  "\u2028\u2029",
  "h\u00e9llo",
  "\ud83d\ude00",
  "\ud800",
  "a\udc00b",
  "\udbff\udfff",
  "\ud83d",
  "\ufeff",
  "__proto__",
  "constructor"
]

/** A text field: mostly short ordinary or full-Unicode strings, sometimes tricky ones (lone surrogates included). */
export const text = (g: Gen): string => {
  switch (int(g, 0, 5)) {
    case 0:
      return pick(g, TRICKY_STRINGS)
    case 1:
      return g(() => FULL_UNICODE)
    case 2:
      return pick(g, TRICKY_STRINGS) + g(() => SHORT_STRING) + pick(g, TRICKY_STRINGS)
    default:
      return g(() => STRING)
  }
}

/** A non-empty id part: mostly ASCII, sometimes with non-ASCII or a lone surrogate. */
const idPart = (g: Gen): string => {
  switch (int(g, 0, 9)) {
    case 0:
      return `\u00e9${int(g, 0, 9)}`
    case 1:
      // Astral characters only: a lone surrogate in an id is schema_invalid (see the schema_invalid generator).
      return pick(g, ["\ud83d\ude00", "\udbff\udfff", "\u{10000}"])
    default:
      return g(() => ID_PART)
  }
}

/** A strict-JSON value for args, results and evidence (no -0: it has no canonical text of its own). */
const json = (g: Gen): unknown => {
  return g(() => JSON_VALUE)
}

/** The ids of one run. */
export interface RunIds {
  readonly runId: string
  readonly sessionId: string
  readonly invocationId: string
  readonly turnId: string
}

/** A call as the generator tracks it while building a run. */
interface CallState {
  readonly callId: string
  readonly name: string
  readonly args: unknown
  dispatched: boolean
  responded: boolean
}

/** One run being built: its ids, events so far, calls, and a counter for fresh event ids. */
export interface RunDraft {
  readonly ids: RunIds
  readonly events: Array<RE.RuntimeEvent>
  readonly calls: Array<CallState>
  nextId: number
  terminated: boolean
  readonly toolBoundary: RE.ToolBoundary
}

/** An event of `draft`'s run with the next fresh id (or `id`), and the given body. */
export const eventOf = (
  draft: RunDraft,
  body: RE.EventBody,
  options: { readonly id?: string; readonly hidden?: boolean; readonly ids?: Partial<RunIds> } = {}
): RE.RuntimeEvent => {
  const ids = { ...draft.ids, ...options.ids }
  return new RE.RuntimeEvent({
    id: EventId.make(options.id ?? `${draft.ids.runId}#${draft.nextId++}`),
    sessionId: SessionId.make(ids.sessionId),
    invocationId: InvocationId.make(ids.invocationId),
    runId: RunId.make(ids.runId),
    turnId: TurnId.make(ids.turnId),
    ts: draft.nextId * 1000,
    ...(options.hidden === true ? { hidden: true as const } : {}),
    body
  })
}

const hash = (name: string, args: unknown): string => Either.getOrThrow(LedgerRules.argsHash(name, args))

const opener = (g: Gen, draft: RunDraft): RE.EventBody =>
  bool(g, 4)
    ? new RE.ContinuationStarted({
      toolBoundary: draft.toolBoundary,
      source: new RE.ContinuationSource({
        sessionId: SessionId.make(draft.ids.sessionId),
        invocationId: InvocationId.make(`${draft.ids.invocationId}-src`),
        runId: RunId.make(`${draft.ids.runId}-src`),
        turnId: TurnId.make(draft.ids.turnId),
        highWater: new RE.SourceHighWater({ seq: int(g, 0, 9), digest: Digest.genesis(draft.ids.runId) })
      }),
      claimId: text(g)
    })
    : new RE.RunOpened({ toolBoundary: draft.toolBoundary })

/** Starts a run: its ids (index `i` keeps run ids distinct) and its opener. */
export const startRun = (g: Gen, i: number): RunDraft => {
  const runId = `r${i}-${idPart(g)}`
  const draft: RunDraft = {
    ids: { runId, sessionId: `s-${idPart(g)}`, invocationId: `inv${i}-${idPart(g)}`, turnId: `t-${idPart(g)}` },
    events: [],
    calls: [],
    nextId: 1,
    terminated: false,
    toolBoundary: pick(g, ["none", "t1_after_preflight_v1"] as const)
  }
  draft.events.push(eventOf(draft, opener(g, draft)))
  return draft
}

/** A fresh call id of the draft's run. */
const freshCallId = (g: Gen, draft: RunDraft): string => `c${draft.calls.length}${bool(g, 6) ? idPart(g) : ""}`

/** One valid next event for a run that is not terminated (it never terminates the run). */
export const validStep = (g: Gen, draft: RunDraft): RE.RuntimeEvent => {
  const pendingDispatch = draft.calls.filter((c) => !c.dispatched && !c.responded)
  const pendingResponse = draft.calls.filter((c) => !c.responded)
  for (;;) {
    switch (int(g, 0, 9)) {
      case 0:
        return eventOf(draft, new RE.UserMessage({ text: text(g) }), { hidden: bool(g, 8) })
      case 1:
        return eventOf(draft, new RE.ModelText({ text: text(g) }), { hidden: bool(g, 8) })
      case 2:
      case 3: {
        const call: CallState = {
          callId: freshCallId(g, draft),
          name: pick(g, ["Bash", "Read", "Write", "h\u00e9", "\ud83d\ude00"]),
          args: json(g),
          dispatched: false,
          responded: false
        }
        draft.calls.push(call)
        return eventOf(draft, new RE.FunctionCall({ callId: CallId.make(call.callId), name: call.name, args: call.args }), {
          hidden: bool(g, 8)
        })
      }
      case 4:
      case 5: {
        if (pendingDispatch.length === 0) continue
        const call = pick(g, pendingDispatch)
        call.dispatched = true
        return eventOf(
          draft,
          new RE.ToolDispatched({
            callId: CallId.make(call.callId),
            operationId: deriveOperationId(draft.ids.invocationId, call.callId),
            argsHash: hash(call.name, call.args),
            ...(() => {
              const recoveryMode = pick(g, ["read_only", "idempotent", "reconcilable", "never_auto_retry"] as const)
              return recoveryMode === "idempotent" ? { recoveryMode, idempotencyKey: text(g) } : { recoveryMode }
            })(),
            ...(bool(g, 4) ? { evidence: json(g) } : {})
          })
        )
      }
      case 6:
      case 7: {
        if (pendingResponse.length === 0) continue
        const call = pick(g, pendingResponse)
        call.responded = true
        return eventOf(
          draft,
          new RE.FunctionResponse({
            callId: CallId.make(call.callId),
            name: call.name,
            result: json(g),
            isError: bool(g, 3),
            ...(call.dispatched && bool(g) ? { operationId: deriveOperationId(draft.ids.invocationId, call.callId) } : {})
          }),
          { hidden: bool(g, 8) }
        )
      }
      case 8:
        return eventOf(
          draft,
          bool(g)
            ? new RE.PermissionRequested({ requestId: text(g) })
            : new RE.PermissionResolved({ requestId: text(g), decision: pick(g, ["allow", "deny", "timed_out"] as const) })
        )
      default:
        return eventOf(draft, new RE.Diagnostic({ message: text(g), ...(bool(g) ? { code: text(g) } : {}) }))
    }
  }
}

const terminal = (g: Gen, draft: RunDraft): RE.RuntimeEvent =>
  eventOf(
    draft,
    new RE.RunTerminated({
      status: pick(g, ["completed", "failed", "cancelled"] as const),
      ...(bool(g) ? { failureClass: text(g) } : {}),
      ...(bool(g, 3) ? { abortSource: text(g) } : {})
    })
  )

/** Grows a draft by up to `max` valid events (at least `min`), then maybe terminates it. */
export const grow = (g: Gen, draft: RunDraft, min: number, max: number, mayTerminate: boolean): RunDraft => {
  const n = int(g, min, max)
  for (let i = 0; i < n; i++) draft.events.push(validStep(g, draft))
  if (mayTerminate && bool(g, 3)) {
    draft.events.push(terminal(g, draft))
    draft.terminated = true
  }
  return draft
}

/** One line of a JSONL ledger: a row of a run, or raw bytes (garbage, a cut line). */
export type LineSpec =
  | {
    readonly _tag: "Row"
    readonly runId: string
    readonly text: string
    /** Added to the seq this row would get (a gap), default 0. */
    readonly skipSeq?: number
    /** Replaces the stored digest (the chain goes on from the computed one). */
    readonly digest?: (computed: string) => string
    /** Rewrites the line's bytes (without its newline) after encoding. */
    readonly rewrite?: (line: string) => string
  }
  | { readonly _tag: "Raw"; readonly bytes: Uint8Array }

/** A group of one run's rows written by one append, or raw bytes. */
export type GroupSpec = ReadonlyArray<LineSpec>

/** A committed row as the builder wrote it. */
export interface BuiltRow {
  readonly runId: string
  readonly seq: number
  readonly end: number
  readonly digest: string
  readonly text: string
  /** 1-based physical line. */
  readonly line: number
}

/** JSONL bytes with what was written where. */
export interface BuiltLedger {
  readonly bytes: Uint8Array
  readonly rows: ReadonlyArray<BuiltRow>
  /** Byte offset and first line of each group. */
  readonly groups: ReadonlyArray<{ readonly offset: number; readonly line: number; readonly length: number }>
}

/** Encodes groups as JSONL: per-run seqs and digest chains, `end` per group, canonical lines unless rewritten. */
export const buildJsonl = (groups: ReadonlyArray<GroupSpec>): BuiltLedger => {
  const tails = new Map<string, { seq: number; digest: string }>()
  const parts: Array<Uint8Array> = []
  const rows: Array<BuiltRow> = []
  const starts: Array<{ offset: number; line: number; length: number }> = []
  let offset = 0
  let line = 1
  for (const group of groups) {
    const start = { offset, line, length: 0 }
    const first = group.find((l) => l._tag === "Row")
    let end = 0
    if (first !== undefined && first._tag === "Row") {
      let seq = (tails.get(first.runId)?.seq ?? 0)
      for (const l of group) if (l._tag === "Row") seq += 1 + (l.skipSeq ?? 0)
      end = seq
    }
    for (const l of group) {
      let bytes: Uint8Array
      if (l._tag === "Raw") {
        bytes = l.bytes
      } else {
        const tail = tails.get(l.runId) ?? { seq: 0, digest: Digest.genesis(l.runId) }
        const seq = tail.seq + 1 + (l.skipSeq ?? 0)
        const computed = Digest.next(tail.digest, seq, l.text)
        const stored = l.digest?.(computed) ?? computed
        tails.set(l.runId, { seq, digest: computed })
        let s = RE.jsonlLine(seq, end, stored, l.text)
        if (l.rewrite !== undefined) s = `${l.rewrite(s.slice(0, -1))}\n`
        bytes = Buffer.from(s, "utf8")
        rows.push({ runId: l.runId, seq, end, digest: stored, text: l.text, line })
      }
      for (const b of bytes) if (b === 10) line++
      parts.push(bytes)
      offset += bytes.length
    }
    start.length = offset - start.offset
    starts.push(start)
  }
  return { bytes: Buffer.concat(parts), rows, groups: starts }
}

const rowOf = (e: RE.RuntimeEvent): LineSpec => ({ _tag: "Row", runId: e.runId, text: Either.getOrThrow(RE.canonicalText(e)) })

/** Splits each run's events into groups of 1–3 rows and interleaves the runs; run 0's first group comes first. */
export const schedule = (g: Gen, runs: ReadonlyArray<ReadonlyArray<LineSpec>>): Array<GroupSpec> => {
  const queues = runs.map((lines) => {
    const groups: Array<Array<LineSpec>> = []
    let i = 0
    while (i < lines.length) {
      const n = int(g, 1, 3)
      groups.push(lines.slice(i, i + n) as Array<LineSpec>)
      i += n
    }
    return groups
  })
  const out: Array<GroupSpec> = []
  if (queues[0] !== undefined && queues[0].length > 0) out.push(queues[0].shift()!)
  for (;;) {
    const live = queues.filter((q) => q.length > 0)
    if (live.length === 0) return out
    out.push(pick(g, live).shift()!)
  }
}

/** A valid ledger: 1–3 runs, each 1–12 events, interleaved in groups. */
export interface ValidLedger {
  readonly _tag: "Valid"
  readonly runs: ReadonlyArray<RunDraft>
  readonly built: BuiltLedger
}

/** Generates a valid ledger. */
export const validLedger = (g: Gen, maxRuns = 3): ValidLedger => {
  const runs: Array<RunDraft> = []
  const n = int(g, 1, maxRuns)
  for (let i = 0; i < n; i++) runs.push(grow(g, startRun(g, i), 0, 10, true))
  const built = buildJsonl(schedule(g, runs.map((r) => r.events.map(rowOf))))
  return { _tag: "Valid", runs, built }
}

/** A valid ledger whose bytes were mutated: truncated, bit-flipped, lines reordered, duplicated, dropped, or garbage. */
export interface MutatedLedger {
  readonly _tag: "Mutated"
  readonly mutation: string
  readonly runIds: ReadonlyArray<string>
  readonly bytes: Uint8Array
}

const splitLines = (bytes: Uint8Array): Array<Uint8Array> => {
  const out: Array<Uint8Array> = []
  let start = 0
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i] === 10) {
      out.push(bytes.subarray(start, i + 1))
      start = i + 1
    }
  }
  if (start < bytes.length) out.push(bytes.subarray(start))
  return out
}

/** Applies one random mutation to valid ledger bytes. */
export const mutate = (g: Gen, bytes: Uint8Array): { readonly mutation: string; readonly bytes: Uint8Array } => {
  const lines = splitLines(bytes)
  const at = (max: number) => int(g, 0, Math.max(0, max))
  switch (int(g, 0, 9)) {
    case 0:
      return { mutation: "truncate", bytes: bytes.subarray(0, at(bytes.length - 1)) }
    case 1: {
      const copy = Buffer.from(bytes)
      const flips = int(g, 1, 4)
      for (let i = 0; i < flips && copy.length > 0; i++) copy[at(copy.length - 1)]! ^= 1 << int(g, 0, 7)
      return { mutation: "bit flips", bytes: copy }
    }
    case 2: {
      if (lines.length < 2) return { mutation: "truncate", bytes: bytes.subarray(0, at(bytes.length - 1)) }
      const i = at(lines.length - 1)
      return { mutation: "drop a line", bytes: Buffer.concat(lines.filter((_, j) => j !== i)) }
    }
    case 3: {
      const i = at(lines.length - 1)
      const j = at(lines.length)
      const copy = lines.slice()
      copy.splice(j, 0, lines[i]!)
      return { mutation: "duplicate a line", bytes: Buffer.concat(copy) }
    }
    case 4: {
      const copy = lines.slice()
      const i = at(copy.length - 1)
      const j = at(copy.length - 1)
      const t = copy[i]!
      copy[i] = copy[j]!
      copy[j] = t
      return { mutation: "swap two lines", bytes: Buffer.concat(copy) }
    }
    case 5: {
      const copy = lines.slice()
      const i = at(copy.length - 1)
      const [moved] = copy.splice(i, 1)
      copy.splice(at(copy.length), 0, moved!)
      return { mutation: "move a line", bytes: Buffer.concat(copy) }
    }
    case 6: {
      const junk = Buffer.from(g(() => BYTES_64))
      const i = at(bytes.length)
      return { mutation: "insert random bytes", bytes: Buffer.concat([bytes.subarray(0, i), junk, bytes.subarray(i)]) }
    }
    case 7: {
      // A lone surrogate written as raw (CESU-8) bytes: invalid UTF-8 where an escaped one stood, or anywhere.
      const s = Buffer.from(bytes).toString("latin1")
      const k = s.indexOf("\\ud")
      const raw = Buffer.from([0xed, 0xa0, 0x80])
      if (k >= 0) {
        return {
          mutation: "raw lone surrogate",
          bytes: Buffer.concat([bytes.subarray(0, k), raw, bytes.subarray(k + 6)])
        }
      }
      const i = at(bytes.length)
      return { mutation: "raw lone surrogate", bytes: Buffer.concat([bytes.subarray(0, i), raw, bytes.subarray(i)]) }
    }
    case 8: {
      const copy = lines.slice().reverse()
      return { mutation: "reverse lines", bytes: Buffer.concat(copy) }
    }
    default: {
      const n = int(g, 1, 512)
      return { mutation: "NUL tail", bytes: Buffer.concat([bytes.subarray(0, at(bytes.length)), Buffer.alloc(n)]) }
    }
  }
}

/** Generates a mutated ledger. */
export const mutatedLedger = (g: Gen): MutatedLedger => {
  const valid = validLedger(g)
  const m = mutate(g, valid.built.bytes)
  return { _tag: "Mutated", mutation: m.mutation, runIds: valid.runs.map((r) => r.ids.runId), bytes: m.bytes }
}

/** Random bytes, sometimes shaped like ledger lines. */
export const randomBytes = (g: Gen): MutatedLedger => {
  const bytes = bool(g)
    ? Buffer.from(g(() => BYTES_512))
    : Buffer.from(
      g(() => LINES)
        .map((v) => `${typeof v === "string" ? v : JSON.stringify(v) ?? "null"}\n`)
        .join("") +
        `{"digest":"sha256:${"0".repeat(64)}","end":1,"event":{"runId":"x"},"seq":1}\n`,
      "utf8"
    )
  return { _tag: "Mutated", mutation: "random bytes", runIds: ["x"], bytes }
}

/** One generated corruption: the ledger, the run to read, and what reading it must report. */
export interface ReasonLedger {
  readonly _tag: "Reason"
  readonly reason: CorruptionReason
  readonly variant: string
  readonly built: BuiltLedger
  readonly runIds: ReadonlyArray<string>
  /** The run whose read must fail with `reason`; file-level reasons fail every run. */
  readonly target: string
  readonly fileLevel: boolean
  readonly line: number
  readonly seq?: number
  /** The target run's rows up to the bad one, when `planResume` over them must fail with `reason` too. */
  readonly planRows?: ReadonlyArray<BuiltRow>
}

/**
 * Every corruption reason of docs/spec/01-ledger.md a ledger's events can show, from the domain's own closed list (`derived_mismatch`
 * is of SQLite's derived tables, not of events; test/DamagedLedger.test.ts covers it).
 */
export const REASONS: ReadonlyArray<CorruptionReason> = CorruptionReason.literals.filter((r) => r !== "derived_mismatch")

const callOf = (g: Gen, draft: RunDraft, state: { dispatched: boolean; responded: boolean }): CallState => {
  const call: CallState = { callId: freshCallId(g, draft), name: pick(g, ["Bash", "Read"]), args: json(g), ...state }
  draft.calls.push(call)
  draft.events.push(eventOf(draft, new RE.FunctionCall({ callId: CallId.make(call.callId), name: call.name, args: call.args })))
  if (state.dispatched) {
    draft.events.push(eventOf(
      draft,
      new RE.ToolDispatched({
        callId: CallId.make(call.callId),
        operationId: deriveOperationId(draft.ids.invocationId, call.callId),
        argsHash: hash(call.name, call.args),
        recoveryMode: "never_auto_retry"
      })
    ))
  }
  if (state.responded) {
    draft.events.push(eventOf(
      draft,
      new RE.FunctionResponse({ callId: CallId.make(call.callId), name: call.name, result: json(g), isError: false })
    ))
  }
  return call
}

const dispatchOf = (draft: RunDraft, callId: string, name: string, args: unknown, operationId?: string) =>
  eventOf(
    draft,
    new RE.ToolDispatched({
      callId: CallId.make(callId),
      operationId: (operationId ?? deriveOperationId(draft.ids.invocationId, callId)) as RE.ToolDispatched["operationId"],
      argsHash: hash(name, args),
      recoveryMode: "idempotent",
      idempotencyKey: "key"
    })
  )

const responseOf = (draft: RunDraft, callId: string, name: string, operationId?: string) =>
  eventOf(
    draft,
    new RE.FunctionResponse({
      callId: CallId.make(callId),
      name,
      result: null,
      isError: true,
      ...(operationId !== undefined ? { operationId: operationId as RE.ToolDispatched["operationId"] } : {})
    })
  )

/** Canonical text of a JSON value (the value must encode). */
const canon = (value: unknown): string => {
  const r = CanonicalJson.encode(value)
  if (r._tag === "Fail") throw new Error(r.failure.message)
  return r.text
}

/** The bad line of a rule corruption: the event, or raw text, plus line-level tweaks. */
interface Bad {
  readonly spec: LineSpec
  readonly variant: string
  /** Whether `planResume` over the decoded rows sees the same reason (false for store-wide rules). */
  readonly plan: boolean
}

const eventLine = (e: RE.RuntimeEvent, variant: string, plan = true): Bad => ({ spec: rowOf(e), variant, plan })
const textLine = (runId: string, text: string, variant: string): Bad => ({ spec: { _tag: "Row", runId, text }, variant, plan: false })

// Builds the bad line for a rule reason, growing the target draft with the setup it needs first.
const badFor = (g: Gen, reason: CorruptionReason, target: RunDraft, other: RunDraft | undefined): Bad => {
  const d = target
  switch (reason) {
    case "non_canonical": {
      const e = validStep(g, d)
      const rewrites: Array<[string, (s: string) => string]> = [
        ["space after brace", (s) => s.replace(`{"digest":`, `{ "digest":`)],
        ["keys reordered", (s) => {
          const v = JSON.parse(s) as { digest: string; end: number; seq: number }
          const ev = s.slice(s.indexOf(`"event":`) + 8, s.lastIndexOf(`,"seq":`))
          return `{"seq":${v.seq},"end":${v.end},"digest":"${v.digest}","event":${ev}}`
        }],
        ["end as a decimal", (s) => s.replace(/,"end":(\d+),/, `,"end":$1.0,`)],
        ["escaped ASCII in the digest", (s) => s.replace(`"digest":"sha256:`, `"digest":"\\u0073ha256:`)],
        ["space inside the event", (s) => s.replace(`"event":{"body":`, `"event":{"body" :`)],
        ["uppercase escape", (s) =>
          /(?<!\\)\\u(00[01][a-f]|d[0-9a-f]{3})/.test(s)
            ? s.replace(/(?<!\\)\\u(00[01][a-f]|d[0-9a-f]{3})/, (_m, h: string) => `\\u${h.toUpperCase()}`)
            : s.replace(`"event":{`, `"event": {`)]
      ]
      const [variant, rewrite] = pick(g, rewrites)
      return { spec: { ...(rowOf(e) as Extract<LineSpec, { _tag: "Row" }>), rewrite }, variant, plan: false }
    }
    case "schema_invalid": {
      const e = validStep(g, d)
      const v = JSON.parse(Either.getOrThrow(RE.canonicalText(e))) as Record<string, unknown> & { body: Record<string, unknown> }
      const variants: Array<[string, () => LineSpec]> = [
        ["unknown event key", () => ({ _tag: "Row", runId: d.ids.runId, text: canon({ ...v, extra: 1 }) })],
        ["negative ts", () => ({ _tag: "Row", runId: d.ids.runId, text: canon({ ...v, ts: -1 }) })],
        ["fractional ts", () => ({ _tag: "Row", runId: d.ids.runId, text: canon({ ...v, ts: 1.5 }) })],
        ["hidden false", () => ({ _tag: "Row", runId: d.ids.runId, text: canon({ ...v, hidden: false }) })],
        ["unknown tag", () => ({ _tag: "Row", runId: d.ids.runId, text: canon({ ...v, body: { ...v.body, _tag: "NoSuchTag" } }) })],
        ["empty id", () => ({ _tag: "Row", runId: d.ids.runId, text: canon({ ...v, id: "" }) })],
        ["lone surrogate in an id", () => ({ _tag: "Row", runId: d.ids.runId, text: canon({ ...v, id: `${v["id"]}${pick(g, ["\ud800", "\udfff"])}` }) })],
        ["lone surrogate in a tool name", () => ({
          _tag: "Row",
          runId: d.ids.runId,
          text: canon({ ...v, body: { _tag: "FunctionCall", args: null, callId: `lone-${d.nextId}`, name: `t${pick(g, ["\ud800", "\udc00"])}` } })
        })],
        ["unknown body key", () => ({ _tag: "Row", runId: d.ids.runId, text: canon({ ...v, body: { ...v.body, zzz: [] } }) })],
        ["nested beyond the limit", () => {
          const deep = "[".repeat(int(g, 256, 5000)) + "]".repeat(0)
          const call = canon({ ...v, body: { _tag: "FunctionCall", args: "__DEEP__", callId: "deep", name: "Bash" } })
          return { _tag: "Row", runId: d.ids.runId, text: call.replace(`"__DEEP__"`, deep + "]".repeat(deep.length)) }
        }],
        ["extra row key", () => ({ ...(rowOf(e) as Extract<LineSpec, { _tag: "Row" }>), rewrite: (s) => `${s.slice(0, -1)},"x":1}` })],
        ["uppercase digest", () => ({ ...(rowOf(e) as Extract<LineSpec, { _tag: "Row" }>), digest: (c) => c.toUpperCase().replace("SHA256:", "sha256:") })]
      ]
      const [variant, make] = pick(g, variants)
      return { spec: make(), variant, plan: false }
    }
    case "seq_gap": {
      const e = validStep(g, d)
      const skip = d.events.length >= 2 && bool(g, 3) ? -1 : int(g, 1, 3)
      return { spec: { ...(rowOf(e) as Extract<LineSpec, { _tag: "Row" }>), skipSeq: skip }, variant: skip < 0 ? "repeated seq" : "gap", plan: true }
    }
    case "digest_mismatch": {
      const e = validStep(g, d)
      if (bool(g)) {
        return {
          spec: {
            ...(rowOf(e) as Extract<LineSpec, { _tag: "Row" }>),
            digest: (c) => {
              const i = 7 + int(g, 0, 63)
              return c.slice(0, i) + (c[i] === "0" ? "1" : "0") + c.slice(i + 1)
            }
          },
          variant: "flipped digest",
          plan: true
        }
      }
      // The chain of an event, stored with another event's bytes.
      const other2 = eventOf(d, new RE.Diagnostic({ message: `${text(g)}!` }), { id: e.id })
      const spec = rowOf(e) as Extract<LineSpec, { _tag: "Row" }>
      const otherText = Either.getOrThrow(RE.canonicalText(other2))
      return {
        spec: { ...spec, rewrite: (s) => s.replace(spec.text, () => otherText) },
        variant: "bytes changed after hashing",
        plan: false
      }
    }
    case "identity_mismatch": {
      switch (int(g, 0, 2)) {
        case 0: {
          const field = pick(g, ["sessionId", "turnId", "invocationId"] as const)
          return eventLine(eventOf(d, new RE.UserMessage({ text: text(g) }), { ids: { [field]: `${d.ids[field]}x` } }), `another ${field}`)
        }
        case 1: {
          const call = callOf(g, d, { dispatched: false, responded: false })
          return eventLine(dispatchOf(d, call.callId, call.name, call.args, deriveOperationId(d.ids.invocationId, `${call.callId}x`)), "dispatch with a foreign operationId")
        }
        default: {
          const call = callOf(g, d, { dispatched: true, responded: false })
          return eventLine(responseOf(d, call.callId, call.name, deriveOperationId(`${d.ids.invocationId}x`, call.callId)), "response with a foreign operationId")
        }
      }
    }
    case "opener_invalid":
      return eventLine(eventOf(d, opener(g, d)), "a second opener")
    case "duplicate_event_id": {
      const pool = [...d.events, ...(other?.events.slice(0, 1) ?? [])]
      const victim = pick(g, pool)
      const crossRun = victim.runId !== d.ids.runId
      return eventLine(eventOf(d, new RE.ModelText({ text: text(g) }), { id: victim.id }), crossRun ? "id of another run" : "id of the same run", !crossRun)
    }
    case "duplicate_call": {
      const call = callOf(g, d, { dispatched: bool(g), responded: bool(g) })
      return eventLine(eventOf(d, new RE.FunctionCall({ callId: CallId.make(call.callId), name: pick(g, [call.name, "Other"]), args: json(g) })), "second call")
    }
    case "orphan_response": {
      const callId = `orphan-${idPart(g)}`
      return eventLine(responseOf(d, callId, "Bash"), "no call")
    }
    case "duplicate_response": {
      const call = callOf(g, d, { dispatched: bool(g), responded: true })
      return eventLine(responseOf(d, call.callId, call.name), "second response")
    }
    case "name_mismatch": {
      const call = callOf(g, d, { dispatched: bool(g), responded: false })
      return eventLine(responseOf(d, call.callId, `${call.name}2`), "other name")
    }
    case "event_after_terminal": {
      d.events.push(terminal(g, d))
      d.terminated = true
      const e = pick(g, [
        () => eventOf(d, new RE.UserMessage({ text: text(g) })),
        () => eventOf(d, new RE.Diagnostic({ message: text(g) })),
        () => terminal(g, d),
        () => eventOf(d, new RE.FunctionCall({ callId: CallId.make("late"), name: "Bash", args: 1 }))
      ])()
      return eventLine(e, `${e.body._tag} after the terminal`)
    }
    case "orphan_dispatch":
      return eventLine(dispatchOf(d, `ghost-${idPart(g)}`, "Bash", json(g)), "no call")
    case "duplicate_dispatch": {
      const call = callOf(g, d, { dispatched: true, responded: bool(g) })
      return eventLine(dispatchOf(d, call.callId, call.name, call.args), "second dispatch")
    }
    case "args_hash_mismatch": {
      const call = callOf(g, d, { dispatched: false, responded: false })
      return eventLine(dispatchOf(d, call.callId, `${call.name}!`, call.args), "hash of other args")
    }
    case "dispatch_order": {
      const call = callOf(g, d, { dispatched: false, responded: true })
      return eventLine(dispatchOf(d, call.callId, call.name, call.args), "dispatch after the response")
    }
    case "recovery_fact_invalid": {
      const operationId = deriveOperationId(d.ids.invocationId, "c0") as RE.ToolDispatched["operationId"]
      if (bool(g, 3)) {
        const call = callOf(g, d, { dispatched: true, responded: false })
        d.events.push(terminal(g, d))
        d.terminated = true
        return eventLine(responseOf(d, call.callId, call.name, deriveOperationId(d.ids.invocationId, call.callId)), "bound response after the terminal")
      }
      if (bool(g)) {
        return eventLine(
          eventOf(d, new RE.ReconcileObserved({ operationId, callId: "c0" as RE.FunctionCall["callId"], observation: "diverged", evidenceDigest: "sha256:" + "a".repeat(64) })),
          "ReconcileObserved"
        )
      }
      return eventLine(
        eventOf(
          d,
          new RE.RecoveryDecided({
            operationId,
            callId: "c0" as RE.FunctionCall["callId"],
            disposition: pick(g, ["completed", "parked"] as const),
            reasonCode: text(g),
            evidenceEventIds: [],
            provenance: new RE.RecoveryProvenance({ kind: "manual", actor: "x" + text(g) })
          })
        ),
        "RecoveryDecided"
      )
    }
    default:
      return textLine(d.ids.runId, "{}", "unused")
  }
}

const garbageLine = (g: Gen): { readonly bytes: Uint8Array; readonly variant: string } => {
  switch (int(g, 0, 4)) {
    case 0:
      return { bytes: Buffer.from("{not json\n"), variant: "not JSON" }
    case 1:
      return { bytes: Buffer.concat([Buffer.from([0xff]), Buffer.from(g(() => STRING_20).replace(/\n/g, "")), Buffer.from("\n")]), variant: "invalid UTF-8" }
    case 2:
      return { bytes: Buffer.from("\n"), variant: "an empty line" }
    case 3:
      return { bytes: Buffer.from(`{"seq":1,"end":1,"event":{"text":"\ud800"}\u0000}\n`.replace("\ud800", "x")), variant: "NUL inside" }
    default:
      return { bytes: Buffer.from(`{${g(() => STRING_20).replace(/\n/g, "")}{\n`), variant: "random, unbalanced" }
  }
}

/** Generates a ledger corrupt with exactly `reason`, which every read of the target run must report. */
export const reasonLedger = (reason: CorruptionReason) => (g: Gen): ReasonLedger => {
  const background: Array<RunDraft> = []
  const nBackground = int(g, reason === "duplicate_event_id" || reason === "identity_mismatch" ? 1 : 0, 2)
  for (let i = 0; i < nBackground; i++) background.push(grow(g, startRun(g, i + 1), 0, 6, true))

  if (reason === "torn_row" || reason === "invalid_json") {
    const runs = [...background, grow(g, startRun(g, 0), 0, 8, true)]
    const groups = schedule(g, runs.map((r) => r.events.map(rowOf)))
    const runIds = runs.map((r) => r.ids.runId)
    const valid = buildJsonl(groups)
    if (reason === "invalid_json") {
      // A complete garbage line between groups, with at least one complete group after it.
      const at = groups.length >= 2 ? int(g, 1, groups.length - 1) : 0
      const garbage = garbageLine(g)
      const withBad = [...groups.slice(0, at), [{ _tag: "Raw", bytes: garbage.bytes } as LineSpec], ...groups.slice(at)]
      const extra = groups.length >= 2 ? [] : [[rowOf(eventOf(runs[0]!, new RE.ModelText({ text: "after" })))]]
      const built = buildJsonl([...withBad, ...extra])
      return { _tag: "Reason", reason, variant: garbage.variant, built, runIds, target: pick(g, runIds), fileLevel: true, line: built.groups[at]!.line }
    }
    const last = valid.groups[valid.groups.length - 1]!
    const variant = int(g, 0, 3)
    let bytes: Uint8Array
    let name: string
    let line = last.line
    if (variant === 0) {
      bytes = valid.bytes.subarray(0, last.offset + int(g, 1, last.length - 1))
      name = "last group cut"
    } else {
      line = last.line + countNewlines(valid.bytes.subarray(last.offset))
      const tail = variant === 1
        ? Buffer.alloc(int(g, 1, 600))
        : variant === 2
        ? garbageLine(g).bytes
        : Buffer.from(`{"digest":"sha256:${"a".repeat(64)}","end":2,"event":`)
      bytes = Buffer.concat([valid.bytes, tail])
      name = ["", "NULs after the last group", "a complete garbage line at the end", "a partial row at the end"][variant]!
    }
    return {
      _tag: "Reason",
      reason,
      variant: name,
      built: { ...valid, bytes },
      runIds,
      target: pick(g, runIds),
      fileLevel: true,
      line
    }
  }

  const target = startRun(g, 0)
  if (reason === "identity_mismatch" && bool(g, 4) && background[0] !== undefined) {
    // Store-wide: this run's opener reuses the invocation of a run written before it.
    const shared: RunDraft = { ...target, ids: { ...target.ids, invocationId: background[0].ids.invocationId }, events: [] }
    shared.events.push(eventOf(shared, new RE.RunOpened({ toolBoundary: "none" })))
    const built = buildJsonl([
      ...schedule(g, background.map((r) => r.events.map(rowOf))),
      shared.events.map(rowOf)
    ])
    const row = built.rows[built.rows.length - 1]!
    return {
      _tag: "Reason",
      reason,
      variant: "invocation of an earlier run",
      built,
      runIds: [...background.map((r) => r.ids.runId), shared.ids.runId],
      target: shared.ids.runId,
      fileLevel: false,
      line: row.line,
      seq: row.seq
    }
  }
  let bad: Bad
  if (reason === "opener_invalid" && bool(g, 3)) {
    target.events.length = 0
    bad = eventLine(validStep(g, target), "first event is not an opener")
  } else {
    grow(g, target, 0, 6, false)
    bad = badFor(g, reason, target, background[0])
  }
  const targetLines: Array<LineSpec> = [...target.events.map(rowOf), bad.spec]
  // The bad line is its own group (so the scanner never sees a cut group); everything else is interleaved.
  const before = schedule(g, [...background.map((r) => r.events.map(rowOf)), targetLines.slice(0, -1)])
  const built = buildJsonl([...before, [bad.spec]])
  const badRow = built.rows[built.rows.length - 1]!
  const planRows = built.rows.filter((r) => r.runId === target.ids.runId)
  return {
    _tag: "Reason",
    reason,
    variant: bad.variant,
    built,
    runIds: [...background.map((r) => r.ids.runId), target.ids.runId],
    target: target.ids.runId,
    fileLevel: false,
    line: badRow.line,
    seq: badRow.seq,
    ...(bad.plan ? { planRows } : {})
  }
}

const countNewlines = (bytes: Uint8Array): number => {
  let n = 0
  for (const b of bytes) if (b === 10) n++
  return n
}

/** An event whose canonical text is over the 16 MiB limit (a large user message), as a one-run ledger. */
export const oversizedLedger = (g: Gen): ReasonLedger => {
  const d = startRun(g, 0)
  const big = eventOf(d, new RE.UserMessage({ text: "x".repeat(CanonicalJson.MAX_BYTES + int(g, 0, 64)) }))
  // The encoder refuses it, so the line is written by hand, with a valid chain.
  const bigText = JSON.stringify({ body: { _tag: "UserMessage", text: (big.body as RE.UserMessage).text }, id: big.id, invocationId: big.invocationId, runId: big.runId, sessionId: big.sessionId, ts: big.ts, turnId: big.turnId })
  const built = buildJsonl([d.events.map(rowOf), [{ _tag: "Row", runId: d.ids.runId, text: bigText }]])
  const row = built.rows[1]!
  return { _tag: "Reason", reason: "schema_invalid", variant: "over 16 MiB", built, runIds: [d.ids.runId], target: d.ids.runId, fileLevel: false, line: row.line, seq: row.seq }
}

/** Any ledger case the JSONL reader and import fuzz over. */
export type LedgerCase = ValidLedger | MutatedLedger | ReasonLedger

/** Run ids a case names (to read each of them). */
export const runIdsOf = (c: LedgerCase): ReadonlyArray<string> =>
  c._tag === "Valid" ? c.runs.map((r) => r.ids.runId) : c.runIds

/** Bytes of a case. */
export const bytesOf = (c: LedgerCase): Uint8Array => c._tag === "Mutated" ? c.bytes : c.built.bytes

/** The ledger cases: valid, mutated, random bytes, and each corruption reason (oversized events sparingly). */
export const ledgerCase = (options: { readonly oversized: boolean }): fc.Arbitrary<LedgerCase> =>
  fc.oneof(
    { arbitrary: fc.gen().map((g): LedgerCase => validLedger(g)), weight: 120 },
    { arbitrary: fc.gen().map((g): LedgerCase => mutatedLedger(g)), weight: 160 },
    { arbitrary: fc.gen().map((g): LedgerCase => randomBytes(g)), weight: 40 },
    ...REASONS.map((reason) => ({ arbitrary: fc.gen().map((g): LedgerCase => reasonLedger(reason)(g)), weight: 20 })),
    // About one case in 700: each costs a 16 MiB file written and read twice.
    ...(options.oversized ? [{ arbitrary: fc.gen().map((g): LedgerCase => oversizedLedger(g)), weight: 1 }] : [])
  )

/** A stored event text for the decoder: canonical, mutated, random, deep, or oversized. */
export interface DecoderCase {
  readonly kind: string
  readonly text: string
  /** Whether the text is the canonical text of a valid event (it must decode and round-trip). */
  readonly valid: boolean
}

const deepText = (g: Gen): string => {
  const n = int(g, 250, 20_000)
  return `{"body":{"_tag":"FunctionCall","args":${"[".repeat(n)}${"]".repeat(n)},"callId":"c","name":"n"},"id":"e","invocationId":"i","runId":"r","sessionId":"s","ts":0,"turnId":"t"}`
}

// Objects without a string form (`toString`/`valueOf` shadowed by data, as JSON can spell them) put in place of a
// field of a valid event: `String(value)` throws on them, and a decoder that calls it must still answer with a refusal.
const HOSTILE = ['{"toString":0}', '{"valueOf":{},"toString":{}}', '{"toString":null,"valueOf":null}', '{"__proto__":{"toString":1}}']
const hostileObject = (g: Gen): DecoderCase => {
  const d = grow(g, startRun(g, 0), 0, 6, true)
  const value = JSON.parse(Either.getOrThrow(RE.canonicalText(pick(g, d.events)))) as Record<string, unknown>
  const body = value.body as Record<string, unknown>
  const target = int(g, 0, 1) === 0 ? value : body
  const keys = Object.keys(target)
  const key = pick(g, keys)
  const hostile = pick(g, HOSTILE)
  target[key] = JSON.parse(hostile)
  // The text keeps the hostile object's own keys (JSON.stringify would drop a parsed `__proto__` key's meaning).
  const text = JSON.stringify(value).replace(JSON.stringify(target[key]), () => hostile)
  return { kind: `hostile object as ${target === body ? "body." : ""}${key}`, text, valid: false }
}

/** The decoder's inputs. */
export const decoderCase = (options: { readonly oversized: boolean }): fc.Arbitrary<DecoderCase> =>
  fc.oneof(
    {
      arbitrary: fc.gen().map((g): DecoderCase => {
        const d = grow(g, startRun(g, 0), 0, 6, true)
        return { kind: "canonical event", text: Either.getOrThrow(RE.canonicalText(pick(g, d.events))), valid: true }
      }),
      weight: 5
    },
    {
      arbitrary: fc.gen().map((g): DecoderCase => {
        const d = grow(g, startRun(g, 0), 0, 6, true)
        const t = Buffer.from(Either.getOrThrow(RE.canonicalText(pick(g, d.events))), "utf8")
        const m = mutate(g, t)
        const s = CanonicalJson.decodeUtf8(m.bytes) ?? Buffer.from(m.bytes).toString("utf8")
        return { kind: `event: ${m.mutation}`, text: s, valid: false }
      }),
      weight: 5
    },
    { arbitrary: fc.string({ unit: "binary", maxLength: 64 }).map((text): DecoderCase => ({ kind: "random string", text, valid: false })), weight: 2 },
    { arbitrary: fc.json({ maxDepth: 4 }).map((text): DecoderCase => ({ kind: "random JSON", text, valid: false })), weight: 2 },
    { arbitrary: fc.gen().map((g): DecoderCase => ({ kind: "nested beyond the limit", text: deepText(g), valid: false })), weight: 1 },
    { arbitrary: fc.gen().map(hostileObject), weight: 2 },
    {
      arbitrary: fc.gen().map((g): DecoderCase => {
        const t = Either.getOrThrow(RE.canonicalText(eventOf(startRun(g, 0), new RE.UserMessage({ text: pick(g, ["\ud800", "a\udfff", "\udbff\udc00"]) }))))
        return { kind: "lone surrogate, raw in the text", text: t.replace(/\\ud[0-9a-f]{3}/, (m) => String.fromCharCode(parseInt(m.slice(2), 16))), valid: false }
      }),
      weight: 1
    },
    ...(options.oversized
      ? [{
        arbitrary: fc.constant<DecoderCase>({ kind: "over 16 MiB", text: `{"body":{"_tag":"UserMessage","text":"${"y".repeat(CanonicalJson.MAX_BYTES)}"},"id":"e","invocationId":"i","runId":"r","sessionId":"s","ts":0,"turnId":"t"}`, valid: false }),
        weight: 1
      }]
      : [])
  )

/** Rows for `planResume`: valid runs, each rule reason, and row-level mutations. */
export interface PlanCase {
  readonly kind: string
  readonly runId: string
  /** Stored texts with their seq and digest, decoded by the test into committed rows. */
  readonly rows: ReadonlyArray<{ readonly seq: number; readonly digest: string; readonly text: string }>
  readonly reason?: CorruptionReason
  readonly seq?: number
  readonly expectedHighWater?: { readonly seq: number; readonly digest?: string }
}

const RULE_REASONS = REASONS.filter((r) =>
  r !== "torn_row" && r !== "invalid_json" && r !== "non_canonical" && r !== "schema_invalid"
)

/** The planner's inputs. */
export const planCase: fc.Arbitrary<PlanCase> = fc.oneof(
  {
    arbitrary: fc.gen().map((g): PlanCase => {
      const v = validLedger(g, 1)
      const runId = v.runs[0]!.ids.runId
      const rows = v.built.rows
      const last = rows[rows.length - 1]!
      const expect = int(g, 0, 3)
      return {
        kind: "valid run",
        runId,
        rows,
        ...(expect === 1 ? { expectedHighWater: { seq: last.seq, digest: last.digest } } : {}),
        ...(expect === 2 ? { expectedHighWater: { seq: int(g, 0, last.seq + 1) } } : {})
      }
    }),
    weight: 6
  },
  {
    arbitrary: fc.gen().map((g): PlanCase => {
      const v = validLedger(g, 1)
      const rows = v.built.rows.slice()
      const i = int(g, 0, rows.length - 1)
      const j = int(g, 0, rows.length - 1)
      const r = rows[i]!
      const kinds: Array<[string, () => void]> = [
        ["drop a row", () => rows.splice(i, 1)],
        ["duplicate a row", () => rows.splice(j, 0, r)],
        ["swap rows", () => { rows[i] = rows[j]!; rows[j] = r }],
        ["seq changed", () => { rows[i] = { ...r, seq: int(g, 0, 20) } }],
        ["digest changed", () => { rows[i] = { ...r, digest: Digest.ofText(r.text) } }]
      ]
      const [kind, apply] = pick(g, kinds)
      apply()
      return { kind, runId: v.runs[0]!.ids.runId, rows }
    }),
    weight: 4
  },
  ...RULE_REASONS.map((reason) => ({
    arbitrary: fc.gen().map((g): PlanCase => {
      for (;;) {
        const c = reasonLedger(reason)(g)
        if (c.planRows !== undefined) return { kind: `${reason}: ${c.variant}`, runId: c.target, rows: c.planRows, reason, ...(c.seq !== undefined ? { seq: c.seq } : {}) }
      }
    }),
    weight: 1
  }))
)
