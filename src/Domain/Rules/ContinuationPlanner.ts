// The pure continuation planner of docs/spec/04-continuation.md "Planning": from durable facts, host facts and the flag to a plan.
// It checks every gate and collects every failing one; one fold per generation drives the Phase 0 planner beside it.
import * as Data from "effect/Data"
import * as Either from "effect/Either"
import * as Equal from "effect/Equal"
import {
  AwaitingConfirmation,
  type ClaimFact,
  Continue,
  ContinuationCandidate,
  type ContinuationPlan,
  type Generation,
  MAX_GENERATIONS,
  NEXT_STEP,
  Park,
  PARK_REASONS,
  ParkFinding,
  type ParkReason,
  type PlannerInput,
  ReplaySegment
} from "../ContinuationPlan.js"
import type { LedgerCorruption, RuntimeOffsetMismatch } from "../Errors.js"
import * as HighWater from "../HighWater.js"
import * as ToolFingerprint from "../ToolFingerprint.js"
import { InvocationId, RunId, SessionId, TurnId } from "../Ids.js"
import type { ReplayRef, ResumePlan } from "../ResumePlan.js"
import { isTerminalStatus, type RunHeader } from "../RunHeader.js"
import { ContinuationSource, type PrefixRow, type RuntimeEvent, SourceHighWater } from "../RuntimeEvent.js"
import * as ResumePlanner from "./ResumePlanner.js"

type Finding = ParkFinding

const finding = (reason: ParkReason, detail: string, runId?: string, ref?: string, source?: string): Finding =>
  new ParkFinding({
    reason,
    detail,
    ...(runId !== undefined ? { runId } : {}),
    ...(ref !== undefined ? { ref } : {}),
    ...(source !== undefined ? { source } : {})
  }, true)

// ---- One generation: a fold over its rows ----------------------------------------------------------------------

/** What the gates need of one run's rows beyond the Phase 0 plan; updated in place, row by row. */
interface GateState {
  /** The run's first event (its opener). */
  opener: RuntimeEvent | undefined
  /** Open permission requests: request id → seq of the request. */
  readonly openPermissions: Map<string, number>
  /** The tag of each model-visible event (a replay candidate), by seq. */
  readonly visibleTags: Map<number, string>
  /** The tool name of each model-visible FunctionCall, by seq. */
  readonly visibleCallNames: Map<number, string>
  /** The seq of the last model-visible event that is not a FunctionCall (a message or a response). */
  lastVisibleNonCallSeq: number
  /** The seq of the last model-visible `UserMessage` or `ModelText` (calls and responses aside). */
  lastVisibleMessageSeq: number
  /** The tool fingerprints dispatches recorded (ToolFingerprint: MCP tools), in seq order. */
  readonly fingerprints: Array<ToolFingerprint.RecordedFingerprint>
}

const gateStep = (state: GateState, row: PrefixRow): void => {
  const event = row.event
  if (state.opener === undefined) state.opener = event
  const body = event.body
  switch (body._tag) {
    case "PermissionRequested":
      state.openPermissions.set(body.requestId, row.seq)
      return
    case "PermissionResolved":
      state.openPermissions.delete(body.requestId)
      return
    case "UserMessage":
    case "ModelText":
    case "FunctionResponse":
      if (event.hidden === true) return
      state.visibleTags.set(row.seq, body._tag)
      state.lastVisibleNonCallSeq = row.seq
      if (body._tag !== "FunctionResponse") state.lastVisibleMessageSeq = row.seq
      return
    case "FunctionCall":
      if (event.hidden === true) return
      state.visibleTags.set(row.seq, body._tag)
      state.visibleCallNames.set(row.seq, body.name)
      return
    case "ToolDispatched": {
      if (body.evidence === undefined) return
      const recorded = ToolFingerprint.fromEvidence(body.evidence)
      if (recorded !== undefined) state.fingerprints.push(recorded)
      return
    }
  }
}

/** One generation analysed: its findings, and, when its ledger verified, its plan, replay and opener. */
interface Analysed {
  readonly runId: string
  readonly header: RunHeader | undefined
  readonly findings: Array<Finding>
  readonly plan: ResumePlan | undefined
  readonly opener: RuntimeEvent | undefined
  /** The generation's replay with undispatched calls at the end dropped. */
  readonly replay: ReadonlyArray<ReplayRef>
  readonly visibleTags: ReadonlyMap<number, string>
  readonly visibleCallNames: ReadonlyMap<number, string>
  readonly fingerprints: ReadonlyArray<ToolFingerprint.RecordedFingerprint>
}

