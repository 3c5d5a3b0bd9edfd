// Builds well-formed RuntimeEvents for one run with deterministic ids: for tests, the harness and examples.
// It is pure: the caller supplies `ts` (from `Clock` in effectful code), nothing is read from the environment.
import { deriveOperationId, CallId, EventId, InvocationId, RunId, SessionId, TurnId } from "../Ids.js"
import * as RuntimeEvent from "../RuntimeEvent.js"
import * as LedgerRules from "./LedgerRules.js"
import * as Either from "effect/Either"

/**
 * The ids an event builder stamps on every event of its run.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunIds {
  readonly sessionId: string
  readonly invocationId: string
  readonly runId: string
  readonly turnId: string
}

/**
 * Default ids for a run named `name`: `sess-<name>`, `inv-<name>`, `<name>`, `turn-<name>`.
 *
 * @since 0.1.0
 * @category rules
 */
export const idsFor = (name: string): RunIds => ({
  sessionId: `sess-${name}`,
  invocationId: `inv-${name}`,
  runId: name,
  turnId: `turn-${name}`
})

/**
 * A builder of one run's events; event ids are `<runId>:<n>` in build order.
 *
 * @since 0.1.0
 * @category models
 */
export interface EventBuilder {
  readonly ids: RunIds
  /** The run's id, branded. */
  readonly runId: RunId
  readonly opened: (toolBoundary?: RuntimeEvent.ToolBoundary) => RuntimeEvent.RuntimeEvent
  readonly user: (text: string) => RuntimeEvent.RuntimeEvent
  readonly model: (text: string) => RuntimeEvent.RuntimeEvent
  readonly call: (callId: string, name: string, args: unknown, options?: { hidden?: true }) => RuntimeEvent.RuntimeEvent
  readonly dispatched: (
    callId: string,
    name: string,
    args: unknown,
    recoveryMode?: RuntimeEvent.RecoveryMode,
    /** An `idempotent` dispatch records `idempotencyKey` (default: the operation id, as the tool runtime does). */
    options?: { readonly idempotencyKey?: string; readonly evidence?: unknown; readonly hidden?: true }
  ) => RuntimeEvent.RuntimeEvent
  readonly response: (
    callId: string,
    name: string,
    result: unknown,
    options?: { isError?: boolean; operationBound?: boolean; hidden?: true }
  ) => RuntimeEvent.RuntimeEvent
  readonly terminated: (status: RuntimeEvent.TerminalStatus, failureClass?: string) => RuntimeEvent.RuntimeEvent
  readonly diagnostic: (message: string) => RuntimeEvent.RuntimeEvent
  readonly custom: (body: RuntimeEvent.EventBody, options?: { id?: string; hidden?: true }) => RuntimeEvent.RuntimeEvent
}

/**
 * Makes a builder for the run `ids` (or `idsFor(name)`), stamping `ts` on every event.
 *
 * @since 0.1.0
 * @category rules
 */
export const make = (ids: RunIds | string, ts: number = 0): EventBuilder => {
  const run = typeof ids === "string" ? idsFor(ids) : ids
  let n = 0
  const envelope = (body: RuntimeEvent.EventBody, options?: { id?: string; hidden?: true }) =>
    new RuntimeEvent.RuntimeEvent({
      id: EventId.make(options?.id ?? `${run.runId}:${++n}`),
      sessionId: SessionId.make(run.sessionId),
      invocationId: InvocationId.make(run.invocationId),
      runId: RunId.make(run.runId),
      turnId: TurnId.make(run.turnId),
      ts,
      ...(options?.hidden ? { hidden: true as const } : {}),
      body
    })
  return {
    ids: run,
    runId: RunId.make(run.runId),
    opened: (toolBoundary = "none") => envelope(new RuntimeEvent.RunOpened({ toolBoundary })),
    user: (text) => envelope(new RuntimeEvent.UserMessage({ text })),
    model: (text) => envelope(new RuntimeEvent.ModelText({ text })),
    call: (callId, name, args, options) =>
      envelope(new RuntimeEvent.FunctionCall({ callId: CallId.make(callId), name, args }), options),
    dispatched: (callId, name, args, recoveryMode = "never_auto_retry", options) => {
      const operationId = deriveOperationId(run.invocationId, callId)
      return envelope(
        new RuntimeEvent.ToolDispatched({
          callId: CallId.make(callId),
          operationId,
          argsHash: Either.getOrThrow(LedgerRules.argsHash(name, args)),
          recoveryMode,
          ...(recoveryMode === "idempotent" ? { idempotencyKey: options?.idempotencyKey ?? operationId } : {}),
          ...(options?.evidence !== undefined ? { evidence: options.evidence } : {})
        }),
        options?.hidden ? { hidden: true } : undefined
      )
    },
    response: (callId, name, result, options) =>
      envelope(
        new RuntimeEvent.FunctionResponse({
          callId: CallId.make(callId),
          name,
          result,
          isError: options?.isError ?? false,
          ...(options?.operationBound ? { operationId: deriveOperationId(run.invocationId, callId) } : {})
        }),
        options?.hidden ? { hidden: true } : undefined
      ),
    terminated: (status, failureClass) =>
      envelope(new RuntimeEvent.RunTerminated({ status, ...(failureClass !== undefined ? { failureClass } : {}) })),
    diagnostic: (message) => envelope(new RuntimeEvent.Diagnostic({ message })),
    custom: envelope
  }
}
