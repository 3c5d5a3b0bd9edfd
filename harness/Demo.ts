// The `runtime-resume demo` program (issues 5, 12): four crashes in fresh workspaces — SIGKILL in a tool (a park), after
// the tool result (continued), inside a file write after its rename (reconciled, continued; or diverged, edited, continued).
import * as Command from "@effect/platform/Command"
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import type { ContinuationPlan } from "../src/Domain/ContinuationPlan.js"
import { reasonsOf } from "../src/Domain/ContinuationPlan.js"
import { RunId } from "../src/Domain/Ids.js"
import type { CommittedRow } from "../src/Domain/RuntimeEvent.js"
import * as NodeContinuationSafetyInspector from "../src/Layers/NodeContinuationSafetyInspector.js"
import * as ScriptedModelProvider from "../src/Testing/ScriptedModelProvider.js"
import * as ContinuationExecutor from "../src/Programs/ContinuationExecutor.js"
import * as StartupRepair from "../src/Programs/StartupRepair.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import type { WorkspaceLock } from "../src/Services/WorkspaceLock.js"
import { WorkspaceOwner } from "../src/Services/WorkspaceOwner.js"
import {
  atLine,
  type CrashPoint,
  DEMO_CALL_ID,
  DEMO_RUN_ID,
  DEMO_TOOL_NAME,
  type DemoStore,
  type TurnContent,
  workspaceStores
} from "./DemoChild.js"
import { childArgv } from "./ChildScript.js"
import * as DemoSettle from "./DemoSettle.js"

// `node --import tsx DemoChild.ts` from the sources, `node DemoChild.js` compiled.
const CHILD_ARGV = childArgv(import.meta.url, "DemoChild")
const PROJECT_ROOT = fileURLToPath(new URL("..", import.meta.url))
const READY_TIMEOUT = Duration.seconds(60)
const EXIT_TIMEOUT = Duration.seconds(30)

/** The content of the demo turn: the prompt, the tool's note argument, its result, and the provider's reply. */
export interface DemoContent extends TurnContent {
  readonly reply: string
}

/** The content the demo seeds by default. */
export const DEFAULT_CONTENT: DemoContent = {
  prompt: "Write a note saying the build is green.",
  note: "the build is green",
  result: "note written",
  reply: "Done: the note is written."
}

/** The demo turn's content, a `Context.Reference` (the canary test seeds unique strings). */
export class DemoTurnContent extends Context.Reference<DemoTurnContent>()("runtime-resume/Demo/DemoTurnContent", {
  defaultValue: (): DemoContent => DEFAULT_CONTENT
}) {}

/** What a caller may observe of each story before its workspace is removed (tests read the ledger there). */
export interface DemoHooksShape {
  readonly beforeCleanup: (story: StoryName, workspace: string) => Effect.Effect<void>
}

/** The demo's hooks, a `Context.Reference` doing nothing by default. */
export class DemoHooks extends Context.Reference<DemoHooks>()("runtime-resume/Demo/DemoHooks", {
  defaultValue: (): DemoHooksShape => ({ beforeCleanup: () => Effect.void })
}) {}

/** The four stories. */
export type StoryName = "A" | "B" | "C" | "D"

/** Where a story's host is killed: the demo tool's points (A, B), or the built-in file write after its rename (C, D). */
export type StoryCrashPoint = CrashPoint | "file_write:after_rename"

/** How each story is told: where the child is killed, and how it must end. */
export const STORIES: ReadonlyArray<{ readonly name: StoryName; readonly crashAt: StoryCrashPoint; readonly expected: "parked" | "continued" }> = [
  { name: "A", crashAt: "in_implementation", expected: "parked" },
  { name: "B", crashAt: "after_t2", expected: "continued" },
  { name: "C", crashAt: "file_write:after_rename", expected: "continued" },
  { name: "D", crashAt: "file_write:after_rename", expected: "continued" }
]


