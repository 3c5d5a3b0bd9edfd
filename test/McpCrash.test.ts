// Crash proofs of MCP tools through the tool boundary (docs/mcp.md): a real MCP server (the SDK's, harness/McpServer.ts)
// as a stdio child of the host or on loopback Streamable HTTP; the host (an AiHost child) SIGKILLed before the request,
// while the server works and after its answer before T2; then booted again; and the server killed mid-call.
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { RunId } from "../src/Domain/Ids.js"
import { layerStore } from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { MCP_CALL, MCP_CHILD_PATH, MCP_TURN_IDS, type McpCrashPoint, type McpProofTool } from "../harness/McpChild.js"
import { APPENDED_FILE, HOLD_FILE, MCP_SERVER_PATH, readCallLog, ServerVariants } from "../harness/McpServer.js"

const PROJECT_ROOT = join(MCP_CHILD_PATH, "..", "..")
const BIN = join(PROJECT_ROOT, "bin", "runtime-resume")
type Transport = "stdio" | "http"

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

// Waits (polling, at most 90 s) until `check` holds; fails with `what` otherwise.
const until = async (what: string, check: () => boolean): Promise<void> => {
  for (let i = 0; i < 900; i++) {
    if (check()) return
    await sleep(100)
  }
  throw new Error(`timed out waiting for ${what}`)
}

interface Proc {
  readonly child: ChildProcess
  stdout: string
  stderr: string
  readonly exited: Promise<number | null>
}

const start = (command: string, args: ReadonlyArray<string>, env: Record<string, string> = {}): Proc => {
  const child = spawn(command, args, { cwd: PROJECT_ROOT, env: { ...process.env, MAKA_RUNTIME_SAFE_BOUNDARY_RESUME: "", ...env } })
  const proc: Proc = {
    child,
    stdout: "",
    stderr: "",
    exited: new Promise((resolve) => child.on("exit", (code) => resolve(code)))
  }
  child.stdout!.on("data", (d) => proc.stdout += String(d))
  child.stderr!.on("data", (d) => proc.stderr += String(d))
  return proc
}

const host = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  start(process.execPath, ["--import", "tsx", MCP_CHILD_PATH, ...args], env)

/** A fresh workspace and server folder; over HTTP, the server running on loopback (killed at the end). */
const setup = async (transport: Transport) => {
  const root = mkdtempSync(join(tmpdir(), "rr-mcp-"))
  const ws = join(root, "ws")
  const srv = join(root, "srv")
  for (const d of [ws, srv]) rmSync(d, { recursive: true, force: true })
  await Promise.all([ws, srv].map((d) => import("node:fs/promises").then((fs) => fs.mkdir(d))))
  const server = transport === "http" ? start(process.execPath, ["--import", "tsx", MCP_SERVER_PATH, "http", srv]) : undefined
  if (server !== undefined) await until("the HTTP server's port", () => existsSync(join(srv, "port")))
  const cleanup = () => {
    server?.child.kill("SIGKILL")
    rmSync(root, { recursive: true, force: true })
  }
  return { ws, srv, server, cleanup }
}

/** Runs the host until it is inside the call at `point`, then SIGKILLs it. */
const crashHost = async (ws: string, srv: string, transport: Transport, tool: McpProofTool, point: McpCrashPoint) => {
  if (point === "in_server") writeFileSync(join(srv, HOLD_FILE), "")
  const proc = host(["crash", ws, transport, srv, tool, point])
  await until(`the host at ${point} (${proc.stderr})`, () =>
    point === "in_server"
      ? readCallLog(srv).some((l) => l.phase === "working")
      : proc.stdout.includes(`at ${point}`))
  proc.child.kill("SIGKILL")
  await proc.exited
}

/** Boots a new host with the flag (repair → reconcile → continuation): its report. */
const boot = async (ws: string, srv: string, transport: Transport, tool: McpProofTool, env: Record<string, string> = {}) => {
  const proc = host(["boot", ws, transport, srv, tool, "-"], { MAKA_RUNTIME_SAFE_BOUNDARY_RESUME: "1", ...env })
  await proc.exited
  const line = proc.stdout.split("\n").find((l) => l.startsWith("{\"startup\""))
  assert.isDefined(line, `boot printed no report: ${proc.stdout} ${proc.stderr}`)
  return JSON.parse(line!) as {
    readonly reconciled: ReadonlyArray<{ callId: string; outcome: string; reason: string }>
    readonly continuations: ReadonlyArray<{
      outcome: string
      codes: ReadonlyArray<string>
      findings: ReadonlyArray<{ reason: string; detail: string; ref: string | null; source: string | null }>
    }>
  }
}

