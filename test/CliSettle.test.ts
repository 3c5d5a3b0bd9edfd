// The Phase 3 verbs through the REAL executable (bin/runtime-resume): a child SIGKILLed inside a real file write, then
// inspect (the next command) → repair → reconcile → resolve → resume --plan; and the verbs' bad input, typed, nothing written.
import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { CHILD_PATH, CHILD_RUN } from "../harness/FileWriteChild.js"

const OWNER_CHILD = fileURLToPath(new URL("../harness/OwnerLockChild.ts", import.meta.url))

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const BIN = fileURLToPath(new URL("../bin/runtime-resume", import.meta.url))
const FLAG = "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME"
const CALL = "call-1"

interface CliResult {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

const collect = (proc: { readonly stdout: Stream.Stream<Uint8Array, any>; readonly stderr: Stream.Stream<Uint8Array, any> }) =>
  [proc.stdout, proc.stderr].map((s) => s.pipe(Stream.decodeText(), Stream.mkString))

// Runs the real executable (the flag unset) and collects its exit code and both streams.
const cli = (...args: ReadonlyArray<string>) =>
  Effect.scoped(Effect.gen(function*() {
    const proc = yield* Command.make(BIN, ...args).pipe(Command.workingDirectory(ROOT), Command.env({ [FLAG]: "" }), Command.start)
    const [stdout, stderr] = collect(proc)
    const [out, err, code] = yield* Effect.all([stdout!, stderr!, proc.exitCode], { concurrency: "unbounded" })
    return { code: Number(code), stdout: out, stderr: err } satisfies CliResult
  }))

const json = (result: CliResult) => JSON.parse(result.stdout) as any

// A real child runs one write_file call on a managed run and is SIGKILLed at `point` (before or after the rename).
const crashInsideWrite = (store: "sqlite" | "jsonl", point: "before_rename" | "after_rename") =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-settle-" })
    const root = join(ws, "project")
    yield* fs.makeDirectory(root)
    yield* Effect.scoped(Effect.gen(function*() {
      const proc = yield* Command.make(process.execPath, "--import", "tsx", CHILD_PATH, store, ws, root, point, "managed").pipe(
        Command.workingDirectory(ROOT),
        Command.start
      )
      const reached = yield* proc.stdout.pipe(
        Stream.decodeText(),
        Stream.splitLines,
        Stream.takeUntil((line) => line === `at ${point}`),
        Stream.runCollect
      )
      assert.include([...reached], `at ${point}`)
      yield* proc.kill("SIGKILL")
    }))
    return { fs, ws, root, target: join(root, "notes.txt") }
  })

