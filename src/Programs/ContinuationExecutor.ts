// Continuation execution (docs/spec/04-continuation.md "Execution"): revalidate under the exclusive owner lock, claim the boundary, commit
// `ContinuationStarted`, call the host's ModelProvider once, then the terminal event and, after it, the terminal header.
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Equal from "effect/Equal"
import * as Crypto from "node:crypto"
import { ContinuationAlreadyExists } from "../Domain/ContinuationErrors.js"
import type * as ContinuationOutcome from "../Domain/ContinuationOutcome.js"
import {
  Continued,
  ContinuationStartFailed,
  LifecycleEvent,
  NotContinued,
  type PlanFingerprint,
  PreparedContinuation,
  REVALIDATION_CODES,
  type RevalidationCode,
  RevalidationFailed
} from "../Domain/ContinuationOutcome.js"
import { type ContinuationCandidate, type ContinuationPlan, type ParkReason, reasonsOf } from "../Domain/ContinuationPlan.js"
import { EventId, InvocationId, RunId, type SessionId, TurnId } from "../Domain/Ids.js"
import { ContinuationClaim, RunHeader } from "../Domain/RunHeader.js"
import {
  type CommittedRow,
  ContinuationStarted,
  type EventBody,
  RunTerminated,
  RuntimeEvent,
  type TerminalStatus
} from "../Domain/RuntimeEvent.js"
import * as ContinuationFailpoints from "../Services/ContinuationFailpoints.js"
import { ContinuationIds, ModelProvider, ProviderRequest, ProviderTurnCommitted } from "../Services/ModelProvider.js"
import { RunHeaderStore } from "../Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import { WorkspaceOwner } from "../Services/WorkspaceOwner.js"
import * as ContinuationFacts from "./ContinuationFacts.js"
import * as ContinuationPlanner from "../Domain/Rules/ContinuationPlanner.js"

/**
 * The `failureClass` of the `RunTerminated` closing a continuation whose provider failed.
 *
 * @since 0.1.0
 * @category constants
 */
export const PROVIDER_FAILED = "provider_failed"

/**
 * What a new claim's id comes from: a random UUID unless replaced (tests provide a fixed source).
 *
 * @since 0.1.0
 * @category models
 */
export interface ClaimIdSourceShape {
  readonly next: Effect.Effect<string>
}

/**
 * The source of new claim ids, a `Context.Reference` defaulting to `crypto.randomUUID`.
 *
 * @since 0.1.0
 * @category tags
 */
export class ClaimIdSource extends Context.Reference<ClaimIdSource>()("runtime-resume/ContinuationExecutor/ClaimIdSource", {
  defaultValue: (): ClaimIdSourceShape => ({ next: Effect.sync(() => Crypto.randomUUID()) })
}) {}

/**
 * The continuation run's ids, derived from its claim id (so a retry of one claim is recognisable): run
 * `<claimId>:run`, invocation `<claimId>:inv`, turn `<claimId>:turn`, in the source's session.
 *
 * @since 0.1.0
 * @category programs
 */
export const continuationIds = (claimId: string, sessionId: SessionId): ContinuationIds =>
  new ContinuationIds({
    sessionId,
    invocationId: InvocationId.make(`${claimId}:inv`),
    runId: RunId.make(`${claimId}:run`),
    turnId: TurnId.make(`${claimId}:turn`),
    claimId
  })

/**
 * The id of the continuation run's `ContinuationStarted`.
 *
 * @since 0.1.0
 * @category programs
 */
export const startedEventId = (runId: string): EventId => EventId.make(`${runId}:started`)

/**
 * The id of the continuation run's own `RunTerminated`.
 *
 * @since 0.1.0
 * @category programs
 */
export const terminatedEventId = (runId: string): EventId => EventId.make(`${runId}:terminated`)

/**
 * Logs one lifecycle event: the message `continuation.<kind>`, its fields as log annotations (ids and codes only).
 *
 * @since 0.1.0
 * @category programs
 */
