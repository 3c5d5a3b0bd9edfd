// The CLI's output layer through the REAL executable (bin/runtime-resume, dist/): a reader that closes stdout early
// (`inspect --json | head -1`) ends every verb quietly with exit 0 (src/Cli/internal/common.ts, StdoutClosed), and
// `resolve --edit-file -` reads its result from stdin when stdin is a pipe (docs/cli.md).
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as SqliteRuntimeEventStore from "../src/Layers/SqliteRuntimeEventStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { sealedRun } from "./support/recoveryConformance.js"

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const BIN = fileURLToPath(new URL("../bin/runtime-resume", import.meta.url))

interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

// Runs the real executable. `closeStdout`: the read end of its stdout pipe is closed at once, before the CLI has
// written anything (a reader that went away, as `head` does); `stdin`: text piped to it, then the pipe's end.
const cli = (args: ReadonlyArray<string>, options: { readonly closeStdout?: boolean; readonly stdin?: string } = {}) =>
  Effect.async<Ran>((resume) => {
    const child = spawn(BIN, [...args], { cwd: ROOT, stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, NO_COLOR: "1" } })
    let stdout = ""
    let stderr = ""
    if (options.closeStdout === true) child.stdout.destroy()
    else child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
    child.stdin.on("error", () => {}) // a verb that never reads stdin may be gone before the write ends
    child.stdin.end(options.stdin ?? "")
    child.on("close", (code) => resume(Effect.succeed({ code, stdout, stderr })))
  })

// A SQLite workspace with one sealed run whose never_auto_retry call is indeterminate (inspect: blocked, exit 1).
const blockedWorkspace = (name: string) =>
  Effect.gen(function*() {
    const workspace = mkdtempSync(join(tmpdir(), `rr-out-${name}-`))
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(workspace, { recursive: true, force: true })))
    yield* Effect.scoped(Effect.gen(function*() {
      const store = yield* RuntimeEventStore
      yield* sealedRun(store, "run-a", [{ callId: "call-1", mode: "never_auto_retry" }])
    }).pipe(Effect.provide(SqliteRuntimeEventStore.layer({ workspace }).pipe(Layer.provide(NodeContext.layer)))))
    return workspace
  })

describe("a closed stdout ends the CLI quietly (exit 0), on every verb", () => {
  it.scoped("inspect, verify, export, import, repair, reconcile, resolve, resume and help: exit 0, nothing on stderr", () =>
    Effect.gen(function*() {
      const ws = yield* blockedWorkspace("pipe")
      const copy = yield* blockedWorkspace("copy")
      const file = join(copy, "export.jsonl")
      const exported = yield* cli(["export", ws, file])
      assert.strictEqual(exported.code, 0, exported.stderr)
      // Each exits non-zero or prints to stdout when its stdout is open: the blocked run makes inspect exit 1.
      const open = yield* cli(["inspect", ws])
      assert.strictEqual(open.code, 1, open.stderr)
      const verbs: ReadonlyArray<ReadonlyArray<string>> = [
        ["inspect", ws],
        ["inspect", "--json", ws],
        ["verify", ws],
        ["verify", "--json", ws],
        ["export", ws],
        ["import", join(copy, "again"), file],
        ["repair", ws],
        ["reconcile", ws],
        ["reconcile", "--json", ws],
        ["resume", "--plan", "--json", ws],
        ["resolve", "--run", "run-a", "--call", "call-1", "--abort", "--json", ws],
        ["resolve", "--run", "run-a", "--call", "call-1", "--abort", ws],
        ["--help"],
        ["inspect", "--help"],
        ["--version"],
        ["inspect", "--no-such-flag", "--json", ws]
      ]
      for (const args of verbs) {
        const ran = yield* cli(args, { closeStdout: true })
        assert.strictEqual(ran.code, 0, `${args.join(" ")}: exit ${ran.code}; stderr: ${ran.stderr}`)
        assert.notMatch(ran.stderr, /EPIPE|Error|internal error|node:/, args.join(" "))
      }
    }))
})

describe("resolve --edit-file - (docs/cli.md)", () => {
  it.scoped("reads the result from stdin when stdin is a pipe; a result that is not JSON is refused, nothing written", () =>
    Effect.gen(function*() {
      const ws = yield* blockedWorkspace("stdin")
      const bad = yield* cli(["resolve", "--run", "run-a", "--call", "call-1", "--edit-file", "-", "--json", ws], { stdin: "not json" })
      assert.strictEqual(bad.code, 2, bad.stderr)
      assert.strictEqual(JSON.parse(bad.stdout).error.reason, "invalid_result")
      const ran = yield* cli(["resolve", "--run", "run-a", "--call", "call-1", "--edit-file", "-", "--json", ws], {
        stdin: "{\"kept\": \"their version\"}\n"
      })
      assert.strictEqual(ran.code, 0, ran.stderr)
      const doc = JSON.parse(ran.stdout)
      assert.strictEqual(doc.reasonCode, "manual_edit")
      assert.isFalse(doc.alreadyRecorded)
      const again = yield* cli(["resolve", "--run", "run-a", "--call", "call-1", "--edit-file", "-", "--json", ws], {
        stdin: "{\"kept\": \"their version\"}"
      })
      assert.strictEqual(again.code, 0, again.stderr)
      assert.isTrue(JSON.parse(again.stdout).alreadyRecorded)
    }))
})
