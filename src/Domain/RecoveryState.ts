// The state machine of recovery (docs/recovery.md): one pure function from what is known about a run to its state,
// the word it gives the workspace, and the ONE next step for a person and for a host. Every verb takes its advice here.
import type { RecoveryMode } from "./RuntimeEvent.js"

/**
 * Which store holds the workspace (the next commands name `--store postgres`; JSONL and SQLite differ in their exits).
 *
 * @since 0.1.0
 * @category models
 */
export type StoreKind = "sqlite" | "jsonl" | "postgres" | "memory"

/**
 * The word a run gives the workspace (the five words of docs/spec/02-resume-plan.md; the same literals as `Decide.Decision`).
 *
 * @since 0.1.0
 * @category models
 */
export type Verdict = "safe_replay" | "blocked" | "completed" | "indeterminate" | "corruption"

/**
 * The verbs a next step can name.
 *
 * @since 0.1.0
 * @category models
 */
export type RecoveryVerb = "inspect" | "verify" | "repair" | "reconcile" | "resolve" | "resume"

/**
 * A command to type: the verb and its arguments after the verb (never shell text). The store flags (`--store …`,
 * `--pg-url …`) and the workspace path are not in `args`: the caller renders them (`Cli/internal/nextCommand.ts`).
 * `choices`, when present, are the alternatives a person picks one of (each a full `args`); `args` is the first.
 *
 * @since 0.1.0
 * @category models
 */
export interface NextCommand {
  readonly _tag: "Command"
  readonly verb: RecoveryVerb
  readonly args: ReadonlyArray<string>
  readonly choices?: ReadonlyArray<ReadonlyArray<string>>
  /** One sentence: what the command does here. */
  readonly why: string
}

/**
 * A step no command performs (a host's start, a wait, a manual move), said as one sentence.
 *
 * @since 0.1.0
 * @category models
 */
export interface NextInstruction {
  readonly _tag: "Instruction"
  readonly text: string
}

/**
 * Nothing is left to do for this run.
 *
 * @since 0.1.0
 * @category models
 */
export interface NothingToDo {
  readonly _tag: "Nothing"
  readonly text: string
}

/**
 * The one next step: a command, an instruction, or nothing.
 *
 * @since 0.1.0
 * @category models
 */
export type NextStep = NextCommand | NextInstruction | NothingToDo

/**
 * Every state a run (or, for the file-level ones, the whole workspace) can be in. See docs/recovery.md for how each
 * is recognised and left.
 *
 * @since 0.1.0
 * @category models
 */
export type RecoveryStateName =
  | "completed" //             sealed completed, nothing unsettled
  | "replayable" //            nothing unsettled, not completed: a host may continue it
  | "open_live" //             not sealed, and a live host holds the owner lock
  | "open_dead" //             not sealed, managed, no live host: startup repair seals it
  | "unmanaged" //             blocked, no run header: `repair --adopt` writes one from the ledger's facts
  | "unsettled" //             sealed, an operation's outcome is unknown (indeterminate)
  | "parked" //                sealed, an operation parked by reconcile (or a bundle) for a person
  | "awaiting_continuation" // sealed, every operation settled, a person's decision among them, not continued yet
  | "abandoned" //             every unsettled operation abandoned by a person (resolve --abort)
  | "continued" //             a live continuation run carries this turn on
  | "corrupt" //               the run's rows break a rule of docs/spec/01-ledger.md
  | "derived_mismatch" //      SQLite/PostgreSQL derived rows disagree with the events
  | "offset_mismatch" //       the high-water differs from the one the caller expected
  | "torn_tail" //             JSONL: an interrupted append left a partial tail
  | "unreadable_file" //       JSONL: the file holds lines that are not ledger rows at all (garbage, schema invalid)

/**
 * One operation as the state function needs it (a plan's `ToolOperation`, plus its dispatch when read).
 *
 * @since 0.1.0
 * @category models
 */
export interface OperationFacts {
  readonly callId: string
  readonly name: string
  readonly status: "succeeded" | "failed" | "indeterminate" | "not_dispatched" | "parked"
  readonly recovery?: {
    readonly disposition: "completed" | "parked"
    readonly reasonCode: string
    readonly provenance: { readonly kind: string; readonly actor: string }
  }
  /**
   * The operation's `ToolDispatched`, when it was read: its recovery mode, and whether the CLI itself can observe it
   * (a `runtime-resume/file-write@1` evidence). Absent for an operation never dispatched, or not read.
   */
  readonly dispatch?: { readonly mode: RecoveryMode; readonly cliObservable: boolean }
}