export const emit = (event: LifecycleEvent): Effect.Effect<void> => {
  const annotations: Record<string, string> = { "continuation.kind": event.kind, "continuation.sourceRunId": event.sourceRunId }
  if (event.continuationRunId !== undefined) annotations["continuation.runId"] = event.continuationRunId
  if (event.claimId !== undefined) annotations["continuation.claimId"] = event.claimId
  if (event.authorizedBy !== undefined) annotations["continuation.authorizedBy"] = event.authorizedBy
  if (event.codes !== undefined) annotations["continuation.codes"] = event.codes.join(",")
  if (event.errorClass !== undefined) annotations["continuation.errorClass"] = event.errorClass
  return Effect.logInfo(`continuation.${event.kind}`).pipe(Effect.annotateLogs(annotations))
}

const emitPlan = (runId: string, plan: ContinuationPlan): Effect.Effect<void> => {
  switch (plan._tag) {
    case "Park":
      return emit(new LifecycleEvent({ kind: "plan_parked", sourceRunId: runId, codes: [...reasonsOf(plan)] }))
    case "Continue":
      return emit(new LifecycleEvent({ kind: "plan_approved", sourceRunId: runId, authorizedBy: plan.authorizedBy }))
    case "AwaitingConfirmation":
      return Effect.void
  }
}

/**
 * Options of `prepare` and `execute`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ContinuationOptions {
  /** A person confirmed this continuation (`resume --yes`, or `confirmed: true` in the API). */
  readonly confirmed: boolean
}

/**
 * Plans a continuation of `runId` in `workspace` from durable facts and the host (no lock, nothing written), and
 * returns the plan with the facts it was made from, for a caller to show and to approve. Emits `plan_parked` for a
 * park and `plan_approved` for a `Continue`.
 *
 * @since 0.1.0
 * @category programs
 */
export const prepare = Effect.fn("ContinuationExecutor.prepare")(function*(
  workspace: string,
  runId: string,
  options: ContinuationOptions
) {
  const facts = yield* ContinuationFacts.gather(workspace, runId, { confirmed: options.confirmed })
  const plan = ContinuationPlanner.plan(facts.input)
  yield* emitPlan(runId, plan)
  return new PreparedContinuation({ plan, fingerprint: ContinuationFacts.fingerprintOf(facts, plan) }, true)
})

// The fingerprint fields that differ, as revalidation codes (the replay only when the new plan has one).
const differences = (approved: PlanFingerprint, current: PlanFingerprint): Array<RevalidationCode> => {
  const found = new Set<RevalidationCode>()
  if (!Equal.equals(approved.sourceHighWater, current.sourceHighWater)) found.add("source_high_water_changed")
  if (approved.sourceStatus !== current.sourceStatus || approved.terminalStatus !== current.terminalStatus) {
    found.add("source_terminal_changed")
  }
  if (current.replay !== undefined && !Equal.equals(approved.replay, current.replay)) found.add("replay_changed")
  if (approved.workspaceId !== current.workspaceId) found.add("workspace_identity_changed")
  if (!Equal.equals(approved.toolCatalog, current.toolCatalog) || !Equal.equals(approved.toolFingerprints, current.toolFingerprints)) {
    found.add("tool_catalog_changed")
  }
  if (!current.backgroundSettled) found.add("background_work_pending")
  return REVALIDATION_CODES.filter((code) => found.has(code))
}

const revalidationFailed = (runId: string, codes: ReadonlyArray<RevalidationCode>, reasons: ReadonlyArray<ParkReason>) =>
  new RevalidationFailed({
    runId,
    code: codes[0]!,
    codes: [...codes],
    reasons: [...reasons],
    message: `continuation of run ${runId}: revalidation under the owner lock found ${codes.join(", ")}` +
      (reasons.length > 0 ? ` (the plan now parks: ${reasons.join(", ")})` : "") +
      "; nothing was written and no provider was called: plan again"
  })

