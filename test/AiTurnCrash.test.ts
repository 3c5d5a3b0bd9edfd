// Crash proofs of the durable @effect/ai turn (docs/spec/04-continuation.md, "Hosts"): a real AiHost child SIGKILLed at the write call's boundaries
// (after T1, inside the handler before and after the rename, after T2) or after the read call's T1, on SQLite and JSONL;
// then a new host boots (repair → reconcile → continuation, with the flag) as docs/spec/03-tool-boundary.md/04/05 say; no content leaked.
import * as Command from "@effect/platform/Command"
import { FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Option, Schema, Stream } from "effect"
import { createHash, randomUUID } from "node:crypto"
import { join } from "node:path"
import * as AiAgent from "../harness/AiAgent.js"
import { AI_CHILD_PATH, AI_TURN_IDS, type AiCrashPoint, BootLine } from "../harness/AiTurnChild.js"
import { workspaceStores } from "../harness/ContinuationChild.js"
import { RunId } from "../src/Domain/Ids.js"
import type { RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import { planResume } from "../src/Domain/Rules/PlanResume.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"

const PROJECT_ROOT = join(AI_CHILD_PATH, "..", "..")

const canaries = (): AiAgent.AgentContent => {
  const id = randomUUID().slice(0, 8)
  return { prompt: `CANARY-PROMPT-${id}`, note: `CANARY-NOTE-${id}`, written: `CANARY-WRITTEN-${id}`, intro: `CANARY-INTRO-${id}`, reply: `CANARY-REPLY-${id}` }
}

// Spawns the child; returns its stdout lines as they come and its whole stderr once it ends.
const spawn = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Command.make(process.execPath, "--import", "tsx", AI_CHILD_PATH, ...args).pipe(
    Command.workingDirectory(PROJECT_ROOT),
    Command.env(env),
    Command.start
  )

const collect = (stream: Stream.Stream<Uint8Array, unknown>) =>
  stream.pipe(Stream.decodeText(), Stream.runFold("", (a, b) => a + b), Effect.orElseSucceed(() => ""))

// Runs a child to its end: its stdout and stderr.
const runChild = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.scoped(Effect.gen(function*() {
    const proc = yield* spawn(args, env)
    const [stdout, stderr] = yield* Effect.all([collect(proc.stdout), collect(proc.stderr)], { concurrency: 2 })
    yield* proc.exitCode.pipe(Effect.ignore)
    return { stdout, stderr }
  }))

const BIN = join(PROJECT_ROOT, "bin", "runtime-resume")

// Runs the real executable (the flag unset): its exit code and both streams.
const runCli = (args: ReadonlyArray<string>) =>
  Effect.scoped(Effect.gen(function*() {
    const proc = yield* Command.make(BIN, ...args).pipe(
      Command.workingDirectory(PROJECT_ROOT),
      Command.env({ MAKA_RUNTIME_SAFE_BOUNDARY_RESUME: "" }),
      Command.start
    )
    const [stdout, stderr, code] = yield* Effect.all([collect(proc.stdout), collect(proc.stderr), proc.exitCode], { concurrency: 3 })
    return { code: Number(code), stdout, stderr }
  }))

// Runs the crash child until it prints `at <point>`, then SIGKILLs it: its stderr.
const crashChild = (store: string, workspace: string, point: AiCrashPoint, content: AiAgent.AgentContent) =>
  Effect.scoped(Effect.gen(function*() {
    const proc = yield* spawn(["crash", store, workspace, point, JSON.stringify(content)])
    const stderr = yield* Effect.fork(collect(proc.stderr))
    const reached = yield* proc.stdout.pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.filter((line) => line === `at ${point}`),
      Stream.runHead,
      Effect.orElseSucceed(() => Option.none<string>()),
      Effect.timeout("60 seconds")
    )
    yield* proc.kill("SIGKILL").pipe(Effect.ignore)
    const err = yield* stderr.await.pipe(Effect.flatten, Effect.orElseSucceed(() => ""))
    assert.isTrue(Option.isSome(reached), `the child did not reach ${point}: ${err}`)
    return err
  }))

// The ledger-visible conversation of some runs, without ids, timestamps or operation bindings.
const visible = (events: ReadonlyArray<RuntimeEvent>): Array<unknown> =>
  events.flatMap((e): Array<unknown> => {
    const b = e.body
    switch (b._tag) {
      case "UserMessage":
      case "ModelText":
        return [{ tag: b._tag, text: b.text }]
      case "FunctionCall":
        return [{ tag: b._tag, callId: b.callId, name: b.name, args: b.args }]
      case "FunctionResponse":
        return [{ tag: b._tag, callId: b.callId, name: b.name, result: b.result, isError: b.isError }]
      default:
        return []
    }
  })