/**
 * A run's plan, as the state function needs it (a `ResumePlan` or its `PlanView`).
 *
 * @since 0.1.0
 * @category models
 */
export interface PlanFacts {
  readonly decision: "safe_replay" | "blocked"
  readonly terminal?: { readonly status: "completed" | "failed" | "cancelled" }
  readonly operations: ReadonlyArray<OperationFacts>
}

/**
 * The error planning failed with, as the state function needs it.
 *
 * @since 0.1.0
 * @category models
 */
export interface PlanErrorFacts {
  readonly _tag: "LedgerCorruption" | "RuntimeOffsetMismatch"
  readonly reason?: string
  readonly message: string
}

/**
 * A run header as the state function needs it (docs/spec/04-continuation.md).
 *
 * @since 0.1.0
 * @category models
 */
export interface HeaderFacts {
  readonly runId: string
  readonly status: "created" | "running" | "completed" | "failed" | "cancelled"
  readonly statusReason?: string
  readonly parentRunId?: string
  readonly continuationSource?: { readonly runId: string }
}

/**
 * A continuation naming this run (a header with it as `parentRunId` or `continuationSource`), with its own outcome.
 *
 * @since 0.1.0
 * @category models
 */
export interface ContinuationFacts {
  readonly header: HeaderFacts
  /** Whether the continuation run has committed events. */
  readonly hasEvents: boolean
}

/**
 * Everything `runState` looks at for one run.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunFacts {
  readonly runId: string
  /** The run's plan, or the error planning it failed with. */
  readonly planned: { readonly _tag: "Plan"; readonly plan: PlanFacts } | { readonly _tag: "Error"; readonly error: PlanErrorFacts }
  /** The run's header; absent: the run is unmanaged. */
  readonly header?: HeaderFacts
  /** The headers naming this run as parent or continuation source. */
  readonly continuations: ReadonlyArray<ContinuationFacts>
  /** Whether a live host holds the workspace's owner lock right now (an exclusive verb would fail WorkspaceLocked). */
  readonly ownerLive: boolean
  readonly store: StoreKind
}

/**
 * The state of one run, the word it gives the workspace, and its one next step for a person and for a host.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunState {
  readonly runId: string
  readonly state: RecoveryStateName
  /** The run's own word (`decide` of its plan or error). */
  readonly decision: Verdict
  /** The word it contributes to the workspace: a continued run counts through its continuation, an abandoned one is settled. */
  readonly verdict: Verdict
  /** One sentence a person reads: what this state is. */
  readonly summary: string
  /** Who abandoned it (resolve --abort), when `state` is `abandoned`. */
  readonly abandonedBy?: ReadonlyArray<string>
  /** The continuation run(s) carrying it on, when `state` is `continued`. */
  readonly continuedBy?: ReadonlyArray<string>
  /** The operations that hold it (callId and tool name), for a blocked state. */
  readonly stuck: ReadonlyArray<{ readonly callId: string; readonly name: string }>
  /** The one next step for a person at a terminal. */
  readonly person: NextStep
  /** The one next step for a host (an embedding program). */
  readonly host: NextStep
}

/**
 * The workspace-level fold: its word, and the runs that are not settled.
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkspaceState {
  readonly verdict: Verdict
  readonly runs: ReadonlyArray<RunState>
  /** The runs whose state still asks for a step (their verdict is not completed/safe_replay, or their state is blocked). */
  readonly pending: ReadonlyArray<RunState>
}

/**
 * The exit code of a verdict: 0 safe_replay/completed, 1 blocked, 2 otherwise (docs/spec/06-cli.md).
 *
 * @since 0.1.0
 * @category models
 */
export const verdictExitCode = (verdict: Verdict): 0 | 1 | 2 =>
  verdict === "safe_replay" || verdict === "completed" ? 0 : verdict === "blocked" ? 1 : 2

/**
 * The words from the most severe down: a workspace answers the first that any of its runs answers.
 *
 * @since 0.1.0
 * @category constants
 */
