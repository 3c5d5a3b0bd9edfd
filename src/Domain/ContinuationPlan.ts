// The continuation plan of docs/spec/04-continuation.md "Planning": the park reasons (stable codes of the gate table), the host facts,
// the planner's input, and its result (`Continue`, `AwaitingConfirmation` or `Park`), all structurally `Equal`.
import * as Schema from "effect/Schema"
import type { ExpectedHighWaterInput } from "./HighWater.js"
import { HighWater } from "./HighWater.js"
import { RunId } from "./Ids.js"
import { ReplayRef } from "./ResumePlan.js"
import type { ContinuationClaim, RunHeader } from "./RunHeader.js"
import type { PrefixRow } from "./RuntimeEvent.js"
import { ContinuationSource } from "./RuntimeEvent.js"

/**
 * The stable park reasons of docs/spec/04-continuation.md's gate table, in the table's order.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ParkReason = Schema.Literal(
  "source_run_unreadable",
  "runtime_ledger_unreadable",
  "terminal_repair_failed",
  "runtime_identity_mismatch",
  "dangling_tool_state",
  "provider_replay_non_suffix_gap",
  "pending_permission",
  "background_operation_pending",
  "workspace_identity_mismatch",
  "tool_catalog_mismatch",
  "provider_resume_boundary_unsupported",
  "continuation_already_exists",
  "runtime_offset_mismatch",
  "runtime_lineage_cycle",
  "runtime_lineage_missing",
  "runtime_lineage_depth_exceeded"
)
/**
 * A stable park reason of docs/spec/04-continuation.md's gate table.
 *
 * @since 0.1.0
 * @category models
 */
export type ParkReason = typeof ParkReason.Type

/**
 * Every park reason, in the gate table's order.
 *
 * @since 0.1.0
 * @category constants
 */
export const PARK_REASONS: ReadonlyArray<ParkReason> = ParkReason.literals

/**
 * The most generations (runs from the first one to the source, inclusive) a continuation's source may have.
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_GENERATIONS = 64

/**
 * What a person or host should do about a parked plan (a stable code, derived from the most basic reason).
 *
 * @since 0.1.0
 * @category schemas
 */
export const NextStep = Schema.Literal(
  "inspect_ledger",
  "run_repair",
  "resolve_tool_operation",
  "start_new_turn",
  "resolve_permission",
  "wait_for_background_work",
  "check_workspace",
  "restore_tools",
  "inspect_existing_continuation",
  "replan"
)
/**
 * What a person or host should do about a parked plan.
 *
 * @since 0.1.0
 * @category models
 */
export type NextStep = typeof NextStep.Type

/**
 * The next step each park reason calls for. A plan's `nextStep` is that of its first finding in table order.
 *
 * @since 0.1.0
 * @category constants
 */
export const NEXT_STEP: Readonly<Record<ParkReason, NextStep>> = {
  source_run_unreadable: "inspect_ledger",
  runtime_ledger_unreadable: "inspect_ledger",
  terminal_repair_failed: "run_repair",
  runtime_identity_mismatch: "inspect_ledger",
  dangling_tool_state: "resolve_tool_operation",
  provider_replay_non_suffix_gap: "start_new_turn",
  pending_permission: "resolve_permission",
  background_operation_pending: "wait_for_background_work",
  workspace_identity_mismatch: "check_workspace",
  tool_catalog_mismatch: "restore_tools",
  provider_resume_boundary_unsupported: "start_new_turn",
  continuation_already_exists: "inspect_existing_continuation",
  runtime_offset_mismatch: "replan",
  runtime_lineage_cycle: "inspect_ledger",
  runtime_lineage_missing: "inspect_ledger",
  runtime_lineage_depth_exceeded: "start_new_turn"
}

/**
 * One failing gate: its stable reason, a machine-readable `detail` code (such as `no_terminal_event`), the run it
 * concerns, and `ref`, the id it is about where one applies (a call id, a request id, a claim id, a tool name, a
 * corruption reason). Never a prompt, an argument or a result.
 *
 * @since 0.1.0
 * @category models
 */
