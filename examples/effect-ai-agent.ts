// An @effect/ai agent made durable with runtime-resume/ai: a scripted LanguageModel (no network), a read-only tool and
// the built-in file-write tool; the host process is SIGKILLed after the write, and a new host recovers on boot.
// Run: npx tsx examples/effect-ai-agent.ts   (or: npm run example:ai)
import * as AiTool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { spawn } from "node:child_process"
import { mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { AiFileWrite, AiHost, AiHostLayer, ScriptedLanguageModel } from "runtime-resume/ai"
import { NodeNoFollowFileSystem, ToolFailpoints } from "runtime-resume"

// 1. Tools, as any @effect/ai host writes them. `Readonly` makes read_notes `read_only` (safe to re-run after a crash);
//    the file-write tool is made `reconcilable` below (its effect is checked from evidence, never redone blindly).
const ReadNotes = AiTool.make("read_notes", {
  description: "Reads the team's notes.",
  success: Schema.Struct({ notes: Schema.String })
}).annotate(AiTool.Readonly, true)
const Tools = Toolkit.make(ReadNotes, AiFileWrite.tool)

const toolkitLayer = (root: string) =>
  Tools.toLayer(Effect.gen(function*() {
    const writeFile = yield* AiFileWrite.handler({ root })
    return Tools.of({
      read_notes: () => Effect.succeed({ notes: "ship the release on Friday" }),
      write_file: writeFile
    })
  }))

// 2. A scripted model (LanguageModel.make, no network): read the notes and write a summary, then answer.
const model = ScriptedLanguageModel.layer((prompt) =>
  ScriptedLanguageModel.afterToolResults(prompt)
    ? [ScriptedLanguageModel.text("Done: summary.txt says we ship on Friday.")]
    : [
      ScriptedLanguageModel.text("Reading the notes and writing the summary."),
      ScriptedLanguageModel.toolCall("call-1", "read_notes", {}),
      ScriptedLanguageModel.toolCall("call-2", "write_file", { path: "summary.txt", content: "We ship on Friday.\n" })
    ]
)

// 3. The host in one layer: the workspace's ledger (SQLite), startup repair, reconcile, continuation (with the flag),
//    durable turns.
const host = (workspace: string) =>
  AiHostLayer.layer({
    workspace,
    toolkit: Tools,
    overrides: { write_file: AiFileWrite.override({ root: workspace }) },
    fileWrite: { root: workspace }
  }).pipe(
    Layer.provide(Layer.mergeAll(toolkitLayer(workspace), model)),
    Layer.provide(Layer.merge(NodeContext.layer, NodeNoFollowFileSystem.layer))
  )

const say = (line: string) => Effect.sync(() => console.log(line))

// The first host: runs the turn and stops dead right after the write's result is committed (T2): a real SIGKILL.
const firstHost = (workspace: string) =>
  Effect.gen(function*() {
    const ai = yield* AiHost
    const crashAfterWrite = ToolFailpoints.layerAt("after_t2", (site) =>
      site.callId === "call-2" ? Effect.zipRight(say("crash-point"), Effect.never) : Effect.void)
    yield* ai.turn({
      ids: { sessionId: "session-1", invocationId: "invocation-1", runId: "turn-1", turnId: "turn-1" },
      prompt: "Summarize the notes into summary.txt"
    }).pipe(Effect.provide(crashAfterWrite))
  }).pipe(Effect.provide(host(workspace)))

// The second host: its boot repairs the interrupted turn and, with MAKA_RUNTIME_SAFE_BOUNDARY_RESUME=1, continues it.
const secondHost = (workspace: string) =>
  Effect.gen(function*() {
    const ai = yield* AiHost
    if (ai.startup._tag !== "Ran") return yield* say(`startup repair skipped: ${ai.startup.reason}`)
    for (const run of ai.startup.result.repair.repaired) yield* say(`repair: ${run.runId} ${run.action}`)
    for (const c of ai.startup.result.continuations) {
      yield* say(`continuation of ${c.sourceRunId}: ${c.outcome}${c.continuationRunId !== undefined ? ` as ${c.continuationRunId}` : ""}${c.codes.length > 0 ? ` (${c.codes.join(", ")})` : ""}`)
    }
  }).pipe(Effect.provide(host(workspace)))

const self = fileURLToPath(import.meta.url)
const child = (args: ReadonlyArray<string>, env: Record<string, string>, killOn?: string) =>
  new Promise<string>((resolve, reject) => {
    const proc = spawn(process.execPath, ["--import", "tsx", self, ...args], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"] })
    let out = ""
    proc.stdout.on("data", (chunk) => {
      out += chunk
      if (killOn !== undefined && out.includes(killOn)) proc.kill("SIGKILL")
    })
    proc.on("error", reject)
    proc.on("exit", () => resolve(out))
  })

const main = async () => {
  const workspace = mkdtempSync(join(tmpdir(), "rr-effect-ai-"))
  console.log(`workspace: ${workspace}`)
  await child(["first", workspace], {}, "crash-point")
  console.log("first host: SIGKILLed right after write_file's result was committed (the model never saw it)")
  const boot = await child(["second", workspace], { MAKA_RUNTIME_SAFE_BOUNDARY_RESUME: "1" })
  process.stdout.write(boot.split("\n").map((l) => (l === "" ? l : `second host: ${l}`)).join("\n"))
  console.log(`summary.txt: ${JSON.stringify(readFileSync(join(workspace, "summary.txt"), "utf8"))} (written once)`)
  console.log(`inspect it: bin/runtime-resume inspect ${workspace}`)
}

const [mode, workspace] = process.argv.slice(2)
if (mode === "first" && workspace !== undefined) NodeRuntime.runMain(firstHost(workspace))
else if (mode === "second" && workspace !== undefined) NodeRuntime.runMain(secondHost(workspace))
else void main()
