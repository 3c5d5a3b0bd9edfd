// The @effect/ai host child of the issue-15 crash proofs: starts an AiHost (one layer) on a workspace and runs the
// agent's durable turn, SIGKILLed at a tool boundary of the write call; or boots again (repair → continuation) and reports.
// Usage: node --import tsx harness/AiTurnChild.ts <crash|run|boot> <sqlite|jsonl> <workspace> <point|-> <content JSON>
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as List from "effect/List"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { writeSync } from "node:fs"
import { resolve } from "node:path"
import { fileURLToPath } from "node:url"
import * as AiHostLayer from "../src/Ai/AiHost.js"
import * as CapturingTracer from "../src/Testing/CapturingTracer.js"
import * as NodeNoFollowFileSystem from "../src/Layers/NodeNoFollowFileSystem.js"
import * as ScriptedLanguageModel from "../src/Testing/ScriptedLanguageModel.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { AiHost } from "../src/Ai/AiHostService.js"
import * as Failpoints from "../src/Services/Failpoints.js"
import * as FileWriteTool from "../src/Programs/FileWriteTool.js"
import * as AiAgent from "./AiAgent.js"

/** The path of this child, for the parent to spawn. */
export const AI_CHILD_PATH = fileURLToPath(import.meta.url)

/** The source turn's run ids. */
export const AI_TURN_IDS = EventBuilder.idsFor("ai-turn")

/**
 * Where the crash child is killed: at a boundary of the write call (`after_rename`: inside its handler, the file already
 * renamed into place), or after T1 of the read call (`read_after_t1`).
 */
export const AiCrashPoint = Schema.Literal("after_t1", "in_implementation", "after_rename", "after_t2", "read_after_t1")
/** Where the crash child is killed. */
export type AiCrashPoint = typeof AiCrashPoint.Type

/** What a boot child prints (one line, ids and codes only): its boot report and what the continued prompt held. */
export const BootLine = Schema.parseJson(Schema.Struct({
  startup: Schema.String,
  repaired: Schema.Array(Schema.Struct({ runId: Schema.String, action: Schema.String })),
  /** Reconcile's settled or left operations: call id, outcome and reason (or `error:<tag>` when reconcile failed). */
  reconciled: Schema.Array(Schema.Struct({ callId: Schema.String, outcome: Schema.String, reason: Schema.String })),
  continuations: Schema.Array(Schema.Struct({
    sourceRunId: Schema.String,
    outcome: Schema.String,
    continuationRunId: Schema.NullOr(Schema.String),
    codes: Schema.Array(Schema.String)
  })),
  /** For each prompt the model received: its roles, the tool-call ids and the tool-result ids, in order. */
  prompts: Schema.Array(Schema.Struct({
    roles: Schema.Array(Schema.String),
    toolCalls: Schema.Array(Schema.String),
    toolResults: Schema.Array(Schema.String),
    /** Whether the write call's result in this prompt equals the committed one the test expects (sha256 of the content). */
    writeResultDigests: Schema.Array(Schema.String)
  }))
}))
/** What a boot child prints. */
export type BootLine = typeof BootLine.Type

const println = (line: string) => Effect.sync(() => void writeSync(1, `${line}\n`))

// Every log line on stderr (message, annotations, spans), and every ended span: the parent's canary check reads them.
const stderrLogger = Logger.make(({ annotations, cause, logLevel, message, spans }) => {
  process.stderr.write(
    `log ${logLevel.label} ${JSON.stringify(message)} ${JSON.stringify([...HashMap.toEntries(annotations)])} ` +
      `${JSON.stringify(List.toArray(spans).map((s) => s.label))}${Cause.isEmpty(cause) ? "" : ` ${Cause.pretty(cause)}`}\n`
  )
})
const stderrTracer = CapturingTracer.make((line) => void process.stderr.write(`${line}\n`))

// The prompt's structure, ids and digests only (never content).
const shapeOf = (prompt: { readonly content: ReadonlyArray<any> }) => {
  const toolCalls: Array<string> = []
  const toolResults: Array<string> = []
  const writeResultDigests: Array<string> = []
  for (const message of prompt.content) {
    if (typeof message.content === "string") continue
    for (const part of message.content) {
      if (part.type === "tool-call") toolCalls.push(part.id)
      if (part.type === "tool-result") {
        toolResults.push(part.id)
        if (part.id === AiAgent.WRITE_CALL) writeResultDigests.push(String(part.result?.sha256))
      }
    }
  }
  return { roles: prompt.content.map((m) => m.role as string), toolCalls, toolResults, writeResultDigests }
}

