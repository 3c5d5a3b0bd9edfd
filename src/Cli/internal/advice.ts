// The CLI's advice (docs/recovery.md): the run headers, whether a live host holds the owner lock, and the dispatches
// of blocked operations, gathered read-only for `RecoveryState`; every verb prints the steps it returns.
import * as Effect from "effect/Effect"
import type { HeaderFacts, RunState, StoreKind, WorkspaceState } from "../../Domain/RecoveryState.js"
import * as Inspect from "../../Programs/InspectWorkspace.js"
import type { InspectOptions, WorkspaceInspection } from "../../Programs/InspectWorkspace.js"
import * as States from "../../Programs/RecoveryStates.js"
import { RunHeaderStore } from "../../Services/RunHeaderStore.js"
import { withBackend, withStore } from "./backend.js"
import type { StoreSlot } from "./common.js"
import { escapeTerminal, human } from "./terminalText.js"
import type { HintContext } from "./nextCommand.js"
import { stepJson, stepText } from "./nextCommand.js"
import { toolOrigins } from "./toolOrigins.js"

/**
 * What the advice needs beside the inspection: the headers, the owner lock's liveness, the blocked dispatches.
 *
 * @since 0.1.0
 * @category models
 */
export interface AdviceFacts {
  readonly headers: ReadonlyArray<HeaderFacts>
  readonly ownerLive: boolean
}

/**
 * Reads the run headers and probes the owner lock of a workspace, read-only (`probeOwner`: only when some run is
 * open or blocked, since only then can it change the advice). A header store that cannot be read gives no headers.
 *
 * @since 0.1.0
 * @category cli
 */
export const adviceFacts = (slot: StoreSlot, workspace: string, probeOwner: boolean) =>
  withBackend({ ...slot }, { workspace, readOnly: true }, (backend) =>
    Effect.gen(function*() {
      const headers = yield* backend.headers(Effect.flatMap(RunHeaderStore, (h) => h.list())).pipe(
        Effect.orElseSucceed(() => [] as ReadonlyArray<HeaderFacts>)
      )
      const ownerLive = probeOwner ? yield* backend.ownerLive : false
      return { headers, ownerLive } satisfies AdviceFacts
    })).pipe(Effect.orElseSucceed((): AdviceFacts => ({ headers: [], ownerLive: false })))

/**
 * Whether an inspection has a run whose advice depends on a live host (open, or blocked).
 *
 * @since 0.1.0
 * @category cli
 */
export const needsOwnerProbe = (inspection: WorkspaceInspection): boolean =>
  inspection.runs.some((run) =>
    (run.plan !== undefined && (run.status === "open" || run.decision === "blocked")) ||
    // A damaged run's way out needs the exclusive owner lock: whether a host holds it decides the first step.
    run.error !== undefined
  )

/**
 * The store kind of a slot, for `RecoveryState`.
 *
 * @since 0.1.0
 * @category cli
 */
export const storeKind = (slot: StoreSlot): StoreKind => slot.store ?? "sqlite"

/**
 * The lines a person reads under a table: each pending run's state, its stuck tools, and its one next step.
 *
 * @since 0.1.0
 * @category cli
 */
export const adviceText = (
  state: WorkspaceState,
  context: HintContext,
  /** Lines shown under a run's state before its next step (`inspect`: the plan's directive). */
  details: ReadonlyMap<string, ReadonlyArray<string>> = new Map()
): string => {
  const lines: Array<string> = []
  for (const run of state.runs) {
    if (run.state === "abandoned") {
      lines.push(human`run ${run.runId}: abandoned by ${run.abandonedBy!.join(", ")}` + " (settled; a new turn may start)")
      continue
    }
    if (run.person._tag === "Nothing") continue
    lines.push(human`run ${run.runId}: ${run.state}: ${run.summary}`)
    for (const line of details.get(run.runId) ?? []) lines.push(`  ${escapeTerminal(line)}`)
    lines.push(`  next: ${stepText(run.person, context)}`)
  }
  if (lines.length === 0) return ""
  if (context.note !== undefined) lines.push(human`(${context.note})`)
  return `\n${lines.join("\n")}\n`
}

/**
 * A run's state as `--json` carries it: state, verdict, summary and `next` for a person and for a host.
 *
 * @since 0.1.0
 * @category cli
 */
export const runStateJson = (run: RunState, context: HintContext) => ({
  state: run.state,
  verdict: run.verdict,
  summary: run.summary,
  ...(run.abandonedBy !== undefined ? { abandonedBy: run.abandonedBy } : {}),
  ...(run.continuedBy !== undefined ? { continuedBy: run.continuedBy } : {}),
  stuck: run.stuck,
  next: { person: stepJson(run.person, context), host: stepJson(run.host, context) }
})

/**
 * Inspects a workspace read-only and folds its runs' states (docs/recovery.md): what `inspect` prints, and what every
 * other verb prints as its next step after it acted.
 *
 * @since 0.1.0
 * @category cli
 */
export const gatherAdvice = (slot: StoreSlot, workspace: string, options: InspectOptions = {}) =>
  Effect.gen(function*() {
    const { dispatches, inspection, origins } = yield* withStore(
      slot,
      { workspace, readOnly: true },
      // The dispatches of the blocked operations, and where their calls were sent, are read in the same open.
      Effect.flatMap(Inspect.inspectWorkspace(options), (inspection) =>
        Effect.zipWith(
          States.readDispatches(inspection),
          toolOrigins(inspection),
          (dispatches, origins) => ({ inspection, dispatches, origins })
        ))
    )
    const facts = yield* adviceFacts(slot, workspace, needsOwnerProbe(inspection))
    const state = States.recoveryStates(inspection, facts.headers, { ownerLive: facts.ownerLive, store: storeKind(slot), dispatches })
    return { inspection, state, origins }
  })

/**
 * The advice after a verb acted: the pending runs' next steps (or that the workspace is settled), never failing.
 *
 * @since 0.1.0
 * @category cli
 */
export const adviceAfter = (slot: StoreSlot, workspace: string, context: HintContext, runId?: string) =>
  gatherAdvice(slot, workspace, runId !== undefined ? { runId } : {}).pipe(
    Effect.map(({ state }) => {
      const text = adviceText(state, context)
      return {
        state,
        text: text.length > 0 ? text : `\nthe workspace is settled (${state.verdict}): nothing is left to do\n`
      }
    }),
    Effect.option
  )

/**
 * The pending runs' next steps as a verb's `--json` carries them (`[{ runId, state, next: { person, host } }]`).
 *
 * @since 0.1.0
 * @category cli
 */
export const nextJson = (state: WorkspaceState, context: HintContext) =>
  state.pending.map((run) => ({ runId: run.runId, state: run.state, next: { person: stepJson(run.person, context), host: stepJson(run.host, context) } }))