const cli = async (args: ReadonlyArray<string>) => {
  const proc = start(BIN, args)
  const code = await proc.exited
  return { code, stdout: proc.stdout, stderr: proc.stderr }
}

const appended = (srv: string): number =>
  existsSync(join(srv, APPENDED_FILE)) ? readFileSync(join(srv, APPENDED_FILE), "utf8").split("\n").filter((l) => l.length > 0).length : 0

const POINTS: ReadonlyArray<McpCrashPoint> = ["after_t1", "in_server", "before_t2"]

const crashAndBoot = (transport: Transport, tool: McpProofTool, point: McpCrashPoint) =>
  Effect.promise(async () => {
    const { cleanup, srv, ws } = await setup(transport)
    try {
      await crashHost(ws, srv, transport, tool, point)
      const before = readCallLog(srv).length
      const report = await boot(ws, srv, transport, tool)
      const where = `${transport} ${tool} killed at ${point}`
      const log = readCallLog(srv)
      if (tool === "lookup" || tool === "set_value") {
        // Re-run on the next start (read-only always; idempotent here with the flag), then the turn continues.
        assert.deepStrictEqual(report.reconciled, [{
          callId: MCP_CALL,
          outcome: "completed",
          reason: tool === "lookup" ? "reexecuted_read_only" : "reexecuted_idempotent"
        }], where)
        assert.deepStrictEqual(report.continuations.map((c) => c.outcome), ["continued"], where)
        assert.isTrue(log.slice(before - 1).some((l) => l.tool === tool && l.phase === "done"), `${where}: the re-run reached the server`)
        const keys = log.map((l) => l.key)
        if (tool === "set_value") {
          // Every request the server saw carried the one key T1 recorded (the operation id).
          assert.isTrue(keys.length >= 2 && keys.every((k) => typeof k === "string" && k.startsWith("op_") && k === keys[0]), `${where}: ${JSON.stringify(keys)}`)
        } else {
          assert.isTrue(keys.every((k) => k === null), `${where}: a read-only call sends no key`)
        }
      } else {
        // Destructive: never re-run; blocked, named by inspect (server and tool), settled by resolve.
        assert.deepStrictEqual(report.reconciled, [{ callId: MCP_CALL, outcome: "left", reason: "needs_person" }], where)
        assert.deepStrictEqual(report.continuations.map((c) => [c.outcome, [...c.codes]]), [["parked", ["dangling_tool_state"]]], where)
        const lines = appended(srv)
        assert.strictEqual(lines, point === "before_t2" ? 1 : 0, `${where}: the line was appended ${lines} times`)
        const inspected = await cli(["inspect", ws])
        assert.strictEqual(inspected.code, 1, `${where}: inspect ${inspected.stdout} ${inspected.stderr}`)
        assert.include(inspected.stdout, `${MCP_CALL}:append_line:indeterminate`, where)
        assert.include(inspected.stdout, `${MCP_CALL}: append_line was sent to MCP server rr-test-server 1.0.0, tool append_line`, where)
        const resolved = await cli(["resolve", "--run", MCP_TURN_IDS.runId, "--call", MCP_CALL, "--edit", JSON.stringify({ content: [{ type: "text", text: "checked by a person" }] }), "--actor", "tester", ws])
        assert.strictEqual(resolved.code, 0, `${where}: resolve ${resolved.stdout} ${resolved.stderr}`)
        const after = await cli(["inspect", ws])
        assert.include(after.stdout, `${MCP_CALL}:append_line:succeeded`, `${where}: ${after.stdout}`)
        assert.strictEqual(appended(srv), lines, `${where}: resolve ran nothing`)
      }
    } finally {
      cleanup()
    }
  })

describe("MCP tools through the tool boundary, host SIGKILLed inside each kind of call", () => {
  for (const tool of ["lookup", "set_value", "append_line"] as const) {
    for (const point of POINTS) {
      it.live(`stdio: ${tool} killed at ${point}`, () => crashAndBoot("stdio", tool, point), 180_000)
    }
    it.live(`Streamable HTTP: ${tool} killed in_server`, () => crashAndBoot("http", tool, "in_server"), 180_000)
  }
})

