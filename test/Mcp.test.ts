// The MCP entry (docs/mcp.md) against a real MCP server (the SDK's, harness/McpServer.ts, a stdio child): the mode from
// annotations with the trust rule and the override, what T1 records, isError and protocol errors, and the catalog gate.
import { assert, describe, it } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { Data, Effect } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { MCP_SERVER_PATH, readCallLog } from "../harness/McpServer.js"
import * as ContinuationPlan from "../src/Domain/ContinuationPlan.js"
import { HostFacts } from "../src/Domain/ContinuationPlan.js"
import { RunId } from "../src/Domain/Ids.js"
import { RunHeader } from "../src/Domain/RunHeader.js"
import type { FunctionResponse, ToolDispatched } from "../src/Domain/RuntimeEvent.js"
import * as MemoryRuntimeEventStore from "../src/Layers/MemoryRuntimeEventStore.js"
import { McpAiToolkit, McpProvenance, McpRecoveryMode, McpToolset } from "../src/Mcp.js"
import * as AiToolkit from "../src/Ai/AiToolkit.js"
import { plan } from "../src/Domain/Rules/ContinuationPlanner.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as ToolRuntime from "../src/Programs/ToolRuntime.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { commit } from "./support/toolLedgers.js"

describe("McpRecoveryMode: annotations → recovery mode", () => {
  it("maps the hints with the MCP defaults, only for a trusted server; an override always wins", () => {
    const trusted = { trusted: true }
    const rows: ReadonlyArray<[McpRecoveryMode.McpHints, string]> = [
      [{}, "never_auto_retry"],
      [{ readOnlyHint: true }, "read_only"],
      [{ readOnlyHint: true, idempotentHint: true }, "read_only"],
      [{ idempotentHint: true }, "idempotent"],
      [{ idempotentHint: true, destructiveHint: true }, "idempotent"],
      [{ destructiveHint: false }, "never_auto_retry"],
      [{ readOnlyHint: false, openWorldHint: false }, "never_auto_retry"]
    ]
    for (const [hints, mode] of rows) {
      assert.deepStrictEqual(McpRecoveryMode.choose(hints, trusted), { recoveryMode: mode, modeFrom: "annotations" }, JSON.stringify(hints))
      assert.deepStrictEqual(McpRecoveryMode.choose(hints, { trusted: false }), { recoveryMode: "never_auto_retry", modeFrom: "untrusted" })
      assert.deepStrictEqual(McpRecoveryMode.choose(hints, { trusted: false, override: "idempotent" }), { recoveryMode: "idempotent", modeFrom: "override" })
    }
    assert.deepStrictEqual(McpRecoveryMode.choose({ readOnlyHint: true }, { trusted: true, override: "never_auto_retry" }).recoveryMode, "never_auto_retry")
    // A server may send anything: only booleans are hints.
    assert.deepStrictEqual(McpRecoveryMode.hintsOf({ readOnlyHint: "yes", idempotentHint: true, title: "x" }), { idempotentHint: true })
  })
})

// A client connected to a fresh stdio server child (closed, and the child ended, with the scope).
const connected = Effect.acquireRelease(
  Effect.promise(async () => {
    const dir = mkdtempSync(join(tmpdir(), "rr-mcp-unit-"))
    const client = new Client({ name: "rr-test-host", version: "1.0.0" })
    await client.connect(new StdioClientTransport({ command: process.execPath, args: ["--import", "tsx", MCP_SERVER_PATH, "stdio", dir] }))
    return { client, dir }
  }),
  ({ client, dir }) => Effect.promise(async () => {
    await client.close().catch(() => undefined)
    rmSync(dir, { recursive: true, force: true })
  })
)

// Runs one model call of `tool` through ToolRuntime on a memory store: the dispatch and the response it committed.
const runCall = (tools: McpToolset.McpToolset["tools"], tool: string, args: unknown) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const b = EventBuilder.make("mcp-unit")
    yield* store.append(b.runId, [b.opened("t1_after_preflight_v1"), b.user("go")])
    const outcome = yield* ToolRuntime.run(b.runId, b.call("c1", tool, args), { tools })
    assert.strictEqual(outcome._tag, "Completed")
    const dispatch = outcome.rows.map((r) => r.event.body).find((body) => body._tag === "ToolDispatched") as ToolDispatched
    return { dispatch, response: outcome.response.body as FunctionResponse }
  }).pipe(Effect.provide(MemoryRuntimeEventStore.layer))

