// Gathers the continuation planner's input (docs/spec/04-continuation.md "Planning") from durable state and the host: the source run's
// rows, its header, its claims, its lineage, the host facts, the flag (through Config) and the person's confirmation.
import * as Chunk from "effect/Chunk"
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import {
  type ClaimFact,
  committed,
  type ContinuationPlan,
  type Generation,
  type HostFacts,
  MAX_GENERATIONS,
  type PlannerInput,
  type RunRows,
  unreadable
} from "../Domain/ContinuationPlan.js"
import { PlanFingerprint } from "../Domain/ContinuationOutcome.js"
import * as HighWater from "../Domain/HighWater.js"
import { RunId } from "../Domain/Ids.js"
import type { RunHeader } from "../Domain/RunHeader.js"
import type { CommittedRow, RuntimeEvent, TerminalStatus } from "../Domain/RuntimeEvent.js"
import { ContinuationSafetyInspector } from "../Services/ContinuationSafetyInspector.js"
import { RunHeaderStore } from "../Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type { WorkspaceIdentityError } from "../Services/WorkspaceIdentity.js"

/**
 * The environment variable of the flag, as the article seed names it: `1` lets a host continue an eligible run on its own (docs/spec/04-continuation.md).
 *
 * @since 0.1.0
 * @category constants
 */
export const FLAG = "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME"

/**
 * The project's own name of the same flag, accepted beside `FLAG` with the same meaning.
 *
 * @since 0.1.0
 * @category constants
 */
export const FLAG_ALIAS = "RUNTIME_RESUME_SAFE_BOUNDARY_RESUME"

const flagValue = (name: string): Config.Config<string | undefined> =>
  Config.string(name).pipe(Config.option, Config.map((value) => value._tag === "Some" ? value.value : undefined))

/**
 * The flag, read through `Config` from `RUNTIME_RESUME_SAFE_BOUNDARY_RESUME` or `MAKA_RUNTIME_SAFE_BOUNDARY_RESUME`:
 * on only when at least one of them is set and every one that is set is exactly `1`. Absent is off; so is any other
 * value, and so are the two set to different values (it fails closed: the host then waits for a person).
 *
 * @since 0.1.0
 * @category programs
 */
export const enabledConfig: Config.Config<boolean> = Config.all([flagValue(FLAG), flagValue(FLAG_ALIAS)]).pipe(
  Config.map((values) => {
    const set = values.filter((value): value is string => value !== undefined)
    return set.length > 0 && set.every((value) => value === "1")
  })
)

/** Rows per page when a run is read (and verified) for planning. */
const PAGE = 1000

/**
 * Options of `gather`.
 *
 * @since 0.1.0
 * @category models
 */
export interface GatherOptions {
  /** A person confirmed this continuation (`resume --yes`, or `confirmed: true` in the API). */
  readonly confirmed: boolean
  /** The high-water the caller expects of the source (execution's revalidation). */
  readonly expectedHighWater?: HighWater.ExpectedHighWaterInput
}

/**
 * The planner's input and what was read to build it: the committed rows of each readable generation (by runId),
 * from which execution takes the replay's events.
 *
 * @since 0.1.0
 * @category models
 */
export interface GatheredFacts {
  readonly input: PlannerInput
  readonly rowsByRun: ReadonlyMap<string, ReadonlyArray<CommittedRow>>
}

/**
 * Errors `gather` fails with: the workspace marker is malformed or unreadable, or the flag's config is invalid.
 *
 * @since 0.1.0
 * @category models
 */
export type GatherError = WorkspaceIdentityError | ConfigError.ConfigError

// A header store that cannot be read leaves nothing managed for sure: the source's ledger counts as unreadable.
const HEADERS_UNREADABLE: RunRows = { _tag: "Unreadable", reason: "runtime_ledger_unreadable", detail: "run_headers_unreadable" }

const parentOf = (header: RunHeader | undefined): string | undefined =>
  header?.continuationSource?.runId ?? header?.parentRunId

/**
 * Gathers the planner's input for continuing `runId` in `workspace`. Each run is read through `readRunPages` and
 * verified as it streams; the rows are kept, as the planner and the replay need them. A store read error becomes the
 * planner's `unreadable(...)` fact; a header store that cannot be read makes the source unreadable
 * (`run_headers_unreadable`), so the plan parks rather than trusting a partial view of headers or claims. The
 * lineage is followed through `continuationSource` (then `parentRunId`) up to 64 generations, stopping at a cycle
 * or a run without a header (the planner reports both). Never writes.
 *
 * @since 0.1.0
 * @category programs
 */