export const VERDICT_SEVERITY: ReadonlyArray<Verdict> = ["corruption", "indeterminate", "blocked", "safe_replay", "completed"]

const moreSevere = (a: Verdict, b: Verdict): Verdict => VERDICT_SEVERITY.indexOf(a) <= VERDICT_SEVERITY.indexOf(b) ? a : b

/**
 * Whether a header is a continuation closed before its provider was called (docs/spec/04-continuation.md): it continues nothing.
 *
 * @since 0.1.0
 * @category models
 */
export const isAbandonedContinuation = (header: HeaderFacts): boolean =>
  header.status === "failed" && header.statusReason === "continuation_abandoned_before_provider_call"

const command = (verb: RecoveryVerb, args: ReadonlyArray<string>, why: string, choices?: ReadonlyArray<ReadonlyArray<string>>): NextCommand =>
  choices === undefined ? { _tag: "Command", verb, args, why } : { _tag: "Command", verb, args, choices, why }
const instruction = (text: string): NextInstruction => ({ _tag: "Instruction", text })
const nothing = (text: string): NothingToDo => ({ _tag: "Nothing", text })

/**
 * The three choices of `resolve` for one operation: edit (its result; `<result JSON>` is the placeholder a person
 * replaces), retry (outcome unknown to the model), abort.
 *
 * @since 0.1.0
 * @category models
 */
export const resolveChoices = (runId: string, callId: string): ReadonlyArray<ReadonlyArray<string>> => [
  ["--run", runId, "--call", callId, "--edit", "<result JSON>"],
  ["--run", runId, "--call", callId, "--retry"],
  ["--run", runId, "--call", callId, "--abort"]
]

/**
 * The text a person reads about how a resolved turn is continued: a command the CLI cannot perform is never offered.
 *
 * @since 0.1.0
 * @category constants
 */
export const CONTINUE_TEXT = "your host continues this turn on its next start " +
  "(with RUNTIME_RESUME_SAFE_BOUNDARY_RESUME=1), an @effect/ai host when it calls ai.continueConfirmed(runId) " +
  "or starts with confirmContinuation, or run `resume --yes` in a host that provides a ModelProvider " +
  "(the CLI has no model)"

const HOST_RESTART = "on its next start the host runs startup repair, then reconciles what its tools can observe"

const isUnsettledOp = (op: OperationFacts): boolean =>
  op.status === "indeterminate" || op.status === "not_dispatched" || op.status === "parked"

const FILE_LEVEL_TORN = /torn tail/i

/** The state of a run whose plan failed (corruption or an offset mismatch). */
const errorState = (facts: RunFacts, error: PlanErrorFacts): RunState => {
  const base = { runId: facts.runId, stuck: [] as ReadonlyArray<{ callId: string; name: string }> }
  if (error._tag === "RuntimeOffsetMismatch") {
    return {
      ...base,
      state: "offset_mismatch",
      decision: "indeterminate",
      verdict: "indeterminate",
      summary: `run ${facts.runId}: its high-water is not the one expected: ${error.message}`,
      person: command("inspect", ["--run", facts.runId], "show the run's current high-water, then expect that one"),
      host: instruction("re-read the run's high-water and plan against it")
    }
  }
  const decision: Verdict = "corruption"
  if (error.reason === "derived_mismatch" && (facts.store === "sqlite" || facts.store === "postgres")) {
    return {
      ...base,
      state: "derived_mismatch",
      decision,
      verdict: decision,
      summary: `run ${facts.runId}: the derived rows disagree with the events (the events are intact)`,
      person: command("repair", ["--rebuild-derived"], "rebuild the derived rows from the verified events, touching no event"),
      host: instruction("stop; a person runs `repair --rebuild-derived`")
    }
  }
  if (facts.store === "jsonl" && error.reason === "torn_row" && FILE_LEVEL_TORN.test(error.message)) {
    return {
      ...base,
      state: "torn_tail",
      decision,
      verdict: decision,
      summary: "the JSONL ledger ends in a torn tail (an interrupted append)",
      person: command("repair", ["--quarantine-torn-tail"], "copy the torn tail aside (kept) and cut it from the ledger"),
      host: instruction("stop; a person runs `repair --quarantine-torn-tail`")
    }
  }
  return fileState(facts.store, facts.runId, error)
}

