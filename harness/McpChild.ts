// The MCP host child of the MCP crash proofs (docs/mcp.md): an @effect/ai AiHost whose toolkit is an MCP server's
// tools (stdio child or Streamable HTTP on loopback); crashed inside one call, or booted again (repair → reconcile → continuation).
// Usage: node --import tsx harness/McpChild.ts <crash|boot> <workspace> <stdio|http> <serverDir> <tool> <point|->
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { readFileSync, writeSync } from "node:fs"
import { join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import * as McpAiToolkit from "../src/Mcp/McpAiToolkit.js"
import * as McpToolset from "../src/Mcp/McpToolset.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as Failpoints from "../src/Services/Failpoints.js"
import * as ScriptedLanguageModel from "../src/Testing/ScriptedLanguageModel.js"
import * as AiHostLayer from "../src/Ai/AiHost.js"
import { AiHost } from "../src/Ai/AiHostService.js"
import { MCP_SERVER_PATH } from "./McpServer.js"

/** The path of this child, for the parent to spawn. */
export const MCP_CHILD_PATH = fileURLToPath(import.meta.url)
/** The turn's run ids. */
export const MCP_TURN_IDS = EventBuilder.idsFor("mcp-turn")
/** The model's one call id. */
export const MCP_CALL = "call-mcp"

/** The server's tools the proofs call, and the args the model sends each. */
export const McpProofTool = Schema.Literal("lookup", "set_value", "append_line")
/** The server's tools the proofs call. */
export type McpProofTool = typeof McpProofTool.Type
const ARGS: Record<McpProofTool, Record<string, string>> = {
  lookup: { name: "colour" },
  set_value: { name: "colour", value: "blue" },
  append_line: { line: "one line" }
}

/**
 * Where the host is killed: `after_t1` (T1 committed, the request not sent), `in_server` (no failpoint: the server
 * holds the call, the parent kills the host once the server logged `working`), `before_t2` (the server answered, T2
 * not written), `after_t2` (the call settled, the turn not ended), or `-` (no kill: the parent may kill the server
 * mid-call instead).
 */
export const McpCrashPoint = Schema.Literal("after_t1", "in_server", "before_t2", "after_t2")
/** Where the host is killed. */
export type McpCrashPoint = typeof McpCrashPoint.Type

const variantArgs = (): Array<string> => {
  const variant = process.env.RR_MCP_SERVER_VARIANT
  return variant !== undefined && variant !== "" ? [variant] : []
}

const println = (line: string) => Effect.sync(() => void writeSync(1, `${line}\n`))

/**
 * A connected client to the proof server (spawned over stdio, or the running one over Streamable HTTP). Over stdio,
 * `RR_MCP_SERVER_VARIANT` (McpServer's `ServerVariants`) starts the server listing `lookup` otherwise.
 */
export const connect = (transport: "stdio" | "http", serverDir: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new Client({ name: "rr-mcp-host", version: "1.0.0" })
      await client.connect(
        transport === "stdio"
          ? new StdioClientTransport({ command: process.execPath, args: ["--import", "tsx", MCP_SERVER_PATH, "stdio", serverDir, ...variantArgs()], stderr: "inherit" })
          : new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${readFileSync(join(serverDir, "port"), "utf8").trim()}/mcp`))
      )
      return client
    }),
    (client) => Effect.promise(() => client.close().catch(() => undefined))
  )

/** The host: the MCP tools as the toolkit, a scripted model calling `tool` once and then answering. */
const hostLayer = (workspace: string, tools: McpAiToolkit.McpAiTools, model: ScriptedLanguageModel.ScriptedLanguageModel) =>
  AiHostLayer.layer({ workspace, store: "sqlite", toolkit: tools.toolkit }).pipe(
    Layer.provide(Layer.mergeAll(tools.layer, ScriptedLanguageModel.layerWith(model))),
    Layer.provide(NodeContext.layer)
  )

/** The run: crash at `point` (or run to the end, printing the turn's typed failure); `boot`: print the boot report. */
export const child = (
  mode: "crash" | "boot",
  workspace: string,
  transport: "stdio" | "http",
  serverDir: string,
  tool: McpProofTool,
  point: McpCrashPoint | undefined
) =>
  Effect.gen(function*() {
    const client = yield* connect(transport, serverDir)
    const toolset = yield* McpToolset.load(client, {
      trusted: process.env.RR_MCP_UNTRUSTED !== "1",
      // A short timeout over HTTP: a server killed mid-response leaves the request unanswered.
      ...(transport === "http" ? { requestOptions: { timeout: 5_000 } } : {})
    })
    const tools = McpAiToolkit.toAi(toolset)
    const model = yield* ScriptedLanguageModel.make((prompt) =>
      ScriptedLanguageModel.afterToolResults(prompt)
        ? [ScriptedLanguageModel.text("done")]
        : [ScriptedLanguageModel.toolCall(MCP_CALL, tool, ARGS[tool])]
    )
    const host = yield* Layer.build(hostLayer(workspace, tools, model))
    const ai = yield* Effect.provide(AiHost, host)
    if (mode === "boot") {
      const startup = ai.startup
      return yield* println(JSON.stringify({
        startup: startup._tag,
        reconciled: startup._tag !== "Ran"
          ? []
          : Either.isLeft(startup.result.reconcile)
          ? [{ callId: "", outcome: "error", reason: startup.result.reconcile.left._tag }]
          : startup.result.reconcile.right.operations.map((o) => ({ callId: o.callId, outcome: o.outcome, reason: o.reason })),
        continuations: startup._tag === "Ran"
          ? startup.result.continuations.map((c) => ({
            outcome: c.outcome,
            codes: [...c.codes],
            findings: (c.findings ?? []).map((f) => ({ reason: f.reason, detail: f.detail, ref: f.ref ?? null, source: f.source ?? null }))
          }))
          : []
      }))
    }
    const stop = Effect.zipRight(println(`at ${point}`), Effect.never)
    const failpoints = point === "after_t1" || point === "before_t2" || point === "after_t2" ? Failpoints.layerAt(point, () => stop) : Layer.empty
    const turn = yield* Effect.either(ai.turn({ ids: MCP_TURN_IDS, prompt: "use the server" }).pipe(Effect.provide(failpoints)))
    yield* Either.isRight(turn)
      ? println("done")
      : println(`failed ${turn.left._tag} ${"reason" in turn.left ? String(turn.left.reason) : "-"}`)
  }).pipe(Effect.scoped)

if (process.argv[1] !== undefined && resolve(process.argv[1]) === MCP_CHILD_PATH) {
  const Args = Schema.Tuple(
    Schema.Literal("crash", "boot"),
    Schema.String.pipe(Schema.minLength(1)),
    Schema.Literal("stdio", "http"),
    Schema.String.pipe(Schema.minLength(1)),
    McpProofTool,
    Schema.Union(McpCrashPoint, Schema.Literal("-"))
  )
  const main = Schema.decodeUnknown(Args)(process.argv.slice(2)).pipe(
    Effect.flatMap(([mode, workspace, transport, serverDir, tool, point]) =>
      child(mode, workspace, transport, serverDir, tool, point === "-" ? undefined : point)),
    Effect.tapErrorCause((cause) =>
      Effect.sync(() => {
        const failure = Cause.failureOption(cause)
        process.stderr.write(`${Option.isSome(failure) ? `${(failure.value as any)._tag}: ${(failure.value as any).message}` : Cause.pretty(cause)}\n`)
      })
    )
  )
  NodeRuntime.runMain(main, { disableErrorReporting: true, disablePrettyLogger: true })
}