/** One lifecycle event the continuation emitted (docs/spec/04-continuation.md "Observability"): its kind and its annotations. */
export interface LifecycleRecord {
  readonly kind: string
  readonly fields: Readonly<Record<string, string>>
}

/** How a story ended. */
export type Ending =
  | {
    readonly _tag: "Parked"
    readonly runId: string
    readonly reasons: ReadonlyArray<string>
    readonly nextStep: string
    /** The operation the park is about (from the ledger's `ToolDispatched`), and its call and tool. */
    readonly operationId: string | null
    readonly callId: string | null
    readonly toolName: string
  }
  | {
    readonly _tag: "Continued"
    readonly sourceRunId: string
    readonly continuationRunId: string
    readonly claimId: string
    readonly authorizedBy: string
    readonly firstEvent: string | null
    readonly lastEvent: string | null
    readonly terminalStatus: string | null
    readonly headerStatus: string | null
    readonly replayEvents: number
  }
  | { readonly _tag: "Failed"; readonly error: string; readonly message: string }

/** One story's result. `childLog` is every line the host child printed (stdout and stderr), never shown unless it failed. */
export interface StoryResult {
  readonly story: StoryName
  readonly crashAt: StoryCrashPoint
  readonly expected: "parked" | "continued"
  readonly killed: boolean
  readonly repair: ReadonlyArray<{ readonly runId: string; readonly action: string; readonly status: string; readonly statusReason?: string }>
  readonly plan: string | null
  readonly providerCalls: number
  readonly ending: Ending
  readonly lifecycle: ReadonlyArray<LifecycleRecord>
  readonly pass: boolean
  readonly problems: ReadonlyArray<string>
  readonly childLog: ReadonlyArray<string>
  /** C and D: someone else's change, what `reconcile` reported, the plan it left, and the person's `resolve`. */
  readonly settle?: Omit<DemoSettle.SettleSteps, "log">
  /** Where the workspace was left (`demo --keep DIR`), else absent. */
  readonly keptAt?: string
}

/** The whole demo: the folder it used (removed when it returns, unless kept), the store, and the four stories. */
export interface DemoResult {
  readonly workspaceRoot: string | null
  /** `demo --keep DIR`: the crashed workspaces left in DIR for a person (C: reconcile proves it; D: diverged). */
  readonly kept?: ReadonlyArray<string>
  readonly store: DemoStore
  readonly stories: ReadonlyArray<StoryResult>
  readonly pass: boolean
  readonly error?: { readonly _tag: string; readonly message: string }
}

/** What the demo needs: Node's platform (processes, files), the workspace lock and the owner lock. */
export type DemoRequirements = CommandExecutor.CommandExecutor | FileSystem.FileSystem | Path.Path | WorkspaceLock | WorkspaceOwner

// Records the continuation lifecycle events (log lines `continuation.<kind>`) with their annotations.
const lifecycleLogger = (out: Array<LifecycleRecord>) =>
  Logger.make(({ annotations, message }) => {
    const text = Array.isArray(message) ? message.map(String).join(" ") : String(message)
    if (!text.startsWith("continuation.")) return
    const fields: Record<string, string> = {}
    for (const [key, value] of HashMap.toEntries(annotations)) {
      if (key.startsWith("continuation.")) fields[key.slice("continuation.".length)] = String(value)
    }
    out.push({ kind: text.slice("continuation.".length), fields })
  })

const planLabel = (plan: ContinuationPlan): string =>
  plan._tag === "Park"
    ? `Park (${reasonsOf(plan).join(", ")}; next step ${plan.nextStep})`
    : plan._tag === "Continue"
    ? `Continue (authorized by ${plan.authorizedBy})`
    : "AwaitingConfirmation"

