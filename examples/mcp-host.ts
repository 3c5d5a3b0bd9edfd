// An @effect/ai host whose tools come from an MCP server (runtime-resume/mcp): the server (written with the official
// SDK, run over stdio) says `save_summary` is idempotent; the host is SIGKILLed after the server saved, before the
// result was committed; a new host re-runs it with the same idempotency key, the server sees the key, nothing is saved twice.
// Run: npx tsx examples/mcp-host.ts   (or: npm run example:mcp)
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { spawn } from "node:child_process"
import { appendFileSync, existsSync, mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as z from "zod"
import { ToolFailpoints } from "runtime-resume"
import { AiHost, AiHostLayer, ScriptedLanguageModel } from "runtime-resume/ai"
import { McpAiToolkit, McpToolset } from "runtime-resume/mcp"

const self = fileURLToPath(import.meta.url)

// 1. The MCP server (any server would do): a read-only tool and an idempotent one that honours the key in `_meta`.
const server = (dir: string) => {
  const mcp = new McpServer({ name: "notes-server", version: "1.0.0" })
  mcp.registerTool("read_notes", {
    description: "Reads the team's notes.",
    inputSchema: {},
    annotations: { readOnlyHint: true }
  }, async () => ({ content: [{ type: "text", text: "ship the release on Friday" }] }))
  mcp.registerTool("save_summary", {
    description: "Saves the summary; the same idempotency key saves it once.",
    inputSchema: { text: z.string() },
    annotations: { readOnlyHint: false, idempotentHint: true, destructiveHint: false }
  }, async ({ text }, extra) => {
    const key = String(extra._meta?.[McpToolset.IDEMPOTENCY_KEY_META] ?? "none")
    const saved = join(dir, "saved.log")
    const seen = existsSync(saved) && readFileSync(saved, "utf8").includes(`${key} `)
    if (!seen) appendFileSync(saved, `${key} ${text}\n`)
    return { content: [{ type: "text", text: seen ? `already saved under ${key}` : `saved under ${key}` }] }
  })
  return mcp
}

// 2. The host: a connected client, its tools loaded (trusted: the server's hints give the modes), as @effect/ai tools.
const host = (workspace: string, dir: string, body: Effect.Effect<void, unknown, AiHost>) =>
  Effect.gen(function*() {
    const client = yield* Effect.acquireRelease(
      Effect.promise(async () => {
        const c = new Client({ name: "notes-host", version: "1.0.0" })
        await c.connect(new StdioClientTransport({ command: process.execPath, args: ["--import", "tsx", self, "server", dir] }))
        return c
      }),
      (c) => Effect.promise(() => c.close())
    )
    const toolset = yield* McpToolset.load(client, { trusted: true })
    const tools = McpAiToolkit.toAi(toolset)
    const model = ScriptedLanguageModel.layer((prompt) =>
      ScriptedLanguageModel.afterToolResults(prompt)
        ? [ScriptedLanguageModel.text("Saved the summary.")]
        : [
          ScriptedLanguageModel.toolCall("call-1", "read_notes", {}),
          ScriptedLanguageModel.toolCall("call-2", "save_summary", { text: "We ship on Friday." })
        ]
    )
    const layer = AiHostLayer.layer({
      workspace,
      toolkit: tools.toolkit,
      // The server's tools now, at each continuation check: a tool gone or re-annotated parks the continuation.
      toolFingerprints: Effect.map(Effect.orDie(McpToolset.catalog(client)), (c) => c.fingerprints)
    }).pipe(Layer.provide(Layer.mergeAll(tools.layer, model)), Layer.provide(NodeContext.layer))
    yield* Effect.provide(body, layer)
  }).pipe(Effect.scoped)

const say = (line: string) => Effect.sync(() => console.log(line))

// The first host stops dead after the server saved, before T2 committed the result: a real SIGKILL.
const firstHost = (workspace: string, dir: string) =>
  host(workspace, dir, Effect.gen(function*() {
    const ai = yield* AiHost
    const crash = ToolFailpoints.layerAt("before_t2", (site) =>
      site.callId === "call-2" ? Effect.zipRight(say("crash-point"), Effect.never) : Effect.void)
    yield* ai.turn({
      ids: { sessionId: "session-1", invocationId: "invocation-1", runId: "turn-1", turnId: "turn-1" },
      prompt: "Summarize the notes"
    }).pipe(Effect.provide(crash))
  }))

// The second host: repair, then reconcile re-runs the idempotent call with its recorded key, then the turn continues.
const secondHost = (workspace: string, dir: string) =>
  host(workspace, dir, Effect.gen(function*() {
    const ai = yield* AiHost
    if (ai.startup._tag !== "Ran") return yield* say(`startup repair skipped: ${ai.startup.reason}`)
    const reconcile = ai.startup.result.reconcile
    if (reconcile._tag === "Right") {
      for (const op of reconcile.right.operations) yield* say(`reconcile: ${op.callId} ${op.outcome} (${op.reason})`)
    }
    for (const c of ai.startup.result.continuations) yield* say(`continuation of ${c.sourceRunId}: ${c.outcome}`)
  }))

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
  const workspace = mkdtempSync(join(tmpdir(), "rr-mcp-host-"))
  const dir = mkdtempSync(join(tmpdir(), "rr-mcp-server-"))
  console.log(`workspace: ${workspace}`)
  await child(["first", workspace, dir], {}, "crash-point")
  console.log("first host: SIGKILLed after the server saved the summary, before the result was committed")
  const boot = await child(["second", workspace, dir], { MAKA_RUNTIME_SAFE_BOUNDARY_RESUME: "1" })
  process.stdout.write(boot.split("\n").map((l) => (l === "" ? l : `second host: ${l}`)).join("\n"))
  console.log(`the server's saves (one key, one line): ${JSON.stringify(readFileSync(join(dir, "saved.log"), "utf8"))}`)
  console.log(`inspect it: bin/runtime-resume inspect ${workspace}`)
}

const [mode, a, b] = process.argv.slice(2)
if (mode === "server" && a !== undefined) void server(a).connect(new StdioServerTransport())
else if (mode === "first" && a !== undefined && b !== undefined) NodeRuntime.runMain(firstHost(a, b))
else if (mode === "second" && a !== undefined && b !== undefined) NodeRuntime.runMain(secondHost(a, b))
else void main()