const readRuns = (store: "sqlite" | "jsonl", workspace: string, runIds: ReadonlyArray<string>) =>
  Effect.scoped(Effect.gen(function*() {
    const ledger = Context.get(yield* Layer.build(workspaceStores(store, workspace, true)), RuntimeEventStore)
    const events: Array<RuntimeEvent> = []
    for (const runId of runIds) events.push(...(yield* ledger.readRun(RunId.make(runId))).map((r) => r.event))
    const plan = yield* planResume(ledger.readRunPages(RunId.make(runIds[0]!), 1000))
    return { events, plan }
  }))

const handlerLog = (workspace: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) =>
    fs.readFileString(join(workspace, AiAgent.HANDLER_LOG)).pipe(
      Effect.map((s) => s.trim().split("\n").filter((l) => l !== "")),
      Effect.orElseSucceed(() => [] as Array<string>)
    ))

const READ = `read_note ${AiAgent.READ_CALL}`
const WRITE = `write_file ${AiAgent.WRITE_CALL}`

describe("durable @effect/ai turn: crash proofs", () => {
  for (const store of ["sqlite", "jsonl"] as const) {
    it.live(`${store}: SIGKILL after T1, inside the handler (before/after the rename) and after T2 of the write call, or after T1 of the read call; a new host's boot reconciles, then parks or continues; no content in logs or spans`, () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const content = canaries()
        const flag = { MAKA_RUNTIME_SAFE_BOUNDARY_RESUME: "1" }
        const outputs: Array<string> = []

        // The same turn without a crash: the reference conversation.
        const reference = yield* fs.makeTempDirectoryScoped({ prefix: `rr-ai-${store}-ref-` })
        const ran = yield* runChild(["run", store, reference, "-", JSON.stringify(content)])
        assert.include(ran.stdout, "done", ran.stderr)
        outputs.push(ran.stderr)
        const referenceConversation = visible((yield* readRuns(store, reference, [AI_TURN_IDS.runId])).events)
        assert.deepStrictEqual(yield* handlerLog(reference), [READ, WRITE])

        const written = `sha256:${createHash("sha256").update(content.written).digest("hex")}`
        for (const point of ["after_t1", "in_implementation", "after_rename", "after_t2", "read_after_t1"] as const) {
          const workspace = yield* fs.makeTempDirectoryScoped({ prefix: `rr-ai-${store}-${point}-` })
          outputs.push(yield* crashChild(store, workspace, point, content))
          const where = `${store} ${point}`

          // The plan after the kill: the read call completed (or indeterminate when killed after its T1); the write
          // call indeterminate, or completed after T2.
          const crashed = yield* readRuns(store, workspace, [AI_TURN_IDS.runId])
          const statuses = crashed.plan.operations.map((op) => [op.callId, op.status])
          const logAtKill = yield* handlerLog(workspace)
          if (point === "read_after_t1") {
            assert.deepStrictEqual(statuses[0], [AiAgent.READ_CALL, "indeterminate"], where)
            assert.deepStrictEqual(logAtKill, [], where)
          } else {
            assert.deepStrictEqual(statuses, [
              [AiAgent.READ_CALL, "succeeded"],
              [AiAgent.WRITE_CALL, point === "after_t2" ? "succeeded" : "indeterminate"]
            ], where)
            assert.deepStrictEqual(logAtKill, point === "after_t1" ? [READ] : [READ, WRITE], where)
          }

          // A new host boots with the flag: repair closes the run, reconcile settles what it can, then the continuation
          // parks or goes on — all in the host's one start.
          const booted = yield* runChild(["boot", store, workspace, "-", JSON.stringify(content)], flag)
          outputs.push(booted.stderr)
          const line = Schema.decodeSync(BootLine)(booted.stdout.trim().split("\n").pop() ?? "")
          assert.deepStrictEqual(line.repaired, [{ runId: AI_TURN_IDS.runId, action: "interrupted_run_closed" }], where)
          assert.strictEqual(line.continuations.length, 1, where)
          const continuation = line.continuations[0]!
          switch (point) {
            case "after_t1":
            case "in_implementation":
              // The file was never written: observe sees the prior state, and reconcile parks the call for a person.
              assert.deepStrictEqual(line.reconciled, [
                { callId: AiAgent.WRITE_CALL, outcome: "parked", reason: "reconcile_matches_prior_state" }
              ], where)
              break
            case "after_rename":
              // The file is in place: observe completes the write with its recovered result; the handler is not re-run.
              assert.deepStrictEqual(line.reconciled, [
                { callId: AiAgent.WRITE_CALL, outcome: "completed", reason: "reconcile_matches_expected_state" }
              ], where)
              break
            case "after_t2":
              assert.deepStrictEqual(line.reconciled, [], where)
              break
            case "read_after_t1":
              // The read-only call is re-run at boot through the toolkit's own handler, with its call id.
              assert.deepStrictEqual(line.reconciled, [
                { callId: AiAgent.READ_CALL, outcome: "completed", reason: "reexecuted_read_only" }
              ], where)
              break
          }
          // No handler of a completed call ever runs again (and none at all after a park); only the read-only call
          // indeterminate after its T1 is re-run, once.
          assert.deepStrictEqual(yield* handlerLog(workspace), point === "read_after_t1" ? [READ] : logAtKill, where)
          if (point === "after_t1" || point === "in_implementation") {
            assert.strictEqual(continuation.outcome, "parked", where)
            assert.include(continuation.codes, "dangling_tool_state", where)
            assert.deepStrictEqual(line.prompts, [], `${where}: the model was called after a park`)
            if (point === "in_implementation") {
              // A person settles the parked write (the real CLI, the host down); the NEXT boot repairs nothing, yet
              // continues the turn an earlier boot parked: with the person's result, the handler never run again.
              const resolved = yield* runCli(["resolve", "--run", AI_TURN_IDS.runId, "--call", AiAgent.WRITE_CALL, "--edit",
                '{"written":"by a person"}', "--actor", "alice", "--store", store, workspace])
              assert.strictEqual(resolved.code, 0, `${where}: resolve: ${resolved.stdout} ${resolved.stderr}`)
              const again = yield* runChild(["boot", store, workspace, "-", JSON.stringify(content)], flag)
              outputs.push(again.stderr)
              const next = Schema.decodeSync(BootLine)(again.stdout.trim().split("\n").pop() ?? "")
              assert.deepStrictEqual(next.repaired, [], `${where}: second boot`)
              assert.deepStrictEqual(next.reconciled, [], `${where}: second boot`)
              assert.deepStrictEqual(next.continuations.map((c) => c.outcome), ["continued"], `${where}: second boot`)
              assert.strictEqual(next.prompts.length, 1, `${where}: second boot`)
              assert.deepStrictEqual(next.prompts[0]!.toolResults, [AiAgent.READ_CALL, AiAgent.WRITE_CALL], `${where}: second boot`)
              assert.deepStrictEqual(yield* handlerLog(workspace), logAtKill, `${where}: second boot`)
              // A third boot finds the turn continued (its claim): nothing more.
              const third = yield* runChild(["boot", store, workspace, "-", JSON.stringify(content)], flag)
              const last = Schema.decodeSync(BootLine)(third.stdout.trim().split("\n").pop() ?? "")
              assert.deepStrictEqual(last.continuations, [], `${where}: third boot`)
              assert.deepStrictEqual(last.prompts, [], `${where}: third boot`)
            }
            continue
          }
          assert.strictEqual(continuation.outcome, "continued", where)
          assert.strictEqual(line.prompts.length, 1, where)
          const prompt = line.prompts[0]!
          assert.deepStrictEqual(prompt.roles, ["user", "assistant", "tool"], where)
          if (point === "read_after_t1") {
            // The write call was never dispatched (provably never ran): the continued prompt holds only the read call
            // and its re-run result, once, paired with it.
            assert.deepStrictEqual(prompt.toolCalls, [AiAgent.READ_CALL], where)
            assert.deepStrictEqual(prompt.toolResults, [AiAgent.READ_CALL], where)
            continue
          }
          // One continued prompt: the user message, the assistant's text and both calls, both results once, paired
          // (after_rename: the write's result is the one reconcile recovered).
          assert.deepStrictEqual(prompt.toolCalls, [AiAgent.READ_CALL, AiAgent.WRITE_CALL], where)
          assert.deepStrictEqual(prompt.toolResults, [AiAgent.READ_CALL, AiAgent.WRITE_CALL], where)
          assert.deepStrictEqual(prompt.writeResultDigests, [written], where)
          // The same ledger-visible conversation as the turn without a crash (source run, then its continuation).
          const after = yield* readRuns(store, workspace, [AI_TURN_IDS.runId, continuation.continuationRunId!])
          assert.deepStrictEqual(visible(after.events), referenceConversation, where)
        }

        // The canary: no prompt, argument, result or reply string in any log line, span or lifecycle event.
        const text = outputs.join("\n")
        assert.include(text, "span DurableTurn.run", "the spans were not captured")
        assert.include(text, "continuation.execution_completed", "the lifecycle events were not captured")
        for (const canary of Object.values(content)) assert.notInclude(text, canary)
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 300_000)
  }
})