// Runs the host child until it prints its crash line, then SIGKILLs it. Returns whether it was killed there, and its output.
const crashChild = (store: DemoStore, workspace: string, point: CrashPoint, content: DemoContent) =>
  Effect.gen(function*() {
    const turn: TurnContent = { prompt: content.prompt, note: content.note, result: content.result }
    const proc = yield* Command.make(...CHILD_ARGV, store, workspace, point, JSON.stringify(turn)).pipe(
      Command.workingDirectory(PROJECT_ROOT),
      Command.start
    )
    const log: Array<string> = []
    const stderr = yield* proc.stderr.pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.runForEach((line) => Effect.sync(() => log.push(`stderr: ${line}`))),
      Effect.ignore,
      Effect.fork
    )
    const reached = yield* proc.stdout.pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.tap((line) => Effect.sync(() => log.push(`stdout: ${line}`))),
      Stream.filter((line) => line === atLine(point)),
      Stream.runHead,
      Effect.orElseSucceed(() => Option.none<string>()),
      Effect.timeout(READY_TIMEOUT),
      Effect.orElseSucceed(() => Option.none<string>())
    )
    // A real SIGKILL: no finalizer, no flush, the OS releases the child's locks.
    yield* proc.kill("SIGKILL").pipe(Effect.ignore)
    yield* proc.exitCode.pipe(Effect.timeout(EXIT_TIMEOUT), Effect.ignore)
    yield* stderr.await.pipe(Effect.timeout(EXIT_TIMEOUT), Effect.ignore)
    return { killed: Option.isSome(reached), log }
  }).pipe(Effect.scoped)

const tagsOf = (rows: ReadonlyArray<CommittedRow>) => rows.map((row) => row.event.body._tag)

