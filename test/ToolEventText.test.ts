// The canonical text the tool runtime writes straight from T1's dispatch and T2's response (Domain/internal/toolEventText)
// is the text the encoder gives the same event, and anything the encoder would refuse or doubt is left to it.
import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import { CallId, EventId, InvocationId, OperationId, RunId, SessionId, TurnId } from "../src/Domain/Ids.js"
import { rememberToolEventText } from "../src/Domain/internal/toolEventText.js"
import * as RE from "../src/Domain/RuntimeEvent.js"

const OP = OperationId.make("op_0123456789abcdef0123456789abcdef", true)
const DIGEST = `sha256:${"ab".repeat(32)}`

const envelope = (body: RE.RuntimeEvent["body"], extra: { readonly hidden?: true; readonly ts?: number; readonly id?: string } = {}) =>
  RE.unsafeMake(RE.RuntimeEvent, {
    id: EventId.make(extra.id ?? `${OP}:x`, true),
    sessionId: SessionId.make("sess \"quoted\" ü", true),
    invocationId: InvocationId.make("inv-1", true),
    runId: RunId.make("run-1", true),
    turnId: TurnId.make("turn-1", true),
    ts: extra.ts ?? 1_700_000_000_123,
    ...(extra.hidden === true ? { hidden: true as const } : {}),
    body
  } as RE.RuntimeEvent)

const dispatch = (props: Partial<RE.ToolDispatched> = {}) =>
  RE.unsafeMake(RE.ToolDispatched, {
    callId: CallId.make("call-1", true),
    operationId: OP,
    argsHash: DIGEST,
    recoveryMode: "idempotent",
    idempotencyKey: OP,
    ...props,
    _tag: "ToolDispatched"
  } as RE.ToolDispatched)

const response = (result: unknown, props: Partial<RE.FunctionResponse> = {}) =>
  RE.unsafeMake(RE.FunctionResponse, {
    callId: CallId.make("call-1", true),
    name: "Noop",
    result,
    isError: false,
    operationId: OP,
    idempotencyKey: OP,
    ...props,
    _tag: "FunctionResponse"
  } as RE.FunctionResponse)

// The encoder's text of an equal event that carries no remembered text.
const encoded = (event: RE.RuntimeEvent) => {
  const copy = new RE.RuntimeEvent({ ...event }, true)
  return RE.canonicalText(copy)
}

describe("rememberToolEventText", () => {
  it("writes the encoder's text for every dispatch and response shape the tool runtime builds", () => {
    const events = [
      envelope(dispatch()),
      envelope(dispatch(), { hidden: true }),
      envelope(RE.unsafeMake(RE.ToolDispatched, { callId: CallId.make("c\u00e9", true), operationId: OP, argsHash: DIGEST, recoveryMode: "never_auto_retry", _tag: "ToolDispatched" } as RE.ToolDispatched)),
      envelope(response({ ok: true, list: [1, 2.5, "x\ny", null], nested: { b: 1, a: 2 } })),
      envelope(response({ error: "Boom", message: "it \"failed\"" }, { isError: true }), { hidden: true, ts: 0 }),
      envelope(RE.unsafeMake(RE.FunctionResponse, { callId: CallId.make("call-1", true), name: "Noop", result: "plain", isError: false, operationId: OP, _tag: "FunctionResponse" } as RE.FunctionResponse))
    ]
    for (const event of events) {
      rememberToolEventText(event)
      const remembered = RE.carriedCanonicalText(event)
      assert.isDefined(remembered)
      const expected = encoded(event)
      assert.isTrue(Either.isRight(expected))
      assert.strictEqual(remembered, Either.getOrThrow(expected))
    }
  })

  it("leaves to the encoder whatever it would refuse or doubt", () => {
    // Results: a text only where the encoder gives one, and then the same.
    for (const result of [{ bad: "\ud800" }, { n: Number.NaN }, undefined, { big: 2n }, { d: new Date(0) }, [1, , 3], { "\u00e9": 1, e: 2 }]) {
      const event = envelope(response(result))
      rememberToolEventText(event)
      const expected = encoded(event)
      assert.strictEqual(RE.carriedCanonicalText(event), Either.isRight(expected) ? expected.right : undefined)
    }
    const doubtful = [
      envelope(dispatch({ recoveryMode: "sometimes" as never })),
      envelope(dispatch({ argsHash: "sha256:short" })),
      envelope(dispatch({ evidence: { path: "/x" } })), // evidence: the encoder's own way
      envelope(dispatch(), { ts: -1 }),
      envelope(dispatch(), { ts: 1.5 }),
      envelope(dispatch(), { id: "" }),
      envelope(RE.unsafeMake(RE.UserMessage, { text: "hi", _tag: "UserMessage" } as RE.UserMessage))
    ]
    for (const event of doubtful) {
      rememberToolEventText(event)
      assert.isUndefined(RE.carriedCanonicalText(event))
    }
    // An extra own field on the body.
    const extra = dispatch()
    ;(extra as unknown as Record<string, unknown>).more = 1
    const event = envelope(extra)
    rememberToolEventText(event)
    assert.isUndefined(RE.carriedCanonicalText(event))
  })
})