describe("McpToolset over a real stdio server", () => {
  it.scoped("loads the tools with their modes; T1 records the server, the hints and why; the key reaches the server", () =>
    Effect.gen(function*() {
      const { client, dir } = yield* connected
      const toolset = yield* McpToolset.load(client, { trusted: true })
      assert.deepStrictEqual(toolset.server, { name: "rr-test-server", version: "1.0.0" })
      const modes = Object.fromEntries(toolset.descriptors.map((d) => [d.name, d.choice.recoveryMode]))
      assert.deepStrictEqual(modes, { lookup: "read_only", set_value: "idempotent", append_line: "never_auto_retry", refuse: "read_only" })
      const lookup = toolset.descriptors.find((d) => d.name === "lookup")!
      assert.deepStrictEqual((lookup.inputSchema as { properties: unknown }).properties, { name: { type: "string" } })

      const set = yield* runCall(toolset.tools, "set_value", { name: "a", value: "b" })
      assert.strictEqual(set.dispatch.recoveryMode, "idempotent")
      const evidence = set.dispatch.evidence as McpProvenance.McpProvenance
      assert.deepStrictEqual(
        { ...evidence, fingerprint: undefined },
        {
          tool: "runtime-resume/mcp@1",
          server: { name: "rr-test-server", version: "1.0.0" },
          name: "set_value",
          mcpTool: "set_value",
          annotations: { readOnlyHint: false, idempotentHint: true, destructiveHint: false, openWorldHint: false },
          trusted: true,
          recoveryMode: "idempotent",
          modeFrom: "annotations",
          fingerprint: undefined
        }
      )
      assert.isFalse(set.response.isError)
      assert.deepStrictEqual(set.response.result, { content: [{ type: "text", text: "a = b" }] })
      // The server saw the key T1 recorded (the operation id), in `_meta`.
      const seen = readCallLog(dir).filter((l) => l.tool === "set_value" && l.phase === "done")
      assert.deepStrictEqual(seen.map((l) => l.key), [set.dispatch.idempotencyKey!])
      assert.strictEqual(set.dispatch.idempotencyKey, set.dispatch.operationId)

      // isError: a failed response, the server's result as it is.
      const refused = yield* runCall(toolset.tools, "refuse", {})
      assert.isTrue(refused.response.isError)
      assert.deepStrictEqual(refused.response.result, { content: [{ type: "text", text: "refused on purpose" }], isError: true })

      // Args the server's schema refuses: the server's answer is the call's failed response (never a crash).
      const invalid = yield* runCall(toolset.tools, "lookup", { name: 5 })
      assert.isTrue(invalid.response.isError)
    }))

  it.scoped("an untrusted server's hints are ignored (never_auto_retry), a host override still wins", () =>
    Effect.gen(function*() {
      const { client } = yield* connected
      const toolset = yield* McpToolset.load(client, { overrides: { set_value: "idempotent" }, prefix: "srv_" })
      const modes = Object.fromEntries(toolset.descriptors.map((d) => [d.name, [d.choice.recoveryMode, d.choice.modeFrom]]))
      assert.deepStrictEqual(modes, {
        srv_lookup: ["never_auto_retry", "untrusted"],
        srv_set_value: ["idempotent", "override"],
        srv_append_line: ["never_auto_retry", "untrusted"],
        srv_refuse: ["never_auto_retry", "untrusted"]
      })
      const lookup = yield* runCall(toolset.tools, "srv_lookup", { name: "x" })
      assert.strictEqual(lookup.dispatch.recoveryMode, "never_auto_retry")
      assert.strictEqual((lookup.dispatch.evidence as McpProvenance.McpProvenance).mcpTool, "lookup")
      assert.isFalse(lookup.response.isError)
      // The catalog re-lists the server: the same names and fingerprints as at load.
      const catalog = yield* McpToolset.catalog(client, { prefix: "srv_" })
      assert.deepStrictEqual([...catalog.names].sort(), toolset.descriptors.map((d) => d.name).sort())
      for (const d of toolset.descriptors) assert.strictEqual(catalog.fingerprints[d.name], d.provenance.fingerprint)
      // What an AiHost reports by default: the fingerprints its MCP toolkit carries, the same as a fresh listing.
      assert.deepStrictEqual(AiToolkit.fingerprintsOf(McpAiToolkit.toAi(toolset).toolkit), catalog.fingerprints)
    }))
})