export class ParkFinding extends Schema.Class<ParkFinding>("ParkFinding")({
  reason: ParkReason,
  detail: Schema.String,
  runId: Schema.optionalWith(Schema.String, { exact: true }),
  ref: Schema.optionalWith(Schema.String, { exact: true }),
  /**
   * Where the ref came from, as the ledger recorded it, when it did: for `tool_changed`, an MCP tool's server and tool
   * (`MCP server files 2.1.0, tool read`, docs/mcp.md). For a person; never a prompt, an argument or a result.
   */
  source: Schema.optionalWith(Schema.String, { exact: true })
}) {}

/**
 * The facts a host reports about itself (from the `ContinuationSafetyInspector`); the planner believes nothing else.
 *
 * @since 0.1.0
 * @category models
 */
export class HostFacts extends Schema.Class<HostFacts>("HostFacts")({
  /** The UUID of the workspace's marker file; absent when the workspace has no marker. */
  workspaceId: Schema.optionalWith(Schema.String, { exact: true }),
  /** The names of the tools available now. */
  toolCatalog: Schema.Data(Schema.Array(Schema.String)),
  /**
   * Each tool's fingerprint now, for tools whose T1 recorded one (an MCP tool: its server, name and hints, docs/mcp.md);
   * a replayed dispatch whose recorded fingerprint differs parks with `tool_catalog_mismatch` (`tool_changed`).
   * Absent: the host reports none, and only names are checked.
   */
  toolFingerprints: Schema.optionalWith(Schema.Data(Schema.Record({ key: Schema.String, value: Schema.String })), { exact: true }),
  /** Whether the host's background work is settled (the host supplies this fact). */
  backgroundSettled: Schema.Boolean
}) {}

/**
 * One generation's replay: the refs of its events a provider is sent, in ledger order.
 *
 * @since 0.1.0
 * @category models
 */
export class ReplaySegment extends Schema.Class<ReplaySegment>("ReplaySegment")({
  runId: RunId,
  refs: Schema.Data(Schema.Array(ReplayRef))
}) {}

/**
 * What a continuation of the source boundary would be: the boundary (its ids and high-water, as the new run's
 * `continuationSource`), the workspace identity, the replay oldest generation first (undispatched calls at the end
 * already dropped), the number of generations, and the claim it would supersede (an abandoned one), if any.
 *
 * @since 0.1.0
 * @category models
 */
export class ContinuationCandidate extends Schema.Class<ContinuationCandidate>("ContinuationCandidate")({
  source: ContinuationSource,
  workspaceId: Schema.String,
  replay: Schema.Data(Schema.Array(ReplaySegment)),
  generations: Schema.Int.pipe(Schema.positive()),
  supersedesClaimId: Schema.optionalWith(Schema.String, { exact: true })
}) {}

/**
 * Who allowed a continuation: the flag (the host may continue on its own) or a person's explicit confirmation.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Authorization = Schema.Literal("flag", "confirmation")
/**
 * Who allowed a continuation.
 *
 * @since 0.1.0
 * @category models
 */
export type Authorization = typeof Authorization.Type

/**
 * Every gate holds and the continuation is allowed (by the flag or by confirmation): execution may proceed.
 *
 * @since 0.1.0
 * @category models
 */
export class Continue extends Schema.TaggedClass<Continue>()("Continue", {
  candidate: ContinuationCandidate,
  authorizedBy: Authorization
}) {}

/**
 * Every gate holds, but the flag is off and no person confirmed: the host must not continue on its own. Not a park
 * (nothing is wrong with the run); asking again with `confirmed: true` gives `Continue`.
 *
 * @since 0.1.0
 * @category models
 */
export class AwaitingConfirmation extends Schema.TaggedClass<AwaitingConfirmation>()("AwaitingConfirmation", {
  candidate: ContinuationCandidate
}) {}

/**
 * At least one gate fails: every failing gate's finding, in gate-table order, and the next step.
 *
 * @since 0.1.0
 * @category models
 */
export class Park extends Schema.TaggedClass<Park>()("Park", {
  runId: Schema.String,
  findings: Schema.Data(Schema.Array(ParkFinding)),
  nextStep: NextStep,
  /** The source's committed high-water, when its ledger could be read. */
  highWater: Schema.optionalWith(HighWater, { exact: true })
}) {}

