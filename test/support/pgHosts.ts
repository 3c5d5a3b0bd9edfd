// Starts host child processes (test/support/pgHost.ts) for the multi-host PostgreSQL tests and follows their output:
// each a Node process with its own pool; its stdout lines are collected as they come.
import { spawn, type ChildProcess } from "node:child_process"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../..", import.meta.url))
const hostScript = fileURLToPath(new URL("./pgHost.ts", import.meta.url))

/** A host process: its stdout lines as they come, and its end. */
export interface Host {
  readonly child: ChildProcess
  readonly lines: Array<string>
  readonly waitFor: (line: string, timeoutMs?: number) => Promise<void>
  readonly exited: Promise<number | string>
}

const running = new Set<ChildProcess>()

/**
 * SIGKILLs every host still running (an afterEach of the suites): a test that fails midway must not leave a host
 * holding a transaction or a lock open on the shared server for the suites after it.
 */
export const killAllHosts = (): void => {
  for (const child of running) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  running.clear()
}

/** Starts a host child process with an order (see test/support/pgHost.ts). */
export const startHost = (order: Record<string, unknown>): Host => {
  const child = spawn("node", ["--import", "tsx", hostScript, JSON.stringify(order)], { cwd: root, stdio: ["ignore", "pipe", "pipe"] })
  running.add(child)
  child.once("exit", () => running.delete(child))
  const lines: Array<string> = []
  let buffer = ""
  const waiters: Array<() => void> = []
  child.stdout!.on("data", (chunk: Buffer) => {
    buffer += chunk.toString("utf8")
    let nl: number
    while ((nl = buffer.indexOf("\n")) >= 0) {
      lines.push(buffer.slice(0, nl))
      buffer = buffer.slice(nl + 1)
    }
    for (const w of waiters.splice(0)) w()
  })
  let stderr = ""
  child.stderr!.on("data", (chunk: Buffer) => void (stderr += chunk.toString("utf8")))
  const exited = new Promise<number | string>((resolve) =>
    child.on("exit", (code, signal) => {
      for (const w of waiters.splice(0)) w()
      resolve(code ?? signal ?? -1)
    })
  )
  const waitFor = (line: string, timeoutMs = 60_000) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no "${line}" line within ${timeoutMs} ms: ${lines.join("|")} ${stderr}`)), timeoutMs)
      const check = () => {
        if (lines.includes(line)) {
          clearTimeout(timer)
          resolve()
        } else if (child.exitCode !== null || child.signalCode !== null) {
          clearTimeout(timer)
          reject(new Error(`the host ended before "${line}": ${lines.join("|")} ${stderr}`))
        } else waiters.push(check)
      }
      check()
    })
  return { child, lines, waitFor, exited }
}