// One story: the crash, startup repair under the exclusive owner lock, the plan (confirmed), execution, the ending.
// The crash (step 1) happens before, in `run`: the host child ran the turn and was SIGKILLed at the crash point.
const story = (
  store: DemoStore,
  workspace: string,
  spec: typeof STORIES[number],
  content: DemoContent,
  crash: { readonly killed: boolean; readonly log: ReadonlyArray<string> }
) =>
  Effect.gen(function*() {
    const problems: Array<string> = []
    const lifecycle: Array<LifecycleRecord> = []
    const owner = yield* WorkspaceOwner
    if (!crash.killed) problems.push(`the host child did not reach ${spec.crashAt}`)

    // 2. Startup repair under the exclusive owner lock (the dead child's shared hold died with it).
    const stores = workspaceStores(store, { workspace, readOnly: false })
    const report = yield* owner.withExclusive(workspace, Effect.provide(StartupRepair.repair, stores))
    const repair = report.repaired.map((r) => ({
      runId: r.runId,
      action: r.action,
      status: r.status,
      ...(r.statusReason !== undefined ? { statusReason: r.statusReason } : {})
    }))
    if (report.failed.length > 0) problems.push(`repair failed for ${report.failed.map((f) => `${f.runId}: ${f.error}`).join(", ")}`)

    // 3. The plan, as `resume --yes` makes it (a person confirmed), then execution with a scripted provider.
    const provider = ScriptedModelProvider.unsafeMake([ScriptedModelProvider.reply(content.reply)])
    const host = Layer.mergeAll(
      stores,
      NodeContinuationSafetyInspector.layer(NodeContinuationSafetyInspector.fixed([DEMO_TOOL_NAME], true)),
      ScriptedModelProvider.layerWith(provider)
    )
    const ending = yield* Effect.gen(function*() {
      const events = yield* RuntimeEventStore
      const headers = yield* RunHeaderStore
      const prepared = yield* ContinuationExecutor.prepare(workspace, DEMO_RUN_ID, { confirmed: true })
      const plan = prepared.plan
      const outcome = yield* ContinuationExecutor.execute(workspace, prepared, { confirmed: true })
      if (outcome._tag === "NotContinued" || plan._tag === "Park") {
        const source = yield* events.readRun(RunId.make(DEMO_RUN_ID))
        const dangling = plan._tag === "Park" ? plan.findings.find((f) => f.reason === "dangling_tool_state") : undefined
        const callId = dangling?.ref ?? null
        const dispatched = source.map((row) => row.event.body).find((body) => body._tag === "ToolDispatched" && body.callId === callId)
        const ending: Ending = {
          _tag: "Parked",
          runId: DEMO_RUN_ID,
          reasons: plan._tag === "Park" ? [...reasonsOf(plan)] : outcome._tag === "NotContinued" ? [outcome.reason] : [],
          nextStep: plan._tag === "Park" ? plan.nextStep : "-",
          operationId: dispatched?._tag === "ToolDispatched" ? dispatched.operationId : null,
          callId,
          toolName: DEMO_TOOL_NAME
        }
        return { plan: planLabel(plan), ending }
      }
      const run = yield* events.readRun(RunId.make(outcome.continuationRunId))
      const header = yield* headers.get(RunId.make(outcome.continuationRunId))
      const last = run[run.length - 1]?.event.body
      const ending: Ending = {
        _tag: "Continued",
        sourceRunId: outcome.sourceRunId,
        continuationRunId: outcome.continuationRunId,
        claimId: outcome.claimId,
        authorizedBy: outcome.authorizedBy,
        firstEvent: run[0]?.event.body._tag ?? null,
        lastEvent: last?._tag ?? null,
        terminalStatus: last?._tag === "RunTerminated" ? last.status : null,
        headerStatus: Option.isSome(header) ? header.value.status : null,
        replayEvents: provider.calls()[0]?.replay.length ?? 0
      }
      // The provider was sent the replay once, with the user message exactly once and first.
      const replay = provider.calls()[0]?.replay ?? []
      if (replay[0]?.body._tag !== "UserMessage" || replay.filter((e) => e.body._tag === "UserMessage").length !== 1) {
        problems.push(`the provider's replay is not one user message first: ${replay.map((e) => e.body._tag).join(", ")}`)
      }
      if (tagsOf(run).filter((tag) => tag === "UserMessage").length > 0) problems.push("the continuation run added the user message again")
      return { plan: planLabel(plan), ending }
    }).pipe(
      Effect.provide(host),
      Effect.provide(Logger.add(lifecycleLogger(lifecycle))),
      Effect.catchAll((error) => {
        const failed: Ending = { _tag: "Failed", error: error._tag, message: error.message }
        return Effect.succeed({ plan: null, ending: failed })
      })
    )

    // 4. The checks of the ending this story must have.
    const e = ending.ending
    const calls = provider.calls().length
    if (spec.expected === "parked") {
      if (e._tag !== "Parked") problems.push(`expected a park, got ${e._tag}`)
      else {
        if (!e.reasons.includes("dangling_tool_state")) problems.push(`the park's reasons are ${e.reasons.join(", ")}, not dangling_tool_state`)
        if (e.nextStep !== "resolve_tool_operation") problems.push(`the park's next step is ${e.nextStep}`)
        if (e.operationId === null || e.callId !== DEMO_CALL_ID) problems.push("the park does not name the tool operation")
      }
      if (calls !== 0) problems.push(`the provider was called ${calls} times on a park`)
    } else {
      if (e._tag !== "Continued") problems.push(`expected a continued turn, got ${e._tag}`)
      else {
        if (e.firstEvent !== "ContinuationStarted") problems.push(`the continuation's first event is ${e.firstEvent}`)
        if (e.terminalStatus !== "completed" || e.headerStatus !== "completed") {
          problems.push(`the continuation ended ${e.terminalStatus} with header ${e.headerStatus}`)
        }
      }
      if (calls !== 1) problems.push(`the provider was called ${calls} times, expected once`)
    }
    yield* (yield* DemoHooks).beforeCleanup(spec.name, workspace)
    const result: StoryResult = {
      story: spec.name,
      crashAt: spec.crashAt,
      expected: spec.expected,
      killed: crash.killed,
      repair,
      plan: ending.plan,
      providerCalls: calls,
      ending: e,
      lifecycle,
      pass: problems.length === 0,
      problems,
      childLog: crash.log
    }
    return result
  })