describe("the MCP server killed mid-call", () => {
  for (const transport of ["stdio", "http"] as const) {
    it.live(`${transport}: a typed failure, the operation indeterminate, never "not executed"`, () =>
      Effect.promise(async () => {
        const { cleanup, server, srv, ws } = await setup(transport)
        try {
          writeFileSync(join(srv, HOLD_FILE), "")
          const proc = host(["crash", ws, transport, srv, "append_line", "-"])
          await until("the server working", () => readCallLog(srv).some((l) => l.phase === "working"))
          const pid = readCallLog(srv).find((l) => l.phase === "working")!.pid
          if (server !== undefined) server.child.kill("SIGKILL")
          else process.kill(pid, "SIGKILL")
          await proc.exited
          assert.match(proc.stdout, /^failed ToolOutcomeUnknown (connection_closed|transport_failed|request_timeout)$/m, `${proc.stdout} ${proc.stderr}`)
          const inspected = await cli(["inspect", ws])
          assert.include(inspected.stdout, `${MCP_CALL}:append_line:indeterminate`, inspected.stdout)
          assert.notInclude(inspected.stdout, "not_dispatched")
          assert.strictEqual(appended(srv), 0)
        } finally {
          cleanup()
        }
      }), 180_000)
  }
})

describe("the catalog gate: a server that lists a dispatched tool otherwise since the crash (docs/mcp.md)", () => {
  // `lookup` settled (T2 committed), the host killed before the turn ended; the server then restarted listing it with
  // another `readOnlyHint`, or another description only: its fingerprint is not the one T1 recorded.
  for (const variant of ServerVariants) {
    it.live(`stdio: lookup killed after_t2, the server now ${variant}: parked with tool_catalog_mismatch naming the server and tool; as listed before, it continues`, () =>
      Effect.promise(async () => {
        const { cleanup, srv, ws } = await setup("stdio")
        try {
          await crashHost(ws, srv, "stdio", "lookup", "after_t2")
          const changed = await boot(ws, srv, "stdio", "lookup", { RR_MCP_SERVER_VARIANT: variant })
          assert.deepStrictEqual(changed.reconciled, [], "the call was settled: nothing to reconcile")
          assert.deepStrictEqual(changed.continuations, [{
            outcome: "parked",
            codes: ["tool_catalog_mismatch"],
            findings: [{
              reason: "tool_catalog_mismatch",
              detail: "tool_changed",
              ref: "lookup",
              source: "MCP server rr-test-server 1.0.0, tool lookup"
            }]
          }], variant)
          // Parked: the continued turn never ran, so the server saw the one call of the crashed run.
          assert.strictEqual(readCallLog(srv).filter((l) => l.tool === "lookup" && l.phase === "done").length, 1)
          // The server listing the tool as T1 recorded it again: the same run continues.
          const same = await boot(ws, srv, "stdio", "lookup")
          assert.deepStrictEqual(same.continuations.map((c) => [c.outcome, [...c.codes]]), [["continued", []]], variant)
        } finally {
          cleanup()
        }
      }), 180_000)
  }
})

// The run's committed events, read from the workspace's SQLite ledger (read-only).
const ledgerEvents = (ws: string) =>
  Effect.runPromise(
    Effect.flatMap(RuntimeEventStore, (store) => store.readRunFrom(RunId.make(MCP_TURN_IDS.runId), 1, 100_000)).pipe(
      Effect.provide(layerStore("sqlite", { workspace: ws, readOnly: true }).pipe(Layer.provide(NodeWorkspaceLock.layer))),
      Effect.scoped,
      Effect.provide(NodeContext.layer)
    )
  )

