// FastCheck generators of valid tool ledgers (docs/spec/03-tool-boundary.md) under both protocols, committed with the normative chain.
// Each ledger carries the facts it was built from (per call: seqs, dispatch, response), so tests can inject faults.
import { Either, FastCheck } from "effect"
import * as Digest from "../../src/Domain/Digest.js"
import { EventId } from "../../src/Domain/Ids.js"
import { canonicalText, CommittedRow, RuntimeEvent } from "../../src/Domain/RuntimeEvent.js"
import type { TerminalStatus, ToolBoundary } from "../../src/Domain/RuntimeEvent.js"
import * as EventBuilder from "../../src/Domain/Rules/EventBuilder.js"

/** Commits events as a store would: dense seqs and the normative chain (no validation). */
export const commit = (runId: string, events: ReadonlyArray<RuntimeEvent>): Array<CommittedRow> => {
  let d = Digest.genesis(runId)
  return events.map((event, i) => {
    d = Digest.next(d, i + 1, Either.getOrThrow(canonicalText(event)))
    return new CommittedRow({ seq: i + 1, end: i + 1, digest: d, event }, true)
  })
}

/** The same event under another id (for injected events, whose builder ids would collide). */
export const withId = (event: RuntimeEvent, id: string): RuntimeEvent =>
  new RuntimeEvent({ ...event, id: EventId.make(id) }, true)

/** The facts a generated ledger holds for one call; indices are 0-based positions in `events` (seq = index + 1). */
export interface CallFacts {
  readonly callId: string
  readonly name: string
  readonly args: unknown
  readonly hidden: boolean
  readonly callIndex: number
  dispatchIndex?: number
  responseIndex?: number
  isError?: boolean
  /** Whether its response carries the operationId (a T2 response). */
  bound?: boolean
}

/** A valid generated tool ledger: its events, committed rows, and the facts per call in order of first appearance. */
export interface ToolLedger {
  readonly runId: string
  readonly builder: EventBuilder.EventBuilder
  readonly protocol: ToolBoundary
  readonly events: ReadonlyArray<RuntimeEvent>
  readonly rows: ReadonlyArray<CommittedRow>
  readonly calls: ReadonlyArray<CallFacts>
  /** Index of the `RunTerminated` event, when the ledger has one (always the last event). */
  readonly terminalIndex: number | undefined
}

/** What a generated ledger must contain at least once (added before the terminal when the random steps lack it). */
export type Need = "call" | "dispatched" | "answered" | "answeredUndispatched" | "boundResponse" | "unanswered"

/** Options of `arbToolLedger`. */
export interface ArbOptions {
  /** One protocol only; both when absent. */
  readonly protocol?: ToolBoundary
  readonly needs?: ReadonlyArray<Need>
  readonly maxSteps?: number
}

type Step =
  | { readonly k: "user"; readonly text: string; readonly hidden: boolean }
  | { readonly k: "model"; readonly text: string }
  | { readonly k: "diag" }
  | { readonly k: "call"; readonly name: number; readonly args: unknown; readonly hidden: boolean }
  | { readonly k: "dispatch"; readonly pick: number }
  | { readonly k: "respond"; readonly pick: number; readonly isError: boolean; readonly hidden: boolean }

const NAMES = ["Bash", "Read", "Write"] as const

const arbArgs: FastCheck.Arbitrary<unknown> = FastCheck.oneof(
  FastCheck.record({ q: FastCheck.integer({ min: -5, max: 5 }) }),
  FastCheck.record({ path: FastCheck.string({ maxLength: 6 }), lines: FastCheck.array(FastCheck.nat(9), { maxLength: 3 }) }),
  FastCheck.constant(null),
  FastCheck.string({ maxLength: 4 })
)

const arbStep: FastCheck.Arbitrary<Step> = FastCheck.oneof(
  { arbitrary: FastCheck.record({ k: FastCheck.constant("user" as const), text: FastCheck.string({ maxLength: 6 }), hidden: FastCheck.boolean() }), weight: 2 },
  { arbitrary: FastCheck.record({ k: FastCheck.constant("model" as const), text: FastCheck.string({ maxLength: 6 }) }), weight: 2 },
  { arbitrary: FastCheck.record({ k: FastCheck.constant("diag" as const) }), weight: 1 },
  {
    arbitrary: FastCheck.record({
      k: FastCheck.constant("call" as const),
      name: FastCheck.nat(NAMES.length - 1),
      args: arbArgs,
      hidden: FastCheck.boolean()
    }),
    weight: 4
  },
  { arbitrary: FastCheck.record({ k: FastCheck.constant("dispatch" as const), pick: FastCheck.nat(16) }), weight: 3 },
  {
    arbitrary: FastCheck.record({
      k: FastCheck.constant("respond" as const),
      pick: FastCheck.nat(16),
      isError: FastCheck.boolean(),
      hidden: FastCheck.boolean()
    }),
    weight: 3
  }
)

const arbTerminal: FastCheck.Arbitrary<TerminalStatus | undefined> = FastCheck.oneof(
  { arbitrary: FastCheck.constant(undefined), weight: 2 },
  { arbitrary: FastCheck.constantFrom<TerminalStatus>("completed", "failed", "cancelled"), weight: 1 }
)

/**
 * Builds a valid ledger from steps. Under `t1_after_preflight_v1`, dispatch steps write T1 (`ToolDispatched`)
 * for an open call, a response to a dispatched call is T2 (operation-bound), and a response to an undispatched
 * call is a preflight refusal (unbound, `isError`). Under `none` there are no dispatches and responses are unbound.
 */
