// Crash proofs of MCP tools through the tool boundary (docs/mcp.md): a real MCP server (the SDK's, harness/McpServer.ts)
// as a stdio child of the host or on loopback Streamable HTTP; the host (an AiHost child) SIGKILLed before the request,
// while the server works and after its answer before T2; then booted again; and the server killed mid-call.
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { MCP_CALL, MCP_CHILD_PATH, MCP_TURN_IDS, type McpCrashPoint, type McpProofTool } from "../harness/McpChild.js"
import { APPENDED_FILE, HOLD_FILE, MCP_SERVER_PATH, readCallLog } from "../harness/McpServer.js"

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
const boot = async (ws: string, srv: string, transport: Transport, tool: McpProofTool) => {
  const proc = host(["boot", ws, transport, srv, tool, "-"], { MAKA_RUNTIME_SAFE_BOUNDARY_RESUME: "1" })
  await proc.exited
  const line = proc.stdout.split("\n").find((l) => l.startsWith("{\"startup\""))
  assert.isDefined(line, `boot printed no report: ${proc.stdout} ${proc.stderr}`)
  return JSON.parse(line!) as {
    readonly reconciled: ReadonlyArray<{ callId: string; outcome: string; reason: string }>
    readonly continuations: ReadonlyArray<{ outcome: string; codes: ReadonlyArray<string> }>
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
