// The MCP rows of the harness (docs/mcp.md): `M/<tool>/<point>`, a real MCP server (harness/McpServer.ts, a stdio child
// of the host) and a real SIGKILL of the host inside each kind of call, then a new host start; `M/server_killed`.
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { spawn } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { MCP_CHILD_PATH, type McpCrashPoint, type McpProofTool } from "./McpChild.js"
import { APPENDED_FILE, HOLD_FILE, readCallLog } from "./McpServer.js"

const TOOLS = ["lookup", "set_value", "append_line"] as const
const POINTS = ["after_t1", "in_server", "before_t2"] as const

/** The MCP rows' ids: one per tool kind and kill point, and the server killed mid-call. */
export const MCP_FAILPOINTS = [
  ...TOOLS.flatMap((tool) => POINTS.map((point) => `M/${tool}/${point}` as const)),
  "M/server_killed" as const
]
/** An MCP row's id. */
export const McpFailpointId = Schema.Literal(...MCP_FAILPOINTS)
/** An MCP row's id. */
export type McpFailpointId = typeof McpFailpointId.Type

/** What the killed host had committed: T1 of the call (its response never). */
export const McpCommittedPrefix = Schema.Literal("t1_dispatched")
/**
 * What a row decided: the reason reconcile gave at the next start (`reexecuted_read_only`, `reexecuted_idempotent`,
 * `needs_person`), or `indeterminate` for the server killed mid-call (a typed failure, never "not executed").
 */
export const McpDecision = Schema.Literal("reexecuted_read_only", "reexecuted_idempotent", "needs_person", "indeterminate")
/** What a row decided. */
export type McpDecision = typeof McpDecision.Type

/** One MCP row, in the harness's row shape. */
export interface McpRow {
  readonly failpoint: McpFailpointId
  readonly store: "sqlite"
  readonly committedPrefix: "t1_dispatched"
  readonly decision: McpDecision | null
  readonly expected: McpDecision
  readonly markerWritten: null
  readonly deterministic: null
  readonly ledgerUnchanged: null
  readonly pass: boolean
  readonly error?: { readonly _tag: string; readonly message: string }
}

const expectedOf = (tool: McpProofTool): McpDecision =>
  tool === "lookup" ? "reexecuted_read_only" : tool === "set_value" ? "reexecuted_idempotent" : "needs_person"

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const run = (args: ReadonlyArray<string>, env: Record<string, string>, killWhen?: (stdout: string) => boolean) =>
  new Promise<{ stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", MCP_CHILD_PATH, ...args], {
      env: { ...process.env, MAKA_RUNTIME_SAFE_BOUNDARY_RESUME: "", ...env }
    })
    let stdout = ""
    let stderr = ""
    let poll: ReturnType<typeof setInterval> | undefined
    const check = () => {
      if (killWhen !== undefined && killWhen(stdout)) child.kill("SIGKILL")
    }
    child.stdout.on("data", (d) => {
      stdout += String(d)
      check()
    })
    child.stderr.on("data", (d) => stderr += String(d))
    if (killWhen !== undefined) poll = setInterval(check, 100)
    child.on("exit", () => {
      if (poll !== undefined) clearInterval(poll)
      resolve({ stdout, stderr })
    })
  })

const bootReason = (stdout: string): string | undefined => {
  const line = stdout.split("\n").find((l) => l.startsWith("{\"startup\""))
  if (line === undefined) return undefined
  const report = JSON.parse(line) as { reconciled: ReadonlyArray<{ reason: string }> }
  return report.reconciled[0]?.reason
}

const rowOf = (failpoint: McpFailpointId, expected: McpDecision, decision: McpDecision | null, problems: ReadonlyArray<string>): McpRow => ({
  failpoint,
  store: "sqlite",
  committedPrefix: "t1_dispatched",
  decision,
  expected,
  markerWritten: null,
  deterministic: null,
  ledgerUnchanged: null,
  pass: problems.length === 0 && decision === expected,
  ...(problems.length > 0 || decision !== expected
    ? { error: { _tag: "McpRowFailed", message: [...problems, ...(decision !== expected ? [`decided ${decision}, expected ${expected}`] : [])].join("; ") } }
    : {})
})