const corruptionFinding = (runId: string, error: LedgerCorruption | RuntimeOffsetMismatch): Finding => {
  if (error._tag === "RuntimeOffsetMismatch") return finding("runtime_offset_mismatch", "high_water_differs", runId)
  const at = error.seq !== undefined ? String(error.seq) : undefined
  switch (error.reason) {
    case "identity_mismatch":
      return finding("runtime_identity_mismatch", "ledger_identity_mismatch", runId, at)
    case "event_after_terminal":
      return finding("terminal_repair_failed", "event_after_terminal", runId, at)
    default:
      return finding("runtime_ledger_unreadable", error.reason, runId, at)
  }
}

const analyse = (runId: string, generation: Generation): Analysed => {
  const header = generation.header
  const findings: Array<Finding> = []
  const empty: Analysed = {
    runId,
    header,
    findings,
    plan: undefined,
    opener: undefined,
    replay: [],
    visibleTags: new Map(),
    visibleCallNames: new Map(),
    fingerprints: []
  }
  if (header === undefined) findings.push(finding("source_run_unreadable", "unmanaged_run", runId))
  const rows = generation.rows
  if (rows._tag === "Unreadable") {
    findings.push(finding(rows.reason, rows.detail, runId))
    return empty
  }
  const planner = ResumePlanner.initial(runId)
  const gates: GateState = {
    opener: undefined,
    openPermissions: new Map(),
    visibleTags: new Map(),
    visibleCallNames: new Map(),
    lastVisibleNonCallSeq: 0,
    lastVisibleMessageSeq: 0,
    fingerprints: []
  }
  for (const row of rows.rows) {
    ResumePlanner.step(planner, row)
    if (planner.failure !== undefined) break
    gateStep(gates, row)
  }
  const planned = ResumePlanner.finish(planner, { runId })
  if (Either.isLeft(planned)) {
    findings.push(corruptionFinding(runId, planned.left))
    return empty
  }
  const plan = planned.right
  const opener = gates.opener

  // Exactly one RunTerminated, matching the header (the ledger rules refuse a second one, or anything else after it).
  if (plan.terminal === undefined) {
    findings.push(finding("terminal_repair_failed", "no_terminal_event", runId))
  } else if (header !== undefined) {
    if (!isTerminalStatus(header.status)) {
      findings.push(finding("terminal_repair_failed", "header_not_terminal", runId, header.status))
    } else if (header.status !== plan.terminal.status) {
      findings.push(finding("terminal_repair_failed", "header_status_mismatch", runId, header.status))
    }
  }

  // Every event belongs to the header's session, invocation, run and turn (the ledger rules hold the rows to the
  // opener's), and the opener agrees with the header's lineage.
  if (header !== undefined && opener !== undefined) {
    if (
      header.runId !== runId || opener.sessionId !== header.sessionId || opener.invocationId !== header.invocationId ||
      opener.turnId !== header.turnId
    ) {
      findings.push(finding("runtime_identity_mismatch", "header_identity_mismatch", runId))
    }
    const body = opener.body
    const linked = body._tag === "ContinuationStarted"
      ? header.continuationSource !== undefined && Equal.equals(header.continuationSource, body.source) &&
        header.claimId === body.claimId
      : header.continuationSource === undefined
    if (!linked) findings.push(finding("runtime_identity_mismatch", "continuation_source_mismatch", runId))
  }
  if (
    header?.parentRunId !== undefined && header.continuationSource !== undefined &&
    header.parentRunId !== header.continuationSource.runId
  ) {
    findings.push(finding("runtime_identity_mismatch", "parent_run_mismatch", runId, header.parentRunId))
  }

  // No indeterminate or parked operation (a parked one's detail is its park reason, docs/spec/05-reconciliation.md).
  for (const op of plan.operations) {
    if (op.status === "indeterminate" || op.status === "parked") {
      findings.push(finding("dangling_tool_state", op.status === "parked" ? op.recovery?.reasonCode ?? "parked" : op.status, runId, op.callId))
    }
  }

  // A not-dispatched call is followed by no model-visible message (calls and responses of other operations, such as
  // its own step's parallel calls, may follow: it is dropped from the replay). A call settled by a recovery bundle is
  // replayed with its recovered response, after the terminal: no message may lie between them (docs/spec/05-reconciliation.md, stricter
  // than for a T2 response).
  const calls = planner.verifier?.calls
  for (const op of plan.operations) {
    if (calls?.get(op.callId)?.hidden === true) continue
    if (op.status === "not_dispatched" && op.callSeq < gates.lastVisibleMessageSeq) {
      findings.push(finding("provider_replay_non_suffix_gap", "undispatched_call_before_visible_event", runId, op.callId))
    }
    if (
      op.recovery?.disposition === "completed" && op.responseSeq !== undefined && op.callSeq < gates.lastVisibleMessageSeq &&
      gates.lastVisibleMessageSeq < op.responseSeq
    ) {
      findings.push(finding("provider_replay_non_suffix_gap", "visible_event_before_recovered_response", runId, op.callId))
    }
  }

  // No open permission request.
  for (const requestId of gates.openPermissions.keys()) {
    findings.push(finding("pending_permission", "open_request", runId, requestId))
  }

  // The Phase 0 replay keeps a call only with its visible response: the undispatched calls are already dropped.
  return {
    runId,
    header,
    findings,
    plan,
    opener,
    replay: plan.replay,
    visibleTags: gates.visibleTags,
    visibleCallNames: gates.visibleCallNames,
    fingerprints: gates.fingerprints
  }
}