// Stories C and D (the crash already happened): repair, (D: someone else changes the file), reconcile, (D: a person's
// `resolve --edit`), then the confirmed continuation with the recovered (C) or edited (D) result.
const settleStory = (
  store: DemoStore,
  workspace: string,
  spec: typeof STORIES[number],
  content: DemoContent,
  crash: { readonly killed: boolean; readonly log: ReadonlyArray<string> }
) =>
  Effect.gen(function*() {
    const problems: Array<string> = []
    const lifecycle: Array<LifecycleRecord> = []
    const name = spec.name === "C" ? "C" : "D"
    if (!crash.killed) problems.push("the file-write child did not reach file_write:after_rename")
    const settled = yield* DemoSettle.settle(store, workspace, name, crash)
    problems.push(...settled.repairFailed.map((f) => `repair failed for ${f}`))
    const reconciled = settled.steps.reconcile
    const expectedReason = name === "C" ? "reconcile_matches_expected_state" : "reconcile_diverged"
    if (reconciled.length !== 1 || reconciled[0]!.reason !== expectedReason) {
      problems.push(`reconcile reported ${reconciled.map((r) => `${r.outcome} ${r.reason}`).join(", ") || "nothing"}, not ${expectedReason}`)
    }
    if (name === "D" && settled.steps.resolve?.reasonCode !== "manual_edit") problems.push("the person's edit was not recorded")
    const continued = yield* DemoSettle.continueSettled(store, workspace, content.reply).pipe(
      Effect.provide(Logger.add(lifecycleLogger(lifecycle)))
    )
    const calls = continued.provider.calls().length
    const o = continued.outcome
    const ending: Ending = o === null
      ? { _tag: "Parked", runId: DemoSettle.SETTLE_RUN_ID, reasons: [continued.plan], nextStep: "-", operationId: null, callId: DemoSettle.SETTLE_CALL_ID, toolName: DemoSettle.SETTLE_TOOL_NAME }
      : { _tag: "Continued", ...o }
    if (ending._tag !== "Continued") problems.push(`expected a continued turn, got ${continued.plan}`)
    else if (ending.terminalStatus !== "completed" || ending.headerStatus !== "completed") {
      problems.push(`the continuation ended ${ending.terminalStatus} with header ${ending.headerStatus}`)
    }
    if (calls !== 1) problems.push(`the provider was called ${calls} times, expected once`)
    // The provider saw the recovered result (C: the file-write result with the file's digest) or the person's edit (D).
    const marker = name === "C" ? "sha256" : "kept their version"
    if (continued.replayResponse === null || !continued.replayResponse.includes(marker)) {
      problems.push(`the provider's replay does not carry the ${name === "C" ? "recovered" : "edited"} result`)
    }
    yield* (yield* DemoHooks).beforeCleanup(spec.name, workspace)
    const { log: _log, ...rest } = settled.steps
    const steps = { ...rest, replayedResult: continued.replayResponse }
    const result: StoryResult = {
      story: spec.name,
      crashAt: spec.crashAt,
      expected: spec.expected,
      killed: crash.killed,
      repair: settled.repair,
      plan: continued.plan,
      providerCalls: calls,
      ending,
      lifecycle,
      pass: problems.length === 0,
      problems,
      childLog: crash.log,
      settle: steps
    }
    return result
  }).pipe(
    Effect.catchAll((error) =>
      Effect.succeed<StoryResult>({
        story: spec.name,
        crashAt: spec.crashAt,
        expected: spec.expected,
        killed: crash.killed,
        repair: [],
        plan: null,
        providerCalls: 0,
        ending: { _tag: "Failed", error: error._tag, message: error.message },
        lifecycle: [],
        pass: false,
        problems: [`${error._tag}: ${error.message}`],
        childLog: crash.log
      })
    )
  )

