// The `runtime-resume demo` program (issue 5): a whole crash told twice in fresh temporary workspaces — a host child
// SIGKILLed in the middle of a tool (ends in a park) and after the tool result (ends in a continued turn).
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
import { join } from "node:path"
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

/** The two stories. */
export type StoryName = "A" | "B"

/** How each story is told: where the child is killed, and how it must end. */
export const STORIES: ReadonlyArray<{ readonly name: StoryName; readonly crashAt: CrashPoint; readonly expected: "parked" | "continued" }> = [
  { name: "A", crashAt: "in_implementation", expected: "parked" },
  { name: "B", crashAt: "after_t2", expected: "continued" }
]

/** One lifecycle event the continuation emitted (spec 04 "Observability"): its kind and its annotations. */
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
  readonly crashAt: CrashPoint
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
}

/** The whole demo: the temporary folder it used (removed when it returns), the store, and both stories. */
export interface DemoResult {
  readonly workspaceRoot: string | null
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

/**
 * Runs the demo on `store` (SQLite by default) in a fresh temporary folder, removed before it returns: story A (the
 * host child SIGKILLed in the middle of its tool → repair → a park naming the operation and the next step), then
 * story B (SIGKILLed after the tool result → repair → a confirmed continuation with the scripted provider → a
 * continued turn). `progress` receives one line per step. Never fails: a failure is `pass: false` with its reason.
 */
export const run = (
  options: { readonly store?: DemoStore; readonly progress?: (line: string) => Effect.Effect<void> } = {}
): Effect.Effect<DemoResult, never, DemoRequirements> => {
  const store = options.store ?? "sqlite"
  const progress = options.progress ?? (() => Effect.void)
  let root: string | null = null
  const stories: Array<StoryResult> = []
  return Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const content = yield* DemoTurnContent
    root = yield* fs.makeTempDirectoryScoped({ prefix: "runtime-resume-demo-" })
    const workspaceOf = (spec: typeof STORIES[number]) => join(root!, `story-${spec.name}`)
    // The crashes of both stories run at once (each host child in its own workspace): a child's start dominates.
    for (const spec of STORIES) {
      yield* progress(`story ${spec.name}: a host runs a turn and is SIGKILLed at ${spec.crashAt}`)
    }
    const crashes = yield* Effect.forEach(STORIES, (spec) =>
      Effect.zipRight(
        fs.makeDirectory(workspaceOf(spec), { mode: 0o700 }),
        crashChild(store, workspaceOf(spec), spec.crashAt, content)
      ), { concurrency: "unbounded" })
    for (const [i, spec] of STORIES.entries()) {
      yield* progress(`story ${spec.name}: ${crashes[i]!.killed ? "killed" : "NOT killed"} at ${spec.crashAt}; repair, plan, result`)
      const result = yield* story(store, workspaceOf(spec), spec, content, crashes[i]!)
      stories.push(result)
      yield* progress(`story ${spec.name}: ${result.ending._tag}${result.pass ? "" : ` (FAILED: ${result.problems.join("; ")})`}`)
    }
  }).pipe(
    Effect.scoped,
    Effect.map((): DemoResult => ({
      workspaceRoot: root,
      store,
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

/** The demo's exit code: 0 when both stories ended as expected, else 2. */
export const exitCode = (result: DemoResult): 0 | 2 => result.pass ? 0 : 2

/** The demo as `demo --json` prints it: both stories without the child's output. */
export const toJson = (result: DemoResult) => ({
  store: result.store,
  workspaceRoot: result.workspaceRoot,
  pass: result.pass,
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
        : `Story ${s.story}: the same turn, but the host is SIGKILLed just after the tool result was committed (T2).`
    )
    lines.push(`  crash: ${s.killed ? `SIGKILL at ${s.crashAt}` : `the host never reached ${s.crashAt}`}`)
    for (const r of s.repair) lines.push(`  repair: ${r.runId} ${r.action} → ${r.status}${r.statusReason !== undefined ? ` (${r.statusReason})` : ""}`)
    if (s.repair.length === 0) lines.push("  repair: nothing to repair")
    lines.push(`  plan (resume --yes): ${s.plan ?? "-"}`)
    lines.push(`  lifecycle: ${s.lifecycle.map((l) => l.kind).join(", ") || "-"}`)
    lines.push(...endingText(s.ending))
    lines.push(`  provider calls: ${s.providerCalls}`)
    lines.push(s.pass ? `  as expected (${s.expected})` : `  NOT as expected: ${s.problems.join("; ")}`)
    lines.push("")
  }
  if (result.error !== undefined) lines.push(`the demo failed: ${result.error._tag}: ${result.error.message}`)
  lines.push(result.pass ? "both stories ended as expected" : "the demo did not end as expected (exit 2)")
  return `${lines.join("\n")}\n`
}