// The next step of a park: that of its first finding, except that operations a person abandoned (`manual_abandon`)
// are not resolved again: when every dangling operation is one, the next step is a new turn (docs/spec/05-reconciliation.md).
const nextStepOf = (ordered: ReadonlyArray<Finding>) => {
  const first = ordered[0]!
  if (first.reason === "dangling_tool_state") {
    const dangling = ordered.filter((f) => f.reason === "dangling_tool_state")
    if (dangling.every((f) => f.detail === "manual_abandon")) return "start_new_turn" as const
  }
  return NEXT_STEP[first.reason]
}

// ---- The lineage ---------------------------------------------------------------------------------------------

const parentOf = (header: RunHeader | undefined): string | undefined =>
  header?.continuationSource?.runId ?? header?.parentRunId

/** Follows the source's links back: the generations newest first, and the lineage findings. */
const followLineage = (
  input: PlannerInput
): { readonly chain: ReadonlyArray<{ readonly runId: string; readonly generation: Generation }>; readonly findings: Array<Finding> } => {
  const byRun = new Map<string, Generation>()
  for (const ancestor of input.ancestors) {
    const id = ancestor.header?.runId
    if (id !== undefined && !byRun.has(id)) byRun.set(id, ancestor)
  }
  const chain: Array<{ runId: string; generation: Generation }> = [{ runId: input.runId, generation: input.source }]
  const findings: Array<Finding> = []
  const visited = new Set<string>([input.runId])
  let child = input.source.header
  let childId = input.runId
  for (let parentId = parentOf(child); parentId !== undefined; parentId = parentOf(child)) {
    if (visited.has(parentId)) {
      findings.push(finding("runtime_lineage_cycle", "run_is_its_own_ancestor", childId, parentId))
      break
    }
    if (chain.length >= MAX_GENERATIONS) {
      findings.push(finding("runtime_lineage_depth_exceeded", "more_than_64_generations", input.runId, String(MAX_GENERATIONS)))
      break
    }
    const parent = byRun.get(parentId)
    if (parent === undefined) {
      findings.push(finding("runtime_lineage_missing", "ancestor_header_missing", childId, parentId))
      break
    }
    visited.add(parentId)
    chain.push({ runId: parentId, generation: parent })
    child = parent.header
    childId = parentId
  }
  return { chain, findings }
}

// ---- Source-only gates -----------------------------------------------------------------------------------------

