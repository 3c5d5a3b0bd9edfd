// The benchmark run's events: a realistic mix (user messages, model texts, a tool call and its response
// in every ten events) of about 300 canonical bytes each, built fast and deterministically, one seq after another.
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import * as CanonicalJson from "../../src/Domain/CanonicalJson.js"
import { CallId, EventId, InvocationId, RunId, SessionId, TurnId } from "../../src/Domain/Ids.js"
import {
  canonicalText,
  FunctionCall,
  FunctionResponse,
  ModelText,
  rememberCanonicalText,
  RunOpened,
  RuntimeEvent,
  UserMessage
} from "../../src/Domain/RuntimeEvent.js"
import type { EventBody } from "../../src/Domain/RuntimeEvent.js"

/** The id of the one run every benchmark ledger holds. */
export const RUN_ID = RunId.make("bench-run")

const IDS = {
  sessionId: SessionId.make("sess-bench-run"),
  invocationId: InvocationId.make("inv-bench-run"),
  runId: RUN_ID,
  turnId: TurnId.make("turn-bench-run")
}

/** The fixed `ts` of every benchmark event (events carry the caller's ts; the store never reads a clock for them). */
export const TS = 1_700_000_000_000

/** Canonical size the appended `UserMessage` aims at, in bytes. */
export const TARGET_BYTES = 300

const FILLER = "The quick brown fox jumps over the lazy dog while the agent reads the repository and plans its next step. "

// A deterministic text of exactly `length` characters (ASCII, so bytes = characters).
const textOf = (seq: number, length: number): string => {
  const head = `#${seq} `
  let out = head
  while (out.length < length) out += FILLER
  return out.slice(0, Math.max(head.length, length))
}

// The envelope's canonical bytes without the body text, so a text length can be chosen for a target size.
const ENVELOPE_BYTES = (seq: number) =>
  `{"body":{"_tag":"UserMessage","text":""},"id":"${RUN_ID}:${seq}","invocationId":"${IDS.invocationId}","runId":"${RUN_ID}","sessionId":"${IDS.sessionId}","ts":${TS},"turnId":"${IDS.turnId}"}`
    .length

/** One generated event, with its canonical text (what the chain hashes and the store writes; computed when first read). */
export interface WorkloadEvent {
  readonly event: RuntimeEvent
  readonly text: string
}

// Builds the event without validation (the fields are well-formed by construction); its canonical text comes
// from the wire shape when first asked for. `remember` attaches that text to the event, as a store reader does.
const build = (seq: number, body: EventBody, wireBody: Record<string, unknown>, remember: boolean): WorkloadEvent => {
  const id = `${RUN_ID}:${seq}`
  const event = new RuntimeEvent({ id: EventId.make(id, true), ...IDS, ts: TS, body }, true)
  let text: string | undefined
  const w: WorkloadEvent = {
    event,
    get text() {
      if (text === undefined) {
        const encoded = CanonicalJson.encode({ id, ...IDS, ts: TS, body: wireBody })
        if (encoded._tag === "Fail") throw new Error(`benchmark event ${id} has no canonical encoding: ${encoded.failure.message}`)
        text = encoded.text
      }
      return text
    }
  }
  if (remember) rememberCanonicalText(event, w.text)
  return w
}

const encodeEvent = Schema.encodeSync(RuntimeEvent)

/**
 * Checks that a generated event's text is exactly what the library's own encoder produces for it
 * (Schema encode, then canonical encoding), so prefilled ledgers hold what the store would write.
 */
export const assertCanonical = (w: WorkloadEvent): void => {
  const expected = CanonicalJson.encode(encodeEvent(w.event))
  if (expected._tag === "Fail" || expected.text !== w.text) {
    throw new Error(`benchmark event ${w.event.id}: generated text differs from the library's canonical encoding`)
  }
  const cached = canonicalText(w.event)
  if (Either.isLeft(cached) || cached.right !== w.text) {
    throw new Error(`benchmark event ${w.event.id}: canonicalText disagrees with the generated text`)
  }
}

/**
 * A stateful generator of the benchmark run, seq after seq. `mix()` continues the realistic mix (an
 * opener first; then in every ten events eight messages, a call and its response); `userMessage()` is the
 * ~300 B event the append benchmark times. The two can interleave: a pending call is answered later.
 */
export class Workload {
  /** The seq the next event gets. */
  seq = 1
  private pattern = 0
  private pendingCall: string | undefined = undefined

  /** `remember`: attach each event's canonical text to it (rows as a store reader yields them). */
  constructor(readonly remember: boolean) {}

  /** The next event of the realistic mix. */
  mix(): WorkloadEvent {
    const seq = this.seq++
    if (seq === 1) {
      return build(seq, new RunOpened({ toolBoundary: "none" }, true), { _tag: "RunOpened", toolBoundary: "none" }, this.remember)
    }
    const p = this.pattern++
    if (this.pendingCall !== undefined) {
      const callId = this.pendingCall
      this.pendingCall = undefined
      const result = { exitCode: 0, stdout: textOf(seq, 120 + (seq % 7) * 10) }
      return build(
        seq,
        new FunctionResponse({ callId: CallId.make(callId, true), name: "Bash", result, isError: false }, true),
        { _tag: "FunctionResponse", callId, name: "Bash", result, isError: false },
        this.remember
      )
    }
    if (p % 10 === 8) {
      const callId = `call-${seq}`
      this.pendingCall = callId
      const args = { command: `grep -rn pattern src/module-${seq % 1000}`, cwd: "/workspace/project", timeoutMs: 30000 }
      return build(
        seq,
        new FunctionCall({ callId: CallId.make(callId, true), name: "Bash", args }, true),
        { _tag: "FunctionCall", callId, name: "Bash", args },
        this.remember
      )
    }
    if (p % 10 === 0) return this.user(seq, 100 + (seq % 5) * 20)
    const text = textOf(seq, 90 + (seq % 9) * 12)
    return build(seq, new ModelText({ text }, true), { _tag: "ModelText", text }, this.remember)
  }

  /** The next event as a `UserMessage` of about `TARGET_BYTES` canonical bytes. */
  userMessage(): WorkloadEvent {
    const seq = this.seq++
    return this.user(seq, TARGET_BYTES - ENVELOPE_BYTES(seq))
  }

  private user(seq: number, length: number): WorkloadEvent {
    const text = textOf(seq, length)
    return build(seq, new UserMessage({ text }, true), { _tag: "UserMessage", text }, this.remember)
  }

  /** The next `n` events of the mix. */
  take(n: number): Array<WorkloadEvent> {
    const out: Array<WorkloadEvent> = []
    for (let i = 0; i < n; i++) out.push(this.mix())
    return out
  }
}