export const build = (
  protocol: ToolBoundary,
  steps: ReadonlyArray<Step>,
  terminal: TerminalStatus | undefined,
  needs: ReadonlyArray<Need> = []
): ToolLedger => {
  const runId = protocol === "t1_after_preflight_v1" ? "run-t1" : "run-legacy"
  const b = EventBuilder.make(runId)
  const t1 = protocol === "t1_after_preflight_v1"
  const events: Array<RuntimeEvent> = [b.opened(protocol)]
  const calls: Array<CallFacts> = []
  const addCall = (name: string, args: unknown, hidden: boolean): CallFacts => {
    const facts: CallFacts = { callId: `c${calls.length}`, name, args, hidden, callIndex: events.length }
    calls.push(facts)
    events.push(b.call(facts.callId, name, args, hidden ? { hidden: true } : undefined))
    return facts
  }
  const dispatch = (c: CallFacts) => {
    c.dispatchIndex = events.length
    events.push(b.dispatched(c.callId, c.name, c.args))
  }
  const respond = (c: CallFacts, isError: boolean, hidden: boolean) => {
    const bound = c.dispatchIndex !== undefined
    c.responseIndex = events.length
    c.isError = bound || !t1 ? isError : true
    c.bound = bound
    events.push(b.response(c.callId, c.name, { ok: !c.isError, n: events.length }, {
      isError: c.isError,
      ...(bound ? { operationBound: true } : {}),
      ...(hidden ? { hidden: true as const } : {})
    }))
  }
  const pick = <A>(xs: ReadonlyArray<A>, n: number): A | undefined => xs.length === 0 ? undefined : xs[n % xs.length]
  for (const s of steps) {
    switch (s.k) {
      case "user":
        events.push(s.hidden ? b.custom(b.user(s.text).body, { hidden: true }) : b.user(s.text))
        break
      case "model":
        events.push(b.model(s.text))
        break
      case "diag":
        events.push(b.diagnostic("note"))
        break
      case "call":
        addCall(NAMES[s.name]!, s.args, s.hidden)
        break
      case "dispatch": {
        if (!t1) break
        const c = pick(calls.filter((c) => c.dispatchIndex === undefined && c.responseIndex === undefined), s.pick)
        if (c !== undefined) dispatch(c)
        break
      }
      case "respond": {
        const c = pick(calls.filter((c) => c.responseIndex === undefined), s.pick)
        if (c !== undefined) respond(c, s.isError, s.hidden)
        break
      }
    }
  }
  for (const need of needs) {
    switch (need) {
      case "call":
        if (calls.length === 0) addCall("Bash", { need }, false)
        break
      case "dispatched":
        if (t1 && !calls.some((c) => c.dispatchIndex !== undefined)) dispatch(addCall("Write", { need }, false))
        break
      case "answered":
        if (!calls.some((c) => c.responseIndex !== undefined)) respond(addCall("Read", { need }, false), false, false)
        break
      case "answeredUndispatched":
        if (!calls.some((c) => c.responseIndex !== undefined && c.dispatchIndex === undefined)) {
          respond(addCall("Read", { need }, false), true, false)
        }
        break
      case "boundResponse":
        if (t1 && !calls.some((c) => c.bound === true)) {
          const c = addCall("Write", { need }, false)
          dispatch(c)
          respond(c, false, false)
        }
        break
      case "unanswered":
        if (!calls.some((c) => c.responseIndex === undefined)) addCall("Bash", { need }, false)
        break
    }
  }
  let terminalIndex: number | undefined
  if (terminal !== undefined) {
    terminalIndex = events.length
    events.push(b.terminated(terminal))
  }
  return { runId, builder: b, protocol, events, rows: commit(runId, events), calls, terminalIndex }
}

/** An arbitrary valid tool ledger (both protocols unless one is given), with at least what `needs` asks for. */
export const arbToolLedger = (options: ArbOptions = {}): FastCheck.Arbitrary<ToolLedger> =>
  FastCheck.tuple(
    options.protocol !== undefined
      ? FastCheck.constant(options.protocol)
      : FastCheck.constantFrom<ToolBoundary>("none", "t1_after_preflight_v1"),
    FastCheck.array(arbStep, { maxLength: options.maxSteps ?? 30 }),
    arbTerminal
  ).map(([protocol, steps, terminal]) => build(protocol, steps, terminal, options.needs))

/**
 * Inserts `event` before position `index` of the ledger's events (1 ≤ index ≤ the terminal's index or the
 * length, so it never lands before the opener nor after the terminal) and commits the result.
 */
export const insertAt = (ledger: ToolLedger, index: number, event: RuntimeEvent): Array<CommittedRow> => {
  const events = [...ledger.events]
  events.splice(index, 0, event)
  return commit(ledger.runId, events)
}

/** Replaces the event at `index` and commits the result. */
export const replaceAt = (ledger: ToolLedger, index: number, event: RuntimeEvent): Array<CommittedRow> => {
  const events = [...ledger.events]
  events[index] = event
  return commit(ledger.runId, events)
}

/** A position in [lo, hi] chosen by `n` (hi clamped to where an insertion stays before the terminal). */
export const positionIn = (ledger: ToolLedger, lo: number, hi: number, n: number): number => {
  const top = Math.min(hi, ledger.terminalIndex ?? ledger.events.length)
  return lo + (n % (top - lo + 1))
}