/** The host layer of one child: the scripted model, the toolkit's handlers, the file services and the AiHost over them. */
const hostLayer = (store: "sqlite" | "jsonl", workspace: string, content: AiAgent.AgentContent, model: ScriptedLanguageModel.ScriptedLanguageModel) =>
  AiHostLayer.layer({
    workspace,
    store,
    toolkit: AiAgent.AgentToolkit,
    overrides: AiAgent.overrides(workspace),
    fileWrite: { root: workspace }
  }).pipe(
    Layer.provide(Layer.mergeAll(AiAgent.toolkitLayer(workspace, workspace, content), ScriptedLanguageModel.layerWith(model))),
    Layer.provide(Layer.merge(NodeContext.layer, NodeNoFollowFileSystem.layer))
  )

/**
 * `crash`: starts the host and runs the turn, printing `at <point>` at that boundary of the write call and waiting to
 * be killed. `run`: the turn to the end, printing `done`. `boot`: starts the host (repair → continuation with the flag
 * the parent sets) and prints its `BootLine`.
 */
export const child = (mode: "crash" | "run" | "boot", store: "sqlite" | "jsonl", workspace: string, point: AiCrashPoint | undefined, content: AiAgent.AgentContent) =>
  Effect.gen(function*() {
    const model = yield* ScriptedLanguageModel.make(AiAgent.script(content))
    const host = yield* Layer.build(hostLayer(store, workspace, content, model))
    const ai = yield* Effect.provide(AiHost, host)
    if (mode === "boot") {
      const startup = ai.startup
      const line: BootLine = {
        startup: startup._tag,
        repaired: startup._tag === "Ran" ? startup.result.repair.repaired.map((r) => ({ runId: r.runId, action: r.action })) : [],
        reconciled: startup._tag !== "Ran"
          ? []
          : Either.isLeft(startup.result.reconcile)
          ? [{ callId: "", outcome: "error", reason: startup.result.reconcile.left._tag }]
          : startup.result.reconcile.right.operations.map((o) => ({ callId: o.callId, outcome: o.outcome, reason: o.reason })),
        continuations: startup._tag === "Ran"
          ? startup.result.continuations.map((c) => ({ sourceRunId: c.sourceRunId, outcome: c.outcome, continuationRunId: c.continuationRunId ?? null, codes: [...c.codes] }))
          : [],
        prompts: model.prompts().map(shapeOf)
      }
      return yield* println(Schema.encodeSync(BootLine)(line))
    }
    const stop = Effect.zipRight(println(`at ${point}`), Effect.never)
    const failpoints = point === undefined
      ? Layer.empty
      : point === "read_after_t1"
      ? Failpoints.layerAt("after_t1", (site) => site.callId === AiAgent.READ_CALL ? stop : Effect.void)
      : point === "after_rename"
      ? Failpoints.layerAt("in_implementation", (site) =>
        site.callId === AiAgent.WRITE_CALL && site.label === FileWriteTool.FAILPOINT_AFTER_RENAME ? stop : Effect.void)
      : Failpoints.layerAt(point, (site) => site.callId === AiAgent.WRITE_CALL ? stop : Effect.void)
    yield* ai.turn({ ids: AI_TURN_IDS, prompt: content.prompt }).pipe(Effect.provide(failpoints))
    yield* println("done")
  }).pipe(Effect.scoped, Effect.withSpan("AiTurnChild", { attributes: { mode } }))

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const Args = Schema.Tuple(
    Schema.Literal("crash", "run", "boot"),
    Schema.Literal("sqlite", "jsonl"),
    Schema.String.pipe(Schema.minLength(1)),
    Schema.Union(AiCrashPoint, Schema.Literal("-")),
    Schema.parseJson(AiAgent.AgentContent)
  )
  const main = Schema.decodeUnknown(Args)(process.argv.slice(2)).pipe(
    Effect.flatMap(([mode, store, workspace, point, content]) => child(mode, store, workspace, point === "-" ? undefined : point, content)),
    Effect.tapErrorCause((cause) =>
      Effect.sync(() => {
        const failure = Cause.failureOption(cause)
        process.stderr.write(`${Option.isSome(failure) ? `${(failure.value as any)._tag}: ${(failure.value as any).message}` : Cause.pretty(cause)}\n`)
      })
    ),
    Effect.withTracer(stderrTracer),
    Effect.provide(Logger.replace(Logger.defaultLogger, stderrLogger)),
    Logger.withMinimumLogLevel(LogLevel.All)
  )
  NodeRuntime.runMain(main, { disableErrorReporting: true, disablePrettyLogger: true })
}
