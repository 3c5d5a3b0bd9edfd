// The README's "Write a host" example (examples/host.ts) runs as documented: SIGKILLed inside its tool it leaves the
// side effect undone, and the next start repairs the interrupted run (blocked, operation indeterminate), then runs a turn.
import { Command, FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Stream } from "effect"
import * as path from "node:path"

const ROOT = path.resolve(import.meta.dirname, "..")

// Runs the example on `ws`; the exit code is `undefined` when a signal ended it.
const runHost = (ws: string, ...flags: Array<string>) =>
  Effect.gen(function*() {
    const proc = yield* Command.make("node", "--import", "tsx", "examples/host.ts", ws, ...flags).pipe(
      Command.workingDirectory(ROOT),
      Command.start
    )
    const [out, err, code] = yield* Effect.all([
      proc.stdout.pipe(Stream.decodeText(), Stream.mkString),
      proc.stderr.pipe(Stream.decodeText(), Stream.mkString),
      Effect.either(proc.exitCode)
    ], { concurrency: 3 })
    return { out, err, code: Either.isRight(code) ? Number(code.right) : undefined }
  })

describe("examples/host.ts", () => {
  it.scopedLive("a crash inside the tool is repaired at the next start, and the next turn completes", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = path.join(yield* fs.makeTempDirectoryScoped({ prefix: "rr-host-" }), "ws")

      const crashed = yield* runHost(ws, "--crash")
      assert.notStrictEqual(crashed.code, 0, crashed.out + crashed.err)
      assert.match(crashed.out, /startup repair: 0 repaired, 0 failed, 0 unmanaged, 0 already terminal/)
      assert.notMatch(crashed.out, /^turn /m)
      assert.isFalse(yield* fs.exists(path.join(ws, "note.txt")), "the tool's side effect ran before the kill")

      const next = yield* runHost(ws)
      assert.strictEqual(next.code, 0, next.err)
      assert.match(next.out, /startup repair: 1 repaired, 0 failed, 0 unmanaged, 0 already terminal/)
      assert.match(next.out, /^ {2}run-[0-9a-f-]+: interrupted_run_closed$/m)
      assert.match(next.out, /^plan run-[0-9a-f-]+: blocked \(blocked\); operations: save_note indeterminate$/m)
      assert.match(next.out, /^turn run-[0-9a-f-]+: Completed \{"saved":"note.txt","operationId":"op_[0-9a-f]{32}"\}$/m)
      assert.match(next.out, /^plan run-[0-9a-f-]+: safe_replay \(completed\); operations: save_note succeeded$/m)
      assert.strictEqual(yield* fs.readFileString(path.join(ws, "note.txt")), "hello from the host")
    }).pipe(Effect.provide(NodeContext.layer)), 120_000)
})