/**
 * The planner's result.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ContinuationPlan = Schema.Union(Continue, AwaitingConfirmation, Park)
/**
 * The planner's result.
 *
 * @since 0.1.0
 * @category models
 */
export type ContinuationPlan = typeof ContinuationPlan.Type

/**
 * The distinct reasons of a plan (empty unless it parks), in gate-table order.
 *
 * @since 0.1.0
 * @category models
 */
export const reasonsOf = (plan: ContinuationPlan): ReadonlyArray<ParkReason> => {
  if (plan._tag !== "Park") return []
  const seen = new Set(plan.findings.map((f) => f.reason))
  return PARK_REASONS.filter((r) => seen.has(r))
}

/**
 * A run's committed rows as the caller read them, or why they could not be read.
 *
 * @since 0.1.0
 * @category models
 */
export type RunRows =
  | { readonly _tag: "Committed"; readonly rows: Iterable<PrefixRow> }
  | {
    readonly _tag: "Unreadable"
    readonly reason: "source_run_unreadable" | "runtime_ledger_unreadable"
    /** A stable code: `run_not_found`, `store_read_failed`, or the `LedgerCorruption` reason. */
    readonly detail: string
  }

/**
 * Rows that were read.
 *
 * @since 0.1.0
 * @category models
 */
export const committed = (rows: Iterable<PrefixRow>): RunRows => ({ _tag: "Committed", rows })

/**
 * The typed read failures `unreadable` maps (by `_tag`; a `LedgerCorruption` carries its `reason`).
 *
 * @since 0.1.0
 * @category models
 */
export type ReadFailure =
  | { readonly _tag: "RunNotFound" }
  | { readonly _tag: "WorkspaceNotFound" }
  | { readonly _tag: "StoreReadFailed" }
  | { readonly _tag: "LedgerCorruption"; readonly reason: string }

/**
 * Rows that could not be read: a missing run or workspace is `source_run_unreadable`, anything else the ledger's.
 *
 * @since 0.1.0
 * @category models
 */
export const unreadable = (failure: ReadFailure): RunRows => {
  switch (failure._tag) {
    case "RunNotFound":
      return { _tag: "Unreadable", reason: "source_run_unreadable", detail: "run_not_found" }
    case "WorkspaceNotFound":
      return { _tag: "Unreadable", reason: "source_run_unreadable", detail: "workspace_not_found" }
    case "StoreReadFailed":
      return { _tag: "Unreadable", reason: "runtime_ledger_unreadable", detail: "store_read_failed" }
    case "LedgerCorruption":
      return { _tag: "Unreadable", reason: "runtime_ledger_unreadable", detail: failure.reason }
  }
}

/**
 * One run of the lineage: its header (absent for an unmanaged run) and its committed rows.
 *
 * @since 0.1.0
 * @category models
 */
export interface Generation {
  readonly header: RunHeader | undefined
  readonly rows: RunRows
}

/**
 * A durable claim on the source run, with the header of the continuation run it created (absent if none exists).
 *
 * @since 0.1.0
 * @category models
 */
export interface ClaimFact {
  readonly claim: ContinuationClaim
  readonly continuation: RunHeader | undefined
}

/**
 * Everything the planner decides from: durable facts, host facts, the flag and the person's confirmation.
 *
 * @since 0.1.0
 * @category models
 */
export interface PlannerInput {
  /** The run to continue. */
  readonly runId: string
  /** The source run's header and rows. */
  readonly source: Generation
  /**
   * The ancestors the source's `continuationSource` links lead to, in any order, one per runId (headers and rows).
   * An ancestor the links name but this list lacks parks with `runtime_lineage_missing`.
   */
  readonly ancestors: ReadonlyArray<Generation>
  /** The claims whose `sourceRunId` is the source run (any high-water), with their continuation headers. */
  readonly claims: ReadonlyArray<ClaimFact>
  /** The high-water the caller expects (execution's revalidation); none at first planning. */
  readonly expectedHighWater?: ExpectedHighWaterInput
  readonly host: HostFacts
  /** `MAKA_RUNTIME_SAFE_BOUNDARY_RESUME=1`: the host may continue an eligible run on its own. */
  readonly enabled: boolean
  /** A person confirmed this continuation (`resume --yes`, or `confirmed: true` in the API). */
  readonly confirmed: boolean
}