describe("settling a blocked turn through the CLI (docs/spec/05-reconciliation.md, docs/spec/06-cli.md)", () => {
  it.scoped("SIGKILL after the rename: inspect shows the next command; reconcile completes it; resume plans a continuation with the recovered result", () =>
    Effect.gen(function*() {
      const { fs, target, ws } = yield* crashInsideWrite("sqlite", "after_rename")
      assert.strictEqual(yield* fs.readFileString(target), "after")
      const blocked = yield* cli("inspect", ws)
      assert.strictEqual(blocked.code, 1)
      assert.include(blocked.stdout, `next: runtime-resume repair ${ws}`)
      assert.include(blocked.stdout, "directive: A tool call in this turn may or may not have run")
      assert.strictEqual((yield* cli("repair", ws)).code, 0)
      const sealed = yield* cli("inspect", ws)
      assert.include(sealed.stdout, `next: runtime-resume reconcile --run ${CHILD_RUN} ${ws}`)
      // One next step (docs/recovery.md): reconcile can settle the file write, so resolve is not offered before it.
      assert.notInclude(sealed.stdout, `runtime-resume resolve --run ${CHILD_RUN} --call ${CALL} --edit`)
      const reconciled = yield* cli("reconcile", "--json", ws)
      assert.strictEqual(reconciled.code, 0, reconciled.stderr)
      const doc = json(reconciled)
      assert.strictEqual(doc.workspace, ws)
      assert.strictEqual(doc.store, "sqlite")
      assert.deepStrictEqual(doc.operations.map((o: any) => [o.runId, o.callId, o.outcome, o.reason]), [
        [CHILD_RUN, CALL, "completed", "reconcile_matches_expected_state"]
      ])
      assert.match(doc.operations[0].operationId, /^op_/)
      const settled = json(yield* cli("inspect", "--json", ws))
      const op = settled.runs[0].plan.operations[0]
      assert.strictEqual(op.status, "succeeded")
      assert.deepStrictEqual([op.recovery.disposition, op.recovery.reasonCode, op.recovery.provenance.actor], [
        "completed",
        "reconcile_matches_expected_state",
        "reconcile:write_file"
      ])
      const plan = yield* cli("resume", "--plan", "--json", "--tool", "write_file", ws)
      const planned = json(plan)
      assert.strictEqual(planned.plan._tag, "AwaitingConfirmation", plan.stdout)
      assert.strictEqual(plan.code, 1)
      // The replay ends with the recovered response.
      const replay = planned.plan.candidate.replay.flatMap((s: any) => s.refs.map((r: any) => r.id))
      assert.match(replay[replay.length - 1], /:reconcile:response$/)
      assert.strictEqual(yield* fs.readFileString(target), "after", "the file was not written again")
    }).pipe(Effect.provide(NodeContext.layer)), { timeout: 120_000 })

  it.scoped("the file changed by someone else: reconcile parks reconcile_diverged (exit 1); resolve --edit records the person's result; resume plans a continuation", () =>
    Effect.gen(function*() {
      const { fs, target, ws } = yield* crashInsideWrite("jsonl", "after_rename")
      yield* fs.writeFileString(target, "their version")
      assert.strictEqual((yield* cli("repair", ws)).code, 0)
      const parked = yield* cli("reconcile", ws)
      assert.strictEqual(parked.code, 1)
      assert.include(parked.stdout, "reconcile_diverged")
      assert.include(parked.stdout, `runtime-resume resolve --run ${CHILD_RUN} --call ${CALL} --edit`)
      const inspected = yield* cli("inspect", ws)
      assert.strictEqual(inspected.code, 1)
      assert.include(inspected.stdout, "parked reconcile_diverged by reconciler:reconcile:write_file")
      const resolved = yield* cli("resolve", "--run", CHILD_RUN, "--call", CALL, "--edit", '{"kept":"their version"}', "--actor", "alice", "--json", ws)
      assert.strictEqual(resolved.code, 0, resolved.stdout)
      const doc = json(resolved)
      assert.deepStrictEqual(
        [doc.workspace, doc.store, doc.runId, doc.callId, doc.disposition, doc.reasonCode, doc.actor],
        [ws, "jsonl", CHILD_RUN, CALL, "completed", "manual_edit", "alice"]
      )
      assert.match(doc.operationId, /^op_/)
      // The same decision again is already recorded (exit 0); another one is refused (exit 2).
      const again = yield* cli("resolve", "--run", CHILD_RUN, "--call", CALL, "--edit", '{"kept":"their version"}', "--actor", "alice", ws)
      assert.strictEqual(again.code, 0)
      assert.include(again.stdout, "already recorded")
      const other = json(yield* cli("resolve", "--run", CHILD_RUN, "--call", CALL, "--abort", "--json", ws))
      assert.deepStrictEqual([other.error._tag, other.error.reason], ["ResolutionRefused", "already_settled"])
      const plan = json(yield* cli("resume", "--plan", "--json", "--tool", "write_file", ws))
      assert.strictEqual(plan.plan._tag, "AwaitingConfirmation")
      const replay = plan.plan.candidate.replay.flatMap((s: any) => s.refs.map((r: any) => r.id))
      assert.match(replay[replay.length - 1], /:manual:response$/, "the replay ends with the person's result")
      assert.strictEqual(yield* fs.readFileString(target), "their version", "outside changes are never overwritten")
    }).pipe(Effect.provide(NodeContext.layer)), { timeout: 120_000 })

  it.scoped("bad input: an edit that is not strict JSON or too large, an unknown run or call, a missing root — typed, nothing written; abort makes resume skip the run", () =>
    Effect.gen(function*() {
      const { fs, root, ws } = yield* crashInsideWrite("sqlite", "before_rename")
      assert.strictEqual((yield* cli("repair", ws)).code, 0)
      const exported = (yield* cli("export", ws)).stdout
      const expectRefusal = (reason: string, ...args: ReadonlyArray<string>) =>
        Effect.gen(function*() {
          const result = yield* cli("resolve", "--json", ...args, ws)
          assert.strictEqual(result.code, 2, result.stdout)
          const doc = json(result)
          assert.deepStrictEqual([doc.error._tag, doc.error.reason], ["ResolutionRefused", reason], result.stdout)
        })
      yield* expectRefusal("invalid_result", "--run", CHILD_RUN, "--call", CALL, "--edit", "{not json")
      yield* expectRefusal("invalid_result", "--run", CHILD_RUN, "--call", CALL, "--edit", "[1,]")
      const huge = join(ws, "huge.json")
      yield* fs.writeFileString(huge, JSON.stringify("x".repeat(17 * 1024 * 1024)))
      yield* expectRefusal("invalid_result", "--run", CHILD_RUN, "--call", CALL, "--edit-file", huge)
      yield* expectRefusal("operation_not_found", "--run", "no-such-run", "--call", CALL, "--retry")
      yield* expectRefusal("operation_not_found", "--run", CHILD_RUN, "--call", "no-such-call", "--retry")
      const usage = yield* cli("resolve", "--json", "--run", CHILD_RUN, "--call", CALL, "--retry", "--abort", ws)
      assert.strictEqual(usage.code, 2)
      assert.strictEqual(json(usage).error._tag, "UsageError")
      // A missing root: observe_failed, exit 1 (tried again next time), nothing written.
      const missing = yield* cli("reconcile", "--json", "--root", join(ws, "moved-away"), ws)
      assert.strictEqual(missing.code, 1)
      assert.deepStrictEqual(json(missing).operations.map((o: any) => [o.outcome, o.reason]), [["left", "observe_failed"]])
      assert.strictEqual((yield* cli("export", ws)).stdout, exported, "nothing was written")
      // Killed before the rename: the file is as before; reconcile parks matches_prior_state (no blind redo).
      assert.isFalse(yield* fs.exists(join(root, "notes.txt")))
      const prior = json(yield* cli("reconcile", "--json", ws))
      assert.deepStrictEqual(prior.operations.map((o: any) => o.reason), ["reconcile_matches_prior_state"])
      assert.isFalse(yield* fs.exists(join(root, "notes.txt")))
      assert.deepStrictEqual(yield* fs.readDirectory(root), [], "the leftover temp file was removed")
      // A person abandons the turn: inspect shows it as abandoned by whom, resume no longer picks the run.
      const aborted = yield* cli("resolve", "--run", CHILD_RUN, "--call", CALL, "--abort", "--actor", "bob", ws)
      assert.strictEqual(aborted.code, 0, aborted.stderr)
      // The abandoned run is settled for the workspace (docs/recovery.md, state abandoned): exit 0, and says by whom.
      const inspected = yield* cli("inspect", ws)
      assert.strictEqual(inspected.code, 0)
      assert.include(inspected.stdout, "abandoned by bob")
      const resumed = json(yield* cli("resume", "--plan", "--json", ws))
      assert.strictEqual(resumed.error._tag, "NoResumableRun")
    }).pipe(Effect.provide(NodeContext.layer)), { timeout: 180_000 })

  it.scoped("the owner lock: with a host holding it shared, reconcile (exclusive) fails WorkspaceLocked and writes nothing, resolve (shared) records the decision", () =>
    Effect.gen(function*() {
      const { ws } = yield* crashInsideWrite("sqlite", "after_rename")
      assert.strictEqual((yield* cli("repair", ws)).code, 0)
      const before = (yield* cli("export", ws)).stdout
      yield* Effect.scoped(Effect.gen(function*() {
        const host = yield* Command.make(process.execPath, "--import", "tsx", OWNER_CHILD, "shared", ws).pipe(
          Command.workingDirectory(ROOT),
          Command.start
        )
        const line = yield* host.stdout.pipe(Stream.decodeText(), Stream.splitLines, Stream.runHead)
        assert.include(line._tag === "Some" ? line.value : "", "Holding")
        const locked = yield* cli("reconcile", "--json", ws)
        assert.strictEqual(locked.code, 2)
        assert.strictEqual(json(locked).error._tag, "WorkspaceLocked")
        assert.strictEqual((yield* cli("export", ws)).stdout, before, "nothing was written")
        const resolved = yield* cli("resolve", "--run", CHILD_RUN, "--call", CALL, "--retry", "--json", ws)
        assert.strictEqual(resolved.code, 0, resolved.stdout)
        assert.strictEqual(json(resolved).reasonCode, "manual_retry")
        yield* host.kill("SIGKILL")
      }))
    }).pipe(Effect.provide(NodeContext.layer)), { timeout: 120_000 })
})