// Revalidates under the lock: the facts again, the plan again, compared with the approved plan and its facts.
const revalidate = (
  workspace: string,
  prepared: PreparedContinuation,
  approved: ContinuationCandidate,
  confirmed: boolean
) =>
  Effect.gen(function*() {
    const runId = prepared.fingerprint.runId
    const expected = prepared.fingerprint.sourceHighWater
    const facts = yield* ContinuationFacts.gather(workspace, runId, {
      confirmed,
      ...(expected !== undefined ? { expectedHighWater: expected } : {})
    })
    const plan = ContinuationPlanner.plan(facts.input)
    const codes = differences(prepared.fingerprint, ContinuationFacts.fingerprintOf(facts, plan))
    const reasons = reasonsOf(plan)
    if (codes.length > 0) return yield* revalidationFailed(runId, codes, reasons)
    if (plan._tag === "Park") {
      const live = plan.findings.filter((f) => f.reason === "continuation_already_exists")
      if (live.length > 0 && reasons.length === 1) {
        const boundary = approved.source
        return yield* new ContinuationAlreadyExists({
          sourceRunId: boundary.runId,
          sourceSeq: boundary.highWater.seq,
          sourceDigest: boundary.highWater.digest,
          existingClaimId: live[0]!.ref ?? "",
          reason: "continuation_already_exists",
          message: `continuation of run ${runId}: the boundary ${boundary.runId}@${boundary.highWater.seq} was claimed ` +
            `since the plan was made (claim ${live[0]!.ref ?? "?"}); nothing was written and no provider was called`
        })
      }
      return yield* revalidationFailed(runId, ["plan_changed"], reasons)
    }
    if (plan._tag === "AwaitingConfirmation") return yield* revalidationFailed(runId, ["authorization_changed"], [])
    if (!Equal.equals(plan.candidate, approved)) return yield* revalidationFailed(runId, ["plan_changed"], [])
    const replay = ContinuationFacts.replayEvents(facts, plan.candidate.replay)
    if (replay === undefined) return yield* revalidationFailed(runId, ["replay_changed"], [])
    return { plan, replay }
  }).pipe(Effect.withSpan("ContinuationExecutor.revalidate", { attributes: { sourceRunId: prepared.fingerprint.runId } }))

// The ids known so far, for `execution_failed`.
interface Progress {
  continuationRunId?: string
  claimId?: string
}

const eventOf = (ids: ContinuationIds, id: EventId, ts: number, body: EventBody): RuntimeEvent =>
  new RuntimeEvent({
    id,
    sessionId: ids.sessionId,
    invocationId: ids.invocationId,
    runId: ids.runId,
    turnId: ids.turnId,
    ts,
    body
  })