/** The claims gate: no live claim on the source run. Returns the findings and the claim to supersede, if any. */
const checkClaims = (
  runId: string,
  highWater: { readonly seq: number; readonly digest: string } | undefined,
  claims: ReadonlyArray<ClaimFact>
): { readonly findings: Array<Finding>; readonly supersedes: string | undefined } => {
  const findings: Array<Finding> = []
  const relevant = claims.filter((c) => c.claim.sourceRunId === runId)
  const superseded = new Set<string>()
  for (const c of relevant) if (c.claim.supersedes !== undefined) superseded.add(c.claim.supersedes)
  const heads = relevant.filter((c) => !superseded.has(c.claim.claimId))
  if (heads.length === 0) return { findings, supersedes: undefined }
  if (heads.length > 1) {
    for (const head of heads) findings.push(finding("continuation_already_exists", "several_live_claims", runId, head.claim.claimId))
    return { findings, supersedes: undefined }
  }
  const head = heads[0]!
  const claim = head.claim
  const run = head.continuation
  const abandoned = run !== undefined && run.status === "failed" &&
    run.statusReason === "continuation_abandoned_before_provider_call"
  const detail = run === undefined
    ? "claim_without_run"
    : !abandoned
    ? "live_claim"
    : claim.supersedes !== undefined
    ? "supersede_limit_reached"
    : highWater === undefined || claim.sourceSeq !== highWater.seq || claim.sourceDigest !== highWater.digest
    ? "claim_on_other_boundary"
    : undefined
  if (detail !== undefined) {
    findings.push(finding("continuation_already_exists", detail, runId, claim.claimId))
    return { findings, supersedes: undefined }
  }
  return { findings, supersedes: claim.claimId }
}

const byTableOrder = (findings: ReadonlyArray<Finding>): Array<Finding> => {
  const rank = new Map(PARK_REASONS.map((r, i) => [r, i] as const))
  return findings
    .map((f, i) => ({ f, i }))
    .sort((a, b) => rank.get(a.f.reason)! - rank.get(b.f.reason)! || a.i - b.i)
    .map(({ f }) => f)
}

// ---- The planner -----------------------------------------------------------------------------------------------

/**
 * Plans a continuation of `input.runId`: checks every gate of docs/spec/04-continuation.md over the source run, its lineage (followed
 * through `continuationSource`, at most 64 generations), the claims and the host facts, and collects every failing
 * gate's finding. Pure: no requirements, no clock, no I/O; equal input gives an `Equal` plan.
 * - `Park` when any gate fails (findings in gate-table order; `nextStep` from the first).
 * - Otherwise `Continue` when a person confirmed (`authorizedBy: "confirmation"`) or the flag is on (`"flag"`),
 *   else `AwaitingConfirmation`: the host never continues on its own without the flag.
 * A gate that needs a fact another gate found missing (the rows of an unreadable ledger, the header of an
 * unmanaged run) is not evaluated: the missing fact's finding stands for it.
 *
 * @since 0.1.0
 * @category rules
 */