export const gather = Effect.fn("ContinuationFacts.gather")(function*(
  workspace: string,
  runId: string,
  options: GatherOptions
) {
  const store = yield* RuntimeEventStore
  const headers = yield* RunHeaderStore
  const inspector = yield* ContinuationSafetyInspector
  const rowsByRun = new Map<string, ReadonlyArray<CommittedRow>>()
  let headersUnreadable = false

  // A run's rows, kept for the replay; a read error becomes the planner's `unreadable(...)` fact.
  const readRun = (id: string): Effect.Effect<RunRows> =>
    Stream.runCollect(store.readRunPages(RunId.make(id), PAGE)).pipe(
      Effect.map((chunk) => {
        const rows = Chunk.toReadonlyArray(chunk)
        rowsByRun.set(id, rows)
        return committed(rows)
      }),
      Effect.catchAll((error) => Effect.succeed(unreadable(error)))
    )
  const headerOf = (id: string): Effect.Effect<RunHeader | undefined> =>
    headers.get(RunId.make(id)).pipe(
      Effect.map(Option.getOrUndefined),
      Effect.catchAll(() => Effect.sync(() => {
        headersUnreadable = true
        return undefined
      }))
    )

  const sourceHeader = yield* headerOf(runId)
  const sourceRows = yield* readRun(runId)

  // The claims on the source run, each with its continuation's header.
  const claims: Array<ClaimFact> = []
  const stored = yield* headers.claims(RunId.make(runId)).pipe(
    Effect.catchAll(() => Effect.sync(() => {
      headersUnreadable = true
      return []
    }))
  )
  for (const claim of stored) claims.push({ claim, continuation: yield* headerOf(claim.continuationRunId) })

  // The lineage, newest first: at most 63 ancestors (the planner flags a 64th generation that still has a parent).
  const ancestors: Array<Generation> = []
  const visited = new Set<string>([runId])
  for (let parentId = parentOf(sourceHeader); parentId !== undefined && ancestors.length < MAX_GENERATIONS - 1;) {
    if (visited.has(parentId)) break
    visited.add(parentId)
    const header = yield* headerOf(parentId)
    if (header === undefined) break
    ancestors.push({ header, rows: yield* readRun(parentId) })
    parentId = parentOf(header)
  }

  const host = yield* inspector.inspect(workspace)
  const enabled = yield* enabledConfig
  const input: PlannerInput = {
    runId,
    source: { header: sourceHeader, rows: headersUnreadable ? HEADERS_UNREADABLE : sourceRows },
    ancestors,
    claims,
    ...(options.expectedHighWater !== undefined ? { expectedHighWater: options.expectedHighWater } : {}),
    host,
    enabled,
    confirmed: options.confirmed
  }
  const facts: GatheredFacts = { input, rowsByRun }
  return facts
})

/** The committed high-water of rows read whole (`{ 0, d(0) }` for none). */
const highWaterOf = (runId: string, rows: ReadonlyArray<CommittedRow>): HighWater.HighWater => {
  const last = rows[rows.length - 1]
  return last === undefined ? HighWater.empty(runId) : new HighWater.HighWater({ seq: last.seq, digest: last.digest }, true)
}

const terminalOf = (rows: ReadonlyArray<CommittedRow>): TerminalStatus | undefined => {
  for (let i = rows.length - 1; i >= 0; i--) {
    const body = rows[i]!.event.body
    if (body._tag === "RunTerminated") return body.status
  }
  return undefined
}

/**
 * The facts a plan was made from, as execution revalidates them (see `PlanFingerprint`).
 *
 * @since 0.1.0
 * @category programs
 */
export const fingerprintOf = (facts: GatheredFacts, plan: ContinuationPlan): PlanFingerprint => {
  const input = facts.input
  const rows = input.source.rows._tag === "Committed" ? facts.rowsByRun.get(input.runId) : undefined
  const terminal = rows !== undefined ? terminalOf(rows) : undefined
  const host: HostFacts = input.host
  return new PlanFingerprint({
    runId: input.runId,
    ...(rows !== undefined ? { sourceHighWater: highWaterOf(input.runId, rows) } : {}),
    ...(input.source.header !== undefined ? { sourceStatus: input.source.header.status } : {}),
    ...(terminal !== undefined ? { terminalStatus: terminal } : {}),
    ...(plan._tag !== "Park" ? { replay: plan.candidate.replay } : {}),
    ...(host.workspaceId !== undefined ? { workspaceId: host.workspaceId } : {}),
    toolCatalog: Data.array([...new Set(host.toolCatalog)].sort()),
    ...(host.toolFingerprints !== undefined ? { toolFingerprints: host.toolFingerprints } : {}),
    backgroundSettled: host.backgroundSettled
  })
}

/**
 * The events of a plan's replay, oldest generation first, in ledger order, taken from the rows `gather` read. A ref
 * whose row is missing, or holds another event, is `undefined` in the result: the caller treats it as a changed replay.
 *
 * @since 0.1.0
 * @category programs
 */
export const replayEvents = (
  facts: GatheredFacts,
  replay: ReadonlyArray<{ readonly runId: string; readonly refs: ReadonlyArray<{ readonly seq: number; readonly id: string }> }>
): ReadonlyArray<RuntimeEvent> | undefined => {
  const events: Array<RuntimeEvent> = []
  for (const segment of replay) {
    const rows = facts.rowsByRun.get(segment.runId)
    if (rows === undefined) return undefined
    for (const ref of segment.refs) {
      const row = rows[ref.seq - 1]
      if (row === undefined || row.seq !== ref.seq || row.event.id !== ref.id) return undefined
      events.push(row.event)
    }
  }
  return events
}