// Everything under the exclusive owner lock.
const run = (
  workspace: string,
  prepared: PreparedContinuation,
  approved: ContinuationCandidate,
  confirmed: boolean,
  progress: Progress
) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const headers = yield* RunHeaderStore
    const provider = yield* ModelProvider
    const sourceRunId = prepared.fingerprint.runId

    // 1. Revalidate.
    const { plan, replay } = yield* revalidate(workspace, prepared, approved, confirmed)
    const candidate = plan.candidate
    const source = candidate.source
    // A plan that awaited confirmation is approved now, by the person who confirmed it (`prepare` emitted the others).
    if (prepared.plan._tag === "AwaitingConfirmation") {
      yield* emit(new LifecycleEvent({ kind: "plan_approved", sourceRunId, authorizedBy: plan.authorizedBy }))
    }

    // 2. Claim the boundary: the claim row and the new run's header commit together.
    const claimId = `claim-${yield* (yield* ClaimIdSource).next}`
    const ids = continuationIds(claimId, source.sessionId)
    const runId = ids.runId
    const attributes = { sourceRunId, continuationRunId: runId, claimId }
    const createdAt = yield* Clock.currentTimeMillis
    const claim = new ContinuationClaim({
      claimId,
      sourceRunId: source.runId,
      sourceSeq: source.highWater.seq,
      sourceDigest: source.highWater.digest,
      continuationRunId: runId,
      ...(candidate.supersedesClaimId !== undefined ? { supersedes: candidate.supersedesClaimId } : {}),
      createdAt
    })
    const header = new RunHeader({
      runId,
      sessionId: ids.sessionId,
      invocationId: ids.invocationId,
      turnId: ids.turnId,
      status: "created",
      parentRunId: source.runId,
      continuationSource: source,
      claimId,
      workspaceId: candidate.workspaceId,
      createdAt,
      updatedAt: createdAt
    })
    const site: ContinuationFailpoints.ContinuationSite = { sourceRunId, claimId, runId }
    yield* ContinuationFailpoints.hit("run_created", site)
    yield* headers.claim(claim, header).pipe(Effect.withSpan("ContinuationExecutor.claim", { attributes }))
    progress.continuationRunId = runId
    progress.claimId = claimId
    yield* ContinuationFailpoints.hit("claim_committed", site)
    yield* emit(new LifecycleEvent({ kind: "execution_started", sourceRunId, continuationRunId: runId, claimId }))

    // 3. Commit the start, the run's first event, before any provider call; then the header is `running`.
    const startedAt = yield* Clock.currentTimeMillis
    const started = yield* store.append(runId, [
      eventOf(ids, startedEventId(runId), startedAt, new ContinuationStarted({ toolBoundary: "t1_after_preflight_v1", source, claimId }))
    ], { expectedHighWater: { seq: 0 } }).pipe(
      Effect.mapError((error) =>
        new ContinuationStartFailed({
          sourceRunId,
          continuationRunId: runId,
          claimId,
          errorClass: error._tag,
          message: `continuation ${runId} of run ${sourceRunId}: its ContinuationStarted did not commit (${error._tag}); ` +
            "no provider was called. Run repair: it closes the run (as continuation_abandoned_before_provider_call " +
            "when nothing landed, after which the boundary may be claimed once more)"
        })
      ),
      Effect.withSpan("ContinuationExecutor.start", { attributes })
    )
    const startRow: CommittedRow = started[started.length - 1]!
    yield* ContinuationFailpoints.hit("start_committed", site)
    yield* headers.setStatus(runId, "running", { at: startedAt }).pipe(
      Effect.withSpan("ContinuationExecutor.running", { attributes })
    )

    // 4. Call the provider with the validated replay (the user message is in it: never added again).
    const close = (
      status: TerminalStatus,
      events: ReadonlyArray<RuntimeEvent>,
      failureClass?: string,
      after: { readonly seq: number; readonly digest: string } = startRow
    ) =>
      Effect.gen(function*() {
        const at = yield* Clock.currentTimeMillis
        const terminated = eventOf(ids, terminatedEventId(runId), at, new RunTerminated({
          status,
          ...(failureClass !== undefined ? { failureClass } : {})
        }))
        // The terminal event commits before the terminal header.
        const rows = yield* store.append(runId, [...events, terminated], { expectedHighWater: { seq: after.seq, digest: after.digest } })
        yield* ContinuationFailpoints.hit("terminal_event_committed", site)
        yield* headers.setStatus(runId, status, { at })
        yield* ContinuationFailpoints.hit("terminal_header_committed", site)
        return rows[rows.length - 1]!
      }).pipe(Effect.withSpan("ContinuationExecutor.finish", { attributes: { ...attributes, status } }))
    const reply = yield* provider.respond(new ProviderRequest({ continuation: ids, source, workspaceId: candidate.workspaceId, replay }, true)).pipe(
      Effect.withSpan("ContinuationExecutor.callProvider", { attributes }),
      Effect.tapErrorTag("ProviderFailed", (failed) => Effect.ignore(close("failed", [], PROVIDER_FAILED, failed.highWater ?? startRow)))
    )

    // 5. The reply and `RunTerminated` completed in one append (after the provider's own events, for a provider that
    // committed them), then the terminal header.
    const at = yield* Clock.currentTimeMillis
    const terminal = yield* (reply instanceof ProviderTurnCommitted
      ? close("completed", [], undefined, reply.highWater)
      : close("completed", reply.items.map((item, i) => eventOf(ids, EventId.make(`${runId}:reply:${i + 1}`), at, item))))
    yield* emit(new LifecycleEvent({ kind: "execution_completed", sourceRunId, continuationRunId: runId, claimId }))
    return new Continued({
      sourceRunId,
      continuationRunId: runId,
      claimId,
      ...(candidate.supersedesClaimId !== undefined ? { supersededClaimId: candidate.supersedesClaimId } : {}),
      authorizedBy: plan.authorizedBy,
      startedSeq: startRow.seq,
      terminalSeq: terminal.seq
    })
  })