describe("the continuation's catalog gate over recorded MCP provenance (docs/spec/04-continuation.md)", () => {
  const WS = "7d444840-9dc0-4c6b-9a4f-7c1a1b2c3d4e"
  const ids = { sessionId: "sess-1", invocationId: "inv-src", runId: "src", turnId: "turn-src" }
  const header = RunHeader.make({
    runId: RunId.make("src"),
    sessionId: ids.sessionId as RunHeader["sessionId"],
    invocationId: ids.invocationId as RunHeader["invocationId"],
    turnId: ids.turnId as RunHeader["turnId"],
    status: "failed",
    statusReason: "process_interrupted",
    workspaceId: WS,
    createdAt: 1,
    updatedAt: 2
  })
  const server = { name: "files", version: "2.1.0" }
  const hints = { readOnlyHint: true }
  const listed = { description: "Reads a file.", inputSchema: { type: "object", properties: { path: { type: "string" } } } }
  const provenance = McpProvenance.make({
    server,
    name: "read",
    mcpTool: "read",
    hints,
    listed,
    trusted: true,
    choice: { recoveryMode: "read_only", modeFrom: "annotations" }
  })
  const b = EventBuilder.make(ids)
  const events = [
    b.opened("t1_after_preflight_v1"),
    b.user("hello"),
    b.call("c1", "read", { path: "a" }),
    b.dispatched("c1", "read", { path: "a" }, "read_only", { evidence: provenance }),
    b.response("c1", "read", { ok: true }, { operationBound: true }),
    b.terminated("failed", "process_interrupted")
  ]
  const planWith = (fingerprints: Record<string, string> | undefined) =>
    plan({
      runId: "src",
      source: { header, rows: ContinuationPlan.committed(commit("src", events)) },
      ancestors: [],
      claims: [],
      host: new HostFacts({
        workspaceId: WS,
        toolCatalog: Data.array(["read"]),
        ...(fingerprints !== undefined ? { toolFingerprints: Data.struct(fingerprints) } : {}),
        backgroundSettled: true
      }),
      enabled: true,
      confirmed: false
    })

  it("the same server, tool, hints, description and schema continue; any of them changed parks with tool_catalog_mismatch", () => {
    assert.strictEqual(planWith({ read: McpProvenance.fingerprint("files", "read", hints, listed) })._tag, "Continue")
    // A new server version with the same hints is the same tool.
    assert.strictEqual(planWith({ read: provenance.fingerprint })._tag, "Continue")
    // A host that reports no fingerprints checks names only.
    assert.strictEqual(planWith(undefined)._tag, "Continue")
    for (const changed of [
      McpProvenance.fingerprint("files", "read", { readOnlyHint: false }, listed),
      McpProvenance.fingerprint("other-server", "read", hints, listed),
      McpProvenance.fingerprint("files", "read", hints, { ...listed, description: "Reads a file, then deletes it." }),
      McpProvenance.fingerprint("files", "read", hints, { ...listed, description: undefined }),
      McpProvenance.fingerprint("files", "read", hints, { ...listed, inputSchema: { type: "object", properties: { path: { type: "number" } } } }),
      undefined
    ]) {
      const parked = planWith(changed !== undefined ? { read: changed } : {})
      assert.strictEqual(parked._tag, "Park")
      const p = parked as ContinuationPlan.Park
      assert.deepStrictEqual(p.findings.map((f) => [f.reason, f.detail, f.ref, f.source]), [[
        "tool_catalog_mismatch",
        "tool_changed",
        "read",
        "MCP server files 2.1.0, tool read"
      ]])
    }
  })
})