/** Why `demo --keep DIR` refused its folder (nothing was run). */
export class KeepRefused extends Error {
  readonly _tag = "KeepRefused"
}

// `--keep DIR`: crashes the file-write stories again into DIR/story-C and DIR/story-D and stops after startup repair
// (and, in D, someone else's change), so a person can walk inspect → reconcile → resolve → resume on them.
const keepWorkspaces = (store: DemoStore, given: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    // Absolute: the crash child runs in the project's folder, not the caller's (a relative DIR landed elsewhere).
    const dir = resolve(given)
    const owner = yield* WorkspaceOwner
    const exists = yield* fs.exists(dir)
    if (exists && (yield* fs.readDirectory(dir)).length > 0) {
      return yield* Effect.fail(new KeepRefused(`--keep ${dir}: the folder exists and is not empty; nothing was written. Name a new or empty folder.`))
    }
    yield* fs.makeDirectory(dir, { recursive: true, mode: 0o700 })
    const kept: Array<string> = []
    for (const name of ["C", "D"] as const) {
      const workspace = join(dir, `story-${name}`)
      yield* fs.makeDirectory(workspace, { mode: 0o700 })
      const crash = yield* DemoSettle.crashFileWrite(store, workspace)
      if (!crash.killed) return yield* Effect.fail(new KeepRefused(`--keep: the file-write child did not reach after_rename in ${workspace}`))
      yield* owner.withExclusive(workspace, Effect.provide(StartupRepair.repair, workspaceStores(store, { workspace, readOnly: false })))
      if (name === "D") yield* fs.writeFileString(join(workspace, DemoSettle.PROJECT_DIR, DemoSettle.TARGET_FILE), DemoSettle.OUTSIDE_CONTENT)
      kept.push(workspace)
    }
    return kept
  })

/**
 * Runs the demo on `store` (SQLite by default) in a fresh temporary folder, removed before it returns: story A (the
 * host child SIGKILLed in the middle of its tool → repair → a park naming the operation and the next step), then
 * story B (SIGKILLed after the tool result → repair → a confirmed continuation with the scripted provider → a
 * continued turn). `progress` receives one line per step. Never fails: a failure is `pass: false` with its reason.
 */