/**
 * The state of a ledger that cannot be read as rows at all (or whose rows break a rule no verb can mend): on JSONL
 * the unreadable file is moved aside whole (kept) and the workspace starts clean; elsewhere a person moves the
 * database aside by hand. Also used for a workspace-level failure (`LedgerDamaged`, a whole-file corruption).
 *
 * @since 0.1.0
 * @category models
 */
export const fileState = (store: StoreKind, runId: string, error: { readonly _tag: string; readonly reason?: string; readonly message: string }): RunState => {
  const base = { runId, stuck: [] as ReadonlyArray<{ callId: string; name: string }>, decision: "corruption" as const, verdict: "corruption" as const }
  if (store === "jsonl" && error._tag === "LedgerCorruption" && error.reason === "torn_row" && FILE_LEVEL_TORN.test(error.message)) {
    return {
      ...base,
      state: "torn_tail",
      summary: "the JSONL ledger ends in a torn tail (an interrupted append)",
      person: command("repair", ["--quarantine-torn-tail"], "copy the torn tail aside (kept) and cut it from the ledger"),
      host: instruction("stop; a person runs `repair --quarantine-torn-tail`")
    }
  }
  if (store === "sqlite" && error._tag === "LedgerCorruption") {
    return {
      ...base,
      state: "corrupt",
      summary: `the SQLite ledger breaks a rule of docs/spec/01-ledger.md (${error.reason ?? error._tag}): ${error.message}`,
      person: command(
        "repair",
        ["--quarantine-ledger"],
        "move runtime.sqlite (with its -wal and -shm) aside whole (kept, never deleted) so the workspace starts clean"
      ),
      host: instruction("stop; a person runs `repair --quarantine-ledger`")
    }
  }
  if (store === "jsonl") {
    return {
      ...base,
      state: "unreadable_file",
      summary: `the JSONL ledger breaks a rule no repair can mend (${error.reason ?? error._tag}): ${error.message}`,
      person: command(
        "repair",
        ["--quarantine-ledger"],
        "move the unreadable ledger file aside whole (kept, never deleted) so the workspace starts clean"
      ),
      host: instruction("stop; a person runs `repair --quarantine-ledger`")
    }
  }
  const file = store === "sqlite" ? "runtime.sqlite (with its -wal and -shm files)" : "the workspace's rows"
  return {
    ...base,
    state: "corrupt",
    summary: `the ledger breaks a rule of docs/spec/01-ledger.md (${error.reason ?? error._tag}): ${error.message}`,
    person: instruction(
      `keep the evidence: move ${file} aside (for example into a folder named unreadable-<date>), then start clean; ` +
        "no verb rewrites a committed row"
    ),
    host: instruction("stop; a person moves the damaged ledger aside")
  }
}

/**
 * The state of one run (docs/recovery.md): pure, total, deterministic. It never names a verb that would refuse in
 * that state: an exclusive verb (repair, reconcile) is not offered while a live host holds the owner lock.
 *
 * @since 0.1.0
 * @category models
 */