const appendedLines = (srv: string): number =>
  existsSync(join(srv, APPENDED_FILE)) ? readFileSync(join(srv, APPENDED_FILE), "utf8").split("\n").filter((l) => l.length > 0).length : 0

/**
 * Runs one MCP row in a fresh workspace: SIGKILLs the host at `M/<tool>/<point>` (or kills the server mid-call), then
 * starts a new host with the flag and checks: read-only and idempotent calls re-run (the idempotent one with T1's key,
 * seen by the server each time), the destructive one left to a person with its effect at most once.
 */
export const runMcpRow = (failpoint: McpFailpointId): Effect.Effect<McpRow> =>
  Effect.promise(async () => {
    const root = mkdtempSync(join(tmpdir(), "rr-mcp-harness-"))
    const ws = join(root, "ws")
    const srv = join(root, "srv")
    mkdirSync(ws)
    mkdirSync(srv)
    try {
      const problems: Array<string> = []
      if (failpoint === "M/server_killed") {
        writeFileSync(join(srv, HOLD_FILE), "")
        const done = run(["crash", ws, "stdio", srv, "append_line", "-"], {})
        for (let i = 0; i < 900 && !readCallLog(srv).some((l) => l.phase === "working"); i++) await sleep(100)
        const working = readCallLog(srv).find((l) => l.phase === "working")
        if (working === undefined) return rowOf(failpoint, "indeterminate", null, ["the server never started the call"])
        process.kill(working.pid, "SIGKILL")
        const out = await done
        const typed = /^failed ToolOutcomeUnknown /m.test(out.stdout)
        if (!typed) problems.push(`the host did not fail with ToolOutcomeUnknown: ${out.stdout} ${out.stderr}`)
        const boot = await run(["boot", ws, "stdio", srv, "append_line", "-"], { MAKA_RUNTIME_SAFE_BOUNDARY_RESUME: "1" })
        if (bootReason(boot.stdout) !== "needs_person") problems.push(`after the server's death the call was not left indeterminate: ${boot.stdout}`)
        if (appendedLines(srv) !== 0) problems.push("the killed server's line was appended")
        return rowOf(failpoint, "indeterminate", typed ? "indeterminate" : null, problems)
      }
      const [, tool, point] = failpoint.split("/") as [string, McpProofTool, McpCrashPoint]
      if (point === "in_server") writeFileSync(join(srv, HOLD_FILE), "")
      await run(["crash", ws, "stdio", srv, tool, point], {}, (stdout) =>
        point === "in_server" ? readCallLog(srv).some((l) => l.phase === "working") : stdout.includes(`at ${point}`))
      const before = readCallLog(srv).length
      const boot = await run(["boot", ws, "stdio", srv, tool, "-"], { MAKA_RUNTIME_SAFE_BOUNDARY_RESUME: "1" })
      const reason = bootReason(boot.stdout)
      const log = readCallLog(srv)
      if (tool !== "append_line" && !log.slice(before).some((l) => l.tool === tool && l.phase === "done")) {
        problems.push("the re-run never reached the server")
      }
      if (tool === "set_value") {
        const keys = log.map((l) => l.key)
        if (!(keys.length >= 2 && keys.every((k) => k !== null && k === keys[0]))) problems.push(`the server saw keys ${JSON.stringify(keys)}`)
      }
      if (tool === "append_line" && appendedLines(srv) !== (point === "before_t2" ? 1 : 0)) {
        problems.push(`the line was appended ${appendedLines(srv)} times`)
      }
      const decision = reason === "reexecuted_read_only" || reason === "reexecuted_idempotent" || reason === "needs_person" ? reason : null
      if (decision === null) problems.push(`the new host's boot: ${boot.stdout} ${boot.stderr}`)
      return rowOf(failpoint, expectedOf(tool), decision, problems)
    } finally {
      rmSync(root, { recursive: true, force: true })
    }
  })
