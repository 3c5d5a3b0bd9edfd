// A child process that talks in lines (the fencing and shared-writer tests): commands on stdin, one outcome a line on
// stdout; `waitFor` resolves with the first line that matches, or rejects when the child ends or the time is up.
import { type ChildProcess, spawn } from "node:child_process"

/** A running line-talking child. */
export interface LineChild {
  readonly proc: ChildProcess
  readonly lines: Array<string>
  readonly send: (line: string) => void
  readonly waitFor: (match: (line: string) => boolean, timeoutMs?: number) => Promise<string>
}

/** Starts `node --import tsx <script> ...args` (niced) in `cwd`. */
export const startLineChild = (script: string, args: ReadonlyArray<string>, cwd: string): LineChild => {
  const proc = spawn("nice", ["-n", "5", "node", "--import", "tsx", script, ...args], {
    cwd,
    stdio: ["pipe", "pipe", "pipe"]
  })
  const lines: Array<string> = []
  let buffer = ""
  let stderr = ""
  const waiters: Array<() => void> = []
  proc.stdout!.on("data", (chunk: Buffer) => {
    buffer += chunk.toString("utf8")
    let nl: number
    while ((nl = buffer.indexOf("\n")) >= 0) {
      lines.push(buffer.slice(0, nl))
      buffer = buffer.slice(nl + 1)
    }
    for (const w of waiters.splice(0)) w()
  })
  proc.stderr!.on("data", (chunk: Buffer) => void (stderr += chunk.toString("utf8")))
  proc.on("exit", () => {
    for (const w of waiters.splice(0)) w()
  })
  const waitFor = (match: (line: string) => boolean, timeoutMs = 60_000) =>
    new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no awaited line within ${timeoutMs} ms: ${lines.slice(-8).join("|")} ${stderr}`)), timeoutMs)
      const check = () => {
        const found = lines.find(match)
        if (found !== undefined) {
          clearTimeout(timer)
          resolve(found)
        } else if (proc.exitCode !== null || proc.signalCode !== null) {
          clearTimeout(timer)
          reject(new Error(`the child ended: ${lines.slice(-8).join("|")} ${stderr}`))
        } else waiters.push(check)
      }
      check()
    })
  return { proc, lines, send: (line) => void proc.stdin!.write(`${line}\n`), waitFor }
}