export const runState = (facts: RunFacts): RunState => {
  if (facts.planned._tag === "Error") return errorState(facts, facts.planned.error)
  const plan = facts.planned.plan
  const runId = facts.runId
  const decision: Verdict = plan.terminal?.status === "completed" && plan.decision === "safe_replay" ? "completed" : plan.decision
  const unsettled = plan.operations.filter(isUnsettledOp)
  // The operations that hold the run: unsettled, and not abandoned by a person (an abandoned one holds nothing).
  const stuck = unsettled.filter((op) => !(op.status === "parked" && op.recovery?.reasonCode === "manual_abandon"))
    .map((op) => ({ callId: op.callId, name: op.name }))
  const sealed = plan.terminal !== undefined
  const live = facts.continuations.filter((c) => c.hasEvents && !isAbandonedContinuation(c.header)).map((c) => c.header.runId)

  // A continued run counts through its continuation (its own corruption would have been an Error above).
  if (live.length > 0 && decision !== "completed") {
    return {
      runId,
      state: "continued",
      decision,
      verdict: "completed",
      summary: `run ${runId} was continued by ${live.join(", ")}`,
      continuedBy: live,
      stuck: [],
      person: nothing(`continued by ${live.join(", ")}: see that run`),
      host: nothing("continued: nothing to do for this run")
    }
  }
  if (decision === "completed") {
    return {
      runId,
      state: "completed",
      decision,
      verdict: decision,
      summary: `run ${runId} completed`,
      stuck: [],
      person: nothing("completed"),
      host: nothing("completed")
    }
  }
  // Every unsettled operation abandoned by a person: settled for the workspace.
  if (unsettled.length > 0 && unsettled.every((op) => op.status === "parked" && op.recovery?.reasonCode === "manual_abandon")) {
    const by: Array<string> = []
    for (const op of unsettled) if (!by.includes(op.recovery!.provenance.actor)) by.push(op.recovery!.provenance.actor)
    return {
      runId,
      state: "abandoned",
      decision,
      verdict: "completed",
      summary: `run ${runId} was abandoned by ${by.join(", ")}`,
      abandonedBy: by,
      stuck: [],
      person: nothing(`abandoned by ${by.join(", ")}: the turn stays stopped; a new turn may start`),
      host: nothing("abandoned by a person: start a new turn")
    }
  }
  if (!sealed && facts.ownerLive) {
    return {
      runId,
      state: "open_live",
      decision,
      verdict: decision,
      summary: `run ${runId} is open and a host is running this workspace (it holds the owner lock)`,
      stuck,
      person: instruction(
        "a host is running: wait for its turn to end, or stop the host; then run inspect again (repair would fail WorkspaceLocked)"
      ),
      host: instruction("carry on: this run is yours")
    }
  }
  if (facts.header === undefined) {
    if (decision === "safe_replay") {
      return {
        runId,
        state: "replayable",
        decision,
        verdict: decision,
        summary: `run ${runId} has nothing unsettled (no run header: a host without headers wrote it)`,
        stuck: [],
        person: nothing("nothing blocks this run"),
        host: nothing("nothing blocks this run")
      }
    }
    return {
      runId,
      state: "unmanaged",
      decision,
      verdict: decision,
      summary: `run ${runId} has no run header (a host that does not manage its runs wrote it) and is blocked`,
      stuck,
      person: facts.ownerLive
        ? instruction("a host is running: stop it, then run `repair --adopt` (it needs the exclusive owner lock)")
        : command(
          "repair",
          ["--adopt"],
          sealed
            ? "write a run header from the ledger's facts, so reconcile and resolve can settle it"
            : "write a run header from the ledger's facts and seal the run (RunTerminated failed/process_interrupted)"
        ),
      host: instruction("a host that manages runs writes a header when it opens one; a person runs `repair --adopt`")
    }
  }
  if (!sealed) {
    return {
      runId,
      state: "open_dead",
      decision,
      verdict: decision,
      summary: `run ${runId} is open and no host holds the workspace: it was interrupted`,
      stuck,
      person: command("repair", [], "seal the interrupted run from its durable facts (RunTerminated failed/process_interrupted)"),
      host: instruction(HOST_RESTART)
    }
  }
  if (unsettled.length === 0) {
    const decided = plan.operations.some((op) => op.recovery?.disposition === "completed")
    return {
      runId,
      state: decided ? "awaiting_continuation" : "replayable",
      decision,
      verdict: decision,
      summary: decided
        ? `run ${runId}: every operation is settled (a decision was recorded); the turn waits to be continued`
        : `run ${runId} stopped with nothing unsettled; a host may continue it`,
      stuck: [],
      person: decided ? instruction(CONTINUE_TEXT) : nothing("nothing blocks this run; a host may continue it"),
      host: command("resume", ["--run", runId, "--yes"], "continue the turn (the host's ModelProvider answers it)")
    }
  }
  // Sealed with unsettled operations: parked ones need a person; indeterminate ones reconcile first when the CLI can.
  const first = unsettled.find((op) => !(op.status === "parked" && op.recovery?.reasonCode === "manual_abandon"))!
  const parked = unsettled.filter((op) => op.status === "parked" && op.recovery?.reasonCode !== "manual_abandon")
  const open = unsettled.filter((op) => op.status !== "parked")
  const observable = open.find((op) => op.dispatch?.cliObservable === true)
  const hostTool = open.find((op) =>
    op.dispatch !== undefined && op.dispatch.cliObservable === false &&
    (op.dispatch.mode === "read_only" || op.dispatch.mode === "idempotent" || op.dispatch.mode === "reconcilable")
  )
  const state: RecoveryStateName = open.length > 0 ? "unsettled" : "parked"
  const target = observable ?? (parked[0] ?? first)
  const resolveStep = command(
    "resolve",
    resolveChoices(runId, target.callId)[0]!,
    `record a person's decision on ${target.name} (${target.callId}): edit its result, retry (outcome unknown to the model), or abort the turn`,
    resolveChoices(runId, target.callId)
  )
  const person: NextStep = observable !== undefined && !facts.ownerLive
    ? command("reconcile", ["--run", runId], `observe the file write of ${observable.name} (${observable.callId}) and settle it from its evidence`)
    : resolveStep
  return {
    runId,
    state,
    decision,
    verdict: decision,
    summary: state === "parked"
      ? `run ${runId}: ${parked.map((op) => `${op.name} (${op.callId}) parked: ${op.recovery?.reasonCode ?? "parked"}`).join("; ")}`
      : `run ${runId}: the outcome of ${open.map((op) => `${op.name} (${op.callId})`).join(", ")} is unknown`,
    stuck,
    person,
    host: hostTool !== undefined || observable !== undefined
      ? instruction(`${HOST_RESTART}; what it cannot settle waits for a person (resolve)`)
      : instruction("a person decides (resolve); the host continues the turn afterwards")
  }
}