/** `runtime-resume console WS` (its own process group, killed by its pid): its base URL and token once printed. */
const startConsole = async (ws: string) => {
  const proc = spawn(BIN, ["console", ws], { cwd: PROJECT_ROOT, detached: true, stdio: ["ignore", "pipe", "pipe"] })
  let out = ""
  let err = ""
  proc.stdout!.on("data", (d) => out += String(d))
  proc.stderr!.on("data", (d) => err += String(d))
  const stop = () => {
    try {
      process.kill(-proc.pid!, "SIGKILL")
    } catch {
      // gone already
    }
  }
  try {
    await until(`the console's URL (${err})`, () => /^http:\/\/127\.0\.0\.1:\d+\/\?token=\S+$/m.test(out))
  } catch (error) {
    stop()
    throw error
  }
  const m = /^(http:\/\/127\.0\.0\.1:\d+)\/\?token=(\S+)$/m.exec(out)!
  const base = m[1]!
  // The URL's token, exchanged once for the session cookie, as a browser does when it opens the printed URL.
  const login = await fetch(`${base}/?token=${m[2]!}`, { redirect: "manual" })
  assert.strictEqual(login.status, 303)
  const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0]!
  return {
    stop,
    get: async (path: string) => {
      const res = await fetch(`${base}${path}`, { headers: { cookie } })
      return { status: res.status, body: await res.text() }
    },
    post: async (path: string, form: Record<string, string>) => {
      const res = await fetch(`${base}${path}`, {
        method: "POST",
        redirect: "manual",
        headers: { cookie, origin: base, "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams(form).toString()
      })
      return { status: res.status, location: decodeURIComponent(res.headers.get("location") ?? "") }
    }
  }
}

describe("the recovery console settles a blocked MCP call (docs/mcp.md)", () => {
  it.live("stdio: append_line killed before_t2; the run's page names the server and tool; the person's retry is recorded once; the next start continues", () =>
    Effect.promise(async () => {
      const { cleanup, srv, ws } = await setup("stdio")
      try {
        await crashHost(ws, srv, "stdio", "append_line", "before_t2")
        const parked = await boot(ws, srv, "stdio", "append_line")
        assert.deepStrictEqual(parked.continuations.map((c) => [c.outcome, [...c.codes]]), [["parked", ["dangling_tool_state"]]])
        assert.strictEqual(appended(srv), 1)
        const served = await startConsole(ws)
        try {
          const runPath = `/run/${encodeURIComponent(MCP_TURN_IDS.runId)}`
          const page = await served.get(runPath)
          assert.strictEqual(page.status, 200)
          // The blocked call's form names where T1 recorded it was sent, as inspect does.
          const form = new RegExp(`<form method="post" action="[^"]*" class="resolve" data-call="${MCP_CALL}">.*?</form>`, "s").exec(page.body)
          assert.isNotNull(form, page.body)
          assert.include(form![0], "sent to MCP server rr-test-server 1.0.0, tool append_line")
          const csrf = /data-csrf="([^"]+)"/.exec(page.body)![1]!
          const action = `${runPath}/resolve?call=${MCP_CALL}`
          const settled = await served.post(action, { csrf, choice: "retry", actor: "tester" })
          assert.strictEqual(settled.status, 303)
          assert.notInclude(settled.location, "error=", settled.location)
          assert.include(settled.location, "by tester", settled.location)
          // The same form sent again (a double submit): the decision is already recorded, nothing more is written.
          const again = await served.post(action, { csrf, choice: "retry", actor: "tester" })
          assert.strictEqual(again.status, 303)
          assert.include(again.location, "this decision was already recorded", again.location)
          const after = await served.get(runPath)
          assert.notMatch(after.body, new RegExp(`class="resolve" data-call="${MCP_CALL}"`))
          assert.match(after.body, new RegExp(`data-call="${MCP_CALL}" data-status="settled-person"`))
        } finally {
          served.stop()
        }
        // The ledger: exactly one decision on the call, by the person; inspect shows it settled and the run moved on.
        const decisions = (await ledgerEvents(ws)).filter((r) => r.event.body._tag === "RecoveryDecided")
        assert.deepStrictEqual(decisions.map((r) => (r.event.body as { callId: string }).callId), [MCP_CALL])
        const inspected = await cli(["inspect", "--json", ws])
        const run = JSON.parse(inspected.stdout).runs.find((r: { runId: string }) => r.runId === MCP_TURN_IDS.runId)
        const op = run.plan.operations.find((o: { callId: string }) => o.callId === MCP_CALL)
        assert.deepStrictEqual([op.recovery.provenance.kind, op.recovery.provenance.actor], ["manual", "tester"], inspected.stdout)
        assert.notStrictEqual(run.decision, "blocked", inspected.stdout)
        // The next start continues the turn (the model told the outcome is unknown); nothing ran the tool again.
        const next = await boot(ws, srv, "stdio", "append_line")
        assert.deepStrictEqual(next.continuations.map((c) => [c.outcome, [...c.codes]]), [["continued", []]])
        assert.strictEqual(appended(srv), 1)
      } finally {
        cleanup()
      }
    }), 300_000)
})