export const run = (
  options: {
    readonly store?: DemoStore
    readonly progress?: (line: string) => Effect.Effect<void>
    /** `--keep DIR`: also leave crashed file-write workspaces in DIR (refused when DIR exists and is not empty). */
    readonly keep?: string
  } = {}
): Effect.Effect<DemoResult, never, DemoRequirements> => {
  const store = options.store ?? "sqlite"
  const progress = options.progress ?? (() => Effect.void)
  let root: string | null = null
  const stories: Array<StoryResult> = []
  let kept: ReadonlyArray<string> | undefined
  return Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const content = yield* DemoTurnContent
    root = yield* fs.makeTempDirectoryScoped({ prefix: "runtime-resume-demo-" })
    const workspaceOf = (spec: typeof STORIES[number]) => join(root!, `story-${spec.name}`)
    // The crashes of both stories run at once (each host child in its own workspace): a child's start dominates.
    if (options.keep !== undefined) {
      // Checked first: a refused folder runs nothing.
      const keepDir = options.keep
      const exists = yield* fs.exists(keepDir)
      if (exists && (yield* fs.readDirectory(keepDir)).length > 0) {
        return yield* Effect.fail(new KeepRefused(`--keep ${keepDir}: the folder exists and is not empty; nothing was written. Name a new or empty folder.`))
      }
    }
    for (const spec of STORIES) {
      yield* progress(`story ${spec.name}: a host runs a turn and is SIGKILLed at ${spec.crashAt}`)
    }
    const crashes = yield* Effect.forEach(STORIES, (spec) =>
      Effect.zipRight(
        fs.makeDirectory(workspaceOf(spec), { mode: 0o700 }),
        spec.crashAt === "file_write:after_rename"
          ? DemoSettle.crashFileWrite(store, workspaceOf(spec))
          : crashChild(store, workspaceOf(spec), spec.crashAt, content)
      ), { concurrency: 2 })
    for (const [i, spec] of STORIES.entries()) {
      if (spec.crashAt === "file_write:after_rename") {
        yield* progress(`story ${spec.name}: ${crashes[i]!.killed ? "killed" : "NOT killed"} after the file write's rename; repair, reconcile${spec.name === "D" ? ", resolve --edit" : ""}, continue`)
        const result = yield* settleStory(store, workspaceOf(spec), spec, content, crashes[i]!)
        stories.push(result)
        yield* progress(`story ${spec.name}: ${result.ending._tag}${result.pass ? "" : ` (FAILED: ${result.problems.join("; ")})`}`)
        continue
      }
      yield* progress(`story ${spec.name}: ${crashes[i]!.killed ? "killed" : "NOT killed"} at ${spec.crashAt}; repair, plan, result`)
      const result = yield* story(store, workspaceOf(spec), spec, content, crashes[i]!)
      stories.push(result)
      yield* progress(`story ${spec.name}: ${result.ending._tag}${result.pass ? "" : ` (FAILED: ${result.problems.join("; ")})`}`)
    }
    if (options.keep !== undefined) {
      yield* progress(`keep: crashing the file-write stories again into ${options.keep}`)
      kept = yield* keepWorkspaces(store, options.keep)
    }
  }).pipe(
    Effect.scoped,
    Effect.map((): DemoResult => ({
      workspaceRoot: root,
      store,
      ...(kept !== undefined ? { kept } : {}),
      stories,
      pass: stories.length === STORIES.length && stories.every((s) => s.pass)
    })),
    Effect.catchAllCause((cause) => {
      const failure = Cause.failureOption(cause)
      const error = Option.isSome(failure)
        ? { _tag: (failure.value as { _tag?: string })._tag ?? "Error", message: (failure.value as { message?: string }).message ?? String(failure.value) }
        : { _tag: "Defect", message: Cause.pretty(cause) }
      return Effect.succeed<DemoResult>({ workspaceRoot: root, store, stories, pass: false, error })
    }),
    Effect.withSpan("Demo.run", { attributes: { store } })
  )
}

/** The demo's exit code: 0 when all four stories ended as expected, else 2. */
export const exitCode = (result: DemoResult): 0 | 2 => result.pass ? 0 : 2

/** The demo as `demo --json` prints it: the four stories without the child's output (and `kept` with `--keep`). */
export const toJson = (result: DemoResult) => ({
  store: result.store,
  workspaceRoot: result.workspaceRoot,
  pass: result.pass,
  ...(result.kept !== undefined ? { kept: result.kept } : {}),
  ...(result.error !== undefined ? { error: result.error } : {}),
  stories: result.stories.map(({ childLog: _childLog, ...rest }) => rest)
})

const endingText = (ending: Ending): Array<string> => {
  switch (ending._tag) {
    case "Parked":
      return [
        `  result: PARKED (${ending.reasons.join(", ")})`,
        `    operation ${ending.operationId ?? "?"} (call ${ending.callId ?? "?"}, tool ${ending.toolName}) may or may not have run:`,
        `    the ledger cannot say whether its side effect happened, so nothing is replayed.`,
        `    next step: ${ending.nextStep} — decide what became of that operation, then start a new turn.`
      ]
    case "Continued":
      return [
        `  result: CONTINUED as run ${ending.continuationRunId} (claim ${ending.claimId}, authorized by ${ending.authorizedBy})`,
        `    the provider was sent the ${ending.replayEvents} committed events once (the user message not added again);`,
        `    the new run begins with ${ending.firstEvent ?? "?"} and ends with ${ending.lastEvent ?? "?"} ${ending.terminalStatus ?? ""} (header ${ending.headerStatus ?? "?"}).`
      ]
    case "Failed":
      return [`  result: FAILED ${ending.error}: ${ending.message}`]
  }
}