const codesOf = (error: { readonly _tag: string }): ReadonlyArray<string> | undefined =>
  error._tag === "RevalidationFailed"
    ? (error as RevalidationFailed).codes
    : "reason" in error && typeof error.reason === "string"
    ? [error.reason]
    : "code" in error && typeof error.code === "string"
    ? [error.code]
    : undefined

type RunEffect = ReturnType<typeof run>

// The common body of `execute` and `executeHoldingLock`; `locked` runs the steps under the exclusive owner lock.
const executeWith = <E2 extends { readonly _tag: string }, R2>(
  workspace: string,
  prepared: PreparedContinuation,
  options: ContinuationOptions,
  locked: (
    effect: RunEffect
  ) => Effect.Effect<Effect.Effect.Success<RunEffect>, Effect.Effect.Error<RunEffect> | E2, Effect.Effect.Context<RunEffect> | R2>
) =>
  Effect.gen(function*() {
    const approved = prepared.plan
    const sourceRunId = prepared.fingerprint.runId
    if (approved._tag === "Park") {
      return new NotContinued({ sourceRunId, reason: "parked", parkReasons: [...reasonsOf(approved)] })
    }
    if (approved._tag === "AwaitingConfirmation" && !options.confirmed) {
      return new NotContinued({ sourceRunId, reason: "awaiting_confirmation", parkReasons: [] })
    }
    // An approved `AwaitingConfirmation` that a person confirmed re-plans as `Continue` with the same candidate.
    const progress: Progress = {}
    const outcome: ContinuationOutcome.ContinuationOutcome = yield* locked(
      run(workspace, prepared, approved.candidate, options.confirmed, progress)
    ).pipe(
      Effect.tapError((error) => {
        const codes = codesOf(error)
        return emit(new LifecycleEvent({
          kind: "execution_failed",
          sourceRunId,
          ...(progress.continuationRunId !== undefined ? { continuationRunId: progress.continuationRunId } : {}),
          ...(progress.claimId !== undefined ? { claimId: progress.claimId } : {}),
          ...(codes !== undefined ? { codes: [...codes] } : {}),
          errorClass: error._tag
        }))
      })
    )
    return outcome
  })

/**
 * Executes an approved plan (docs/spec/04-continuation.md "Execution"). A plan that is not `Continue` — a park, or `AwaitingConfirmation`
 * without `confirmed: true` — returns `NotContinued`: no lock, no claim, no provider call. Otherwise, under the
 * exclusive owner lock (at most 2 s, else `WorkspaceLocked`):
 * 1. revalidates: facts and plan again, compared with the approved ones (`RevalidationFailed` with a stable code;
 *    `ContinuationAlreadyExists` when the boundary was claimed since); nothing is written on failure;
 * 2. claims the boundary and creates the new run's header (`created`, with `continuationSource`) in one commit;
 * 3. commits `ContinuationStarted` as the run's first event (`ContinuationStartFailed` if it does not: no provider
 *    call, the run left for repair), then sets the header `running`;
 * 4. calls the `ModelProvider` once with the validated replay, oldest generation first;
 * 5. appends the reply with `RunTerminated` completed, then sets the terminal header. A `ProviderFailed` closes the
 *    run `failed` (`provider_failed`) the same way, then fails.
 * Emits `plan_approved` (for a plan a person confirmed now), `execution_started`, `execution_completed` or
 * `execution_failed`, and a span per step, carrying ids, codes and error classes only.
 *
 * @since 0.1.0
 * @category programs
 */
export const execute = Effect.fn("ContinuationExecutor.execute")(function*(
  workspace: string,
  prepared: PreparedContinuation,
  options: ContinuationOptions
) {
  const owner = yield* WorkspaceOwner
  return yield* executeWith(workspace, prepared, options, (effect) => owner.withExclusive(workspace, effect))
})

/**
 * `execute` for a caller that already holds the workspace's exclusive owner lock (a host continuing on its own
 * within HostStartup's repair step, where taking the lock again could never succeed). Same steps and guarantees.
 *
 * @since 0.1.0
 * @category programs
 */
export const executeHoldingLock = Effect.fn("ContinuationExecutor.executeHoldingLock")(function*(
  workspace: string,
  prepared: PreparedContinuation,
  options: ContinuationOptions
) {
  return yield* executeWith(workspace, prepared, options, (effect) => effect)
})
