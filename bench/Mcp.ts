// Benchmark: one MCP tool call through the tool boundary (docs/mcp.md: ToolRuntime.run of a new FunctionCall to an
// McpToolset tool on the SQLite store: T1, one `tools/call`, T2) against a bare `client.callTool`, same server, same run.
import type * as FileSystem from "@effect/platform/FileSystem"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { MCP_SERVER_PATH } from "../harness/McpServer.js"
import * as McpToolset from "../src/Mcp/McpToolset.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as ToolRuntime from "../src/Programs/ToolRuntime.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import type { WorkspaceLock } from "../src/Services/WorkspaceLock.js"
import { BenchFailed } from "./internal/Child.js"
import { openStore } from "./internal/Ledger.js"
import type { BenchOptions } from "./internal/Options.js"
import { WORK } from "./internal/Paths.js"
import type { BenchResult } from "./internal/Report.js"
import { row } from "./internal/Report.js"
import { median, p95 } from "./internal/Stats.js"

const WORKSPACE = `${WORK}/mcp-sqlite`
const SERVER_DIR = `${WORK}/mcp-server`

/** The baseline: the same `tools/call` (the server's read-only `lookup`) with the SDK client alone, no ledger. */
export const BASELINE = "bare client.callTool of the same tool on the same stdio server (no ledger)"

/** Runs the benchmark: interleaved rounds of ours and the baseline, medians and p95 per call. */
export const run = (options: BenchOptions): Effect.Effect<BenchResult, BenchFailed, FileSystem.FileSystem | WorkspaceLock> =>
  Effect.gen(function*() {
    const t0 = yield* Clock.currentTimeNanos
    const calls = options.quick ? 100 : 300
    const warmup = options.quick ? 20 : 50
    fs.rmSync(WORKSPACE, { recursive: true, force: true })
    fs.mkdirSync(WORKSPACE, { recursive: true })
    fs.mkdirSync(SERVER_DIR, { recursive: true })
    const client = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: async () => {
          const c = new Client({ name: "rr-bench", version: "1.0.0" })
          await c.connect(new StdioClientTransport({ command: process.execPath, args: ["--import", "tsx", MCP_SERVER_PATH, "stdio", path.resolve(SERVER_DIR)] }))
          return c
        },
        catch: (error) => new BenchFailed({ message: `could not start the MCP server: ${String(error)}` })
      }),
      (c) => Effect.promise(() => c.close().catch(() => undefined))
    )
    const toolset = yield* McpToolset.load(client, { trusted: true }).pipe(
      Effect.mapError((error) => new BenchFailed({ message: error.message }))
    )
    const store = yield* openStore("sqlite", WORKSPACE)
    const b = EventBuilder.make("bench-mcp-run")
    yield* store.append(b.runId, [b.opened("t1_after_preflight_v1"), b.user("go")]).pipe(
      Effect.mapError((error) => new BenchFailed({ message: `could not open the run: ${error.message}` }))
    )
    let n = 0
    const ours = Effect.gen(function*() {
      const call = b.call(`mcp-call-${++n}`, "lookup", { name: `key-${n}` })
      const started = process.hrtime.bigint()
      const outcome = yield* ToolRuntime.run(b.runId, call, { tools: toolset.tools }).pipe(
        Effect.provideService(RuntimeEventStore, store),
        Effect.mapError((error) => new BenchFailed({ message: `ToolRuntime.run failed: ${error._tag}` }))
      )
      if (outcome._tag !== "Completed") return yield* new BenchFailed({ message: `the call was refused: ${outcome.reason}` })
      return Number(process.hrtime.bigint() - started) / 1e6
    })
    const bare = Effect.tryPromise({
      try: async () => {
        const started = process.hrtime.bigint()
        await client.callTool({ name: "lookup", arguments: { name: `key-${++n}` } })
        return Number(process.hrtime.bigint() - started) / 1e6
      },
      catch: (error) => new BenchFailed({ message: `callTool failed: ${String(error)}` })
    })
    for (let i = 0; i < warmup; i++) {
      yield* ours
      yield* bare
    }
    const oursMs: Array<number> = []
    const bareMs: Array<number> = []
    // Interleaved, so both sides see the same machine load.
    for (let i = 0; i < calls; i++) {
      oursMs.push(yield* ours)
      bareMs.push(yield* bare)
    }
    const wallMs = Number((yield* Clock.currentTimeNanos) - t0) / 1e6
    return {
      name: "mcp",
      wallMs,
      rows: [
        row({ bench: "mcp", case: "stdio lookup", metric: "median call", unit: "ms", ours: median(oursMs), baseline: median(bareMs), note: "ToolRuntime (T1 + tools/call + T2, SQLite) vs bare callTool" }),
        row({ bench: "mcp", case: "stdio lookup", metric: "p95 call", unit: "ms", ours: p95(oursMs), baseline: p95(bareMs) })
      ],
      details: { calls, warmup, baseline: BASELINE, server: toolset.server }
    }
  }).pipe(Effect.scoped)