export const plan = (input: PlannerInput): ContinuationPlan => {
  const findings: Array<Finding> = []
  const lineage = followLineage(input)
  findings.push(...lineage.findings)
  // Oldest generation first, as the replay is assembled.
  const generations = lineage.chain.map(({ generation, runId }) => analyse(runId, generation)).reverse()
  for (const g of generations) findings.push(...g.findings)
  const source = generations[generations.length - 1]!
  const highWater = source.plan?.highWater

  // Each link: the child continues its parent's identity, from the parent's committed high-water.
  for (let i = 1; i < generations.length; i++) {
    const parent = generations[i - 1]!
    const link = generations[i]!.header?.continuationSource
    if (link === undefined || parent.plan === undefined || parent.opener === undefined) continue
    if (
      link.sessionId !== parent.opener.sessionId || link.invocationId !== parent.opener.invocationId ||
      link.turnId !== parent.opener.turnId
    ) {
      findings.push(finding("runtime_identity_mismatch", "lineage_identity_mismatch", parent.runId))
    }
    if (!HighWater.matches(link.highWater, parent.plan.highWater)) {
      findings.push(finding("runtime_offset_mismatch", "ancestor_high_water_differs", parent.runId))
    }
  }

  // Host: background work settled; the same workspace identity; every tool of the replay still available.
  if (!input.host.backgroundSettled) {
    findings.push(finding("background_operation_pending", "host_reports_unsettled", input.runId))
  }
  const workspaceId = input.host.workspaceId
  if (workspaceId === undefined) {
    findings.push(finding("workspace_identity_mismatch", "marker_missing", input.runId))
  } else {
    for (const g of generations) {
      if (g.header !== undefined && g.header.workspaceId !== workspaceId) {
        findings.push(finding("workspace_identity_mismatch", "workspace_id_differs", g.runId))
      }
    }
  }
  const catalog = new Set(input.host.toolCatalog)
  const missingTools = new Set<string>()
  for (const g of generations) {
    for (const ref of g.replay) {
      const name = g.visibleCallNames.get(ref.seq)
      if (name !== undefined && !catalog.has(name) && !missingTools.has(name)) {
        missingTools.add(name)
        findings.push(finding("tool_catalog_mismatch", "tool_unavailable", g.runId, name))
      }
    }
  }
  // A tool the host still lists, whose fingerprint (an MCP tool: server, name, hints, description, input schema) is
  // not the one T1 recorded: the finding names the recorded server and tool (`source`).
  const fingerprints = input.host.toolFingerprints
  if (fingerprints !== undefined) {
    for (const g of generations) {
      for (const recorded of g.fingerprints) {
        if (missingTools.has(recorded.name) || !catalog.has(recorded.name)) continue
        if (fingerprints[recorded.name] !== recorded.fingerprint) {
          missingTools.add(recorded.name)
          findings.push(finding("tool_catalog_mismatch", "tool_changed", g.runId, recorded.name, recorded.source))
        }
      }
    }
  }

  // The replay starts with a UserMessage and ends with a UserMessage or a FunctionResponse (judged only over a
  // complete lineage whose every ledger could be read: a partial replay says nothing about the whole one).
  if (lineage.findings.length === 0 && generations.every((g) => g.plan !== undefined)) {
    const first = generations.find((g) => g.replay.length > 0)
    const last = [...generations].reverse().find((g) => g.replay.length > 0)
    if (first === undefined || last === undefined) {
      findings.push(finding("provider_resume_boundary_unsupported", "replay_empty", input.runId))
    } else {
      const firstTag = first.visibleTags.get(first.replay[0]!.seq)
      const lastTag = last.visibleTags.get(last.replay[last.replay.length - 1]!.seq)
      if (firstTag !== "UserMessage") {
        findings.push(finding("provider_resume_boundary_unsupported", "first_not_user_message", first.runId, firstTag))
      }
      if (lastTag !== "UserMessage" && lastTag !== "FunctionResponse") {
        findings.push(finding("provider_resume_boundary_unsupported", "last_not_user_message_or_response", last.runId, lastTag))
      }
    }
  }

  // No live claim for this boundary (an abandoned one may be superseded once); the expected high-water matches.
  const claims = checkClaims(input.runId, highWater, input.claims)
  findings.push(...claims.findings)
  const expected = input.expectedHighWater
  if (expected !== undefined && highWater !== undefined && !HighWater.matches(expected, highWater)) {
    findings.push(finding("runtime_offset_mismatch", "high_water_differs", input.runId))
  }

  const opener = source.opener
  if (findings.length > 0 || highWater === undefined || opener === undefined || workspaceId === undefined) {
    const ordered = byTableOrder(findings)
    // Unreachable (every gate held, yet a fact is missing) stays fail-closed rather than continuing.
    if (ordered.length === 0) ordered.push(finding("source_run_unreadable", "facts_missing", input.runId))
    return new Park({
      runId: input.runId,
      findings: Data.array(ordered),
      nextStep: nextStepOf(ordered),
      ...(highWater !== undefined ? { highWater } : {})
    }, true)
  }

  const candidate = new ContinuationCandidate({
    source: new ContinuationSource({
      sessionId: SessionId.make(opener.sessionId, true),
      invocationId: InvocationId.make(opener.invocationId, true),
      runId: RunId.make(input.runId, true),
      turnId: TurnId.make(opener.turnId, true),
      highWater: new SourceHighWater({ seq: highWater.seq, digest: highWater.digest }, true)
    }, true),
    workspaceId,
    replay: Data.array(
      generations.map((g) => new ReplaySegment({ runId: RunId.make(g.runId, true), refs: Data.array([...g.replay]) }, true))
    ),
    generations: generations.length,
    ...(claims.supersedes !== undefined ? { supersedesClaimId: claims.supersedes } : {})
  }, true)
  if (input.confirmed) return new Continue({ candidate, authorizedBy: "confirmation" }, true)
  if (input.enabled) return new Continue({ candidate, authorizedBy: "flag" }, true)
  return new AwaitingConfirmation({ candidate }, true)
}