/**
 * The workspace's word and its runs' states (docs/recovery.md, "The workspace"): the most severe verdict over its runs,
 * where a continued run counts through its continuation and an abandoned run is settled. No runs: `completed`.
 *
 * @since 0.1.0
 * @category models
 */
export const workspaceState = (
  states: ReadonlyArray<RunState>,
  /** Whether a live host holds the workspace's owner lock (`RunFacts.ownerLive`). */
  options: { readonly ownerLive?: boolean } = {}
): WorkspaceState => {
  let verdict: Verdict = "completed"
  for (const run of states) verdict = moreSevere(verdict, run.verdict)
  // The ledger first: while a run's rows cannot be read, a verb that reads the whole workspace (repair, reconcile,
  // resolve) refuses, so every other run waits for the ledger's own step.
  // The ledger's own step needs the exclusive owner lock: while a host runs (an `open_live` run), it is to stop first.
  const ledger = states.find((run) => LEDGER_STATES.has(run.state))
  const live = states.find((run) => run.state === "open_live") ?? (options.ownerLive === true ? { runId: "-" } : undefined)
  const runs = ledger === undefined
    ? states
    : states.map((run) =>
      LEDGER_STATES.has(run.state)
        ? live === undefined || run.person._tag !== "Command"
          ? run
          : { ...run, person: instruction(`a host is running${live.runId !== "-" ? ` (run ${live.runId})` : ""}: stop it, then run inspect again (the ledger's own step needs the exclusive owner lock)`) }
        : run.person._tag === "Nothing"
        ? run
        : {
          ...run,
          person: instruction(`first the ledger (run ${ledger.runId}: ${ledger.state}); then inspect again`),
          host: instruction("stop; a person settles the ledger first")
        }
    )
  const pending = runs.filter((run) => run.person._tag !== "Nothing")
  return { verdict, runs, pending }
}

// The states of a ledger no run-level verb can read past: their own step comes before any other run's.
const LEDGER_STATES: ReadonlySet<RunState["state"]> = new Set(["torn_tail", "unreadable_file", "corrupt"])

/**
 * The continuations naming each run (`parentRunId` or `continuationSource`), from every header of the workspace and
 * the runs that have events: the `continuations` of `RunFacts`.
 *
 * @since 0.1.0
 * @category models
 */
export const continuationsOf = (
  headers: ReadonlyArray<HeaderFacts>,
  withEvents: ReadonlySet<string>
): ReadonlyMap<string, ReadonlyArray<ContinuationFacts>> => {
  const out = new Map<string, Array<ContinuationFacts>>()
  for (const header of headers) {
    const sources = new Set<string>()
    if (header.parentRunId !== undefined) sources.add(header.parentRunId)
    if (header.continuationSource !== undefined) sources.add(header.continuationSource.runId)
    for (const source of sources) {
      const list = out.get(source) ?? []
      list.push({ header, hasEvents: withEvents.has(header.runId) })
      out.set(source, list)
    }
  }
  return out
}
