// The first SIGTERM or SIGINT ends every verb (docs/reliability.md, File hygiene): a real `runtime-resume export` child, stuck writing to a
// stdout nobody reads (its teardown then waits for that pipe for ever), must still exit after one signal.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as NodePath from "node:path"
import { fileURLToPath } from "node:url"
import { RunId } from "../src/Domain/Ids.js"
import * as NodeLedgerFileSystem from "../src/Layers/NodeLedgerFileSystem.js"
import { layerStore } from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"

const BIN = fileURLToPath(new URL("../bin/runtime-resume", import.meta.url))
const ROOT = fileURLToPath(new URL("..", import.meta.url))
// A child still running this long after its signal has ignored it.
const EXIT_LIMIT_MS = 15_000

// A ledger far larger than a pipe's buffer (so `export` to an unread stdout blocks).
const seed = (workspace: string) =>
  Effect.gen(function*() {
    const ledger = yield* RuntimeEventStore
    const batches = Array.from({ length: 400 }, (_, i) => {
      const b = EventBuilder.make(`sig-${i}`)
      return { runId: RunId.make(`sig-${i}`), events: [b.opened(), b.user("x".repeat(400)), b.model("y".repeat(400))] }
    })
    yield* ledger.appendBatch(batches)
  }).pipe(
    Effect.provide(
      layerStore("sqlite", { workspace, readOnly: false }).pipe(
        Layer.provide(Layer.merge(NodeLedgerFileSystem.layer, NodeWorkspaceLock.layerNode))
      )
    ),
    Effect.scoped
  )

// Starts `export WS` with a stdout the test never reads, waits until that pipe is full (the child is then blocked on
// it), sends `signal`, and resolves with how the child ended, or "still running" after the limit (then SIGKILLs it).
const exportThenSignal = (workspace: string, signal: "SIGTERM" | "SIGINT") =>
  new Promise<string>((resolve) => {
    const child = spawn(BIN, ["export", workspace], { cwd: ROOT, stdio: ["ignore", "pipe", "ignore"] })
    child.stdout.pause()
    let signalled = false
    child.on("exit", (code, by) => resolve(`exited ${code ?? by}${signalled ? "" : " before the signal"}`))
    const poll = setInterval(() => {
      if (child.stdout.readableLength < child.stdout.readableHighWaterMark) return
      clearInterval(poll)
      signalled = true
      child.kill(signal)
      setTimeout(() => {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill("SIGKILL")
          resolve("still running")
        }
      }, EXIT_LIMIT_MS).unref()
    }, 50)
  })

describe("CLI: signals end a verb", () => {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it.live(`the first ${signal} ends an export blocked on an unread stdout (exit 2)`, () =>
      Effect.gen(function*() {
        const dir = fs.mkdtempSync(NodePath.join(os.tmpdir(), "rr-signal-"))
        const workspace = NodePath.join(dir, "ws")
        yield* Effect.ensuring(
          Effect.gen(function*() {
            yield* seed(workspace)
            const ended = yield* Effect.promise(() => exportThenSignal(workspace, signal))
            assert.strictEqual(ended, "exited 2")
          }),
          Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
        )
      }), 60_000)
  }
})