/** The human narrative of the demo (stdout): what happened in each story, and how it ended. */
export const narrative = (result: DemoResult): string => {
  const lines: Array<string> = [`runtime-resume demo (${result.store}, in a temporary workspace, removed afterwards)`, ""]
  for (const s of result.stories) {
    lines.push(
      s.crashAt === "in_implementation"
        ? `Story ${s.story}: a host runs a turn; the model calls ${DEMO_TOOL_NAME}; the host is SIGKILLed in the middle of the tool.`
        : s.crashAt === "after_t2"
        ? `Story ${s.story}: the same turn, but the host is SIGKILLed just after the tool result was committed (T2).`
        : s.story === "C"
        ? `Story ${s.story}: a host calls the built-in ${DemoSettle.SETTLE_TOOL_NAME}; it is SIGKILLed after the file landed (rename done), before its result was committed.`
        : `Story ${s.story}: the same crash, but someone else changes ${DemoSettle.TARGET_FILE} before anyone reconciles.`
    )
    lines.push(`  crash: ${s.killed ? `SIGKILL at ${s.crashAt}` : `the host never reached ${s.crashAt}`}`)
    for (const r of s.repair) lines.push(`  repair: ${r.runId} ${r.action} → ${r.status}${r.statusReason !== undefined ? ` (${r.statusReason})` : ""}`)
    if (s.repair.length === 0) lines.push("  repair: nothing to repair")
    if (s.settle !== undefined) {
      if (s.settle.changedBySomeoneElse) lines.push(`  outside change: ${DemoSettle.TARGET_FILE} rewritten by someone else`)
      for (const r of s.settle.reconcile) lines.push(`  reconcile: ${r.outcome} ${r.reason} — ${r.message}`)
      lines.push(
        s.story === "C"
          ? "    the file holds exactly the bytes the tool wrote, so the write is proven and its result is recorded."
          : "    the file is neither as before nor as written: reconcile never overwrites an outside change, so a person decides."
      )
      if (s.settle.resolve !== null) {
        lines.push(`  resolve --edit: ${s.settle.resolve.actor} recorded the result (${s.settle.resolve.reasonCode} → ${s.settle.resolve.disposition})`)
      }
    }
    lines.push(`  plan (resume --yes): ${s.plan ?? "-"}`)
    lines.push(`  lifecycle: ${s.lifecycle.map((l) => l.kind).join(", ") || "-"}`)
    lines.push(...endingText(s.ending))
    lines.push(`  provider calls: ${s.providerCalls}`)
    lines.push(s.pass ? `  as expected (${s.expected})` : `  NOT as expected: ${s.problems.join("; ")}`)
    lines.push("")
  }
  if (result.kept !== undefined) {
    lines.push("Left for you to practise on (crashed and repaired, not reconciled; D's file was changed by someone else):")
    for (const w of result.kept) lines.push(`  ${w}`)
    lines.push(`next: runtime-resume inspect ${result.kept[0] ?? ""}   (then reconcile, resolve, resume, as the README shows)`)
    const folder = (result.kept[0] ?? "").replace(/\/story-[A-Z]$/, "")
    lines.push(`  or in the browser: runtime-resume console ${folder}   (one page per workspace)`, "")
  }
  if (result.error !== undefined) lines.push(`the demo failed: ${result.error._tag}: ${result.error.message}`)
  lines.push(result.pass ? "all four stories ended as expected" : "the demo did not end as expected (exit 2)")
  return `${lines.join("\n")}\n`
}
