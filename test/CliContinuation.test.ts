// The Phase 1 verbs of the `runtime-resume` CLI through the REAL executable (bin/runtime-resume) as a child process:
// startup `repair` on SQLite and JSONL, the owner lock held by another process, and `resume`'s plans, park reasons and exit codes.
import * as Command from "@effect/platform/Command"
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { fileURLToPath } from "node:url"
import { OwnerChildReport } from "../harness/OwnerLockChild.js"
import { RunHeader, type RunStatus, type StatusReason } from "../src/Domain/RunHeader.js"
import { ContinuationSource, SourceHighWater } from "../src/Domain/RuntimeEvent.js"
import type { RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import type { PersistentStore } from "../src/Layers/NodeRuntimeEventStore.js"
import { LEDGER_FILES } from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { layerWorkspaceStores } from "../src/Workspace/RepairWorkspace.js"
import { defaultRun } from "../src/Workspace/ResumeWorkspace.js"
import { MARKER_FILE_NAME } from "../src/Services/WorkspaceIdentity.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const BIN = fileURLToPath(new URL("../bin/runtime-resume", import.meta.url))
const OWNER_CHILD = fileURLToPath(new URL("../harness/OwnerLockChild.ts", import.meta.url))
const WS_ID = "7d444840-9dc0-4c6b-9a4f-7c1a1b2c3d4e"
const T1 = "t1_after_preflight_v1"
const FLAG = "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME"

interface CliResult {
  readonly args: ReadonlyArray<string>
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

// Runs the real executable (the flag unset unless `env` sets it) and collects its exit code and both streams.
const run = (env: Record<string, string>, args: ReadonlyArray<string>) =>
  Effect.scoped(Effect.gen(function*() {
    const proc = yield* Command.make(BIN, ...args).pipe(
      Command.workingDirectory(ROOT),
      Command.env({ [FLAG]: "", ...env }),
      Command.start
    )
    const text = (stream: typeof proc.stdout) => stream.pipe(Stream.decodeText(), Stream.mkString)
    const [stdout, stderr, code] = yield* Effect.all([text(proc.stdout), text(proc.stderr), proc.exitCode], {
      concurrency: "unbounded"
    })
    const result: CliResult = { args, code: Number(code), stdout, stderr }
    return result
  }))

const cli = (...args: ReadonlyArray<string>) => run({}, args)

const describeRun = (r: CliResult) => `runtime-resume ${r.args.join(" ")} -> ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`

const expectCode = (r: CliResult, code: number) => assert.strictEqual(r.code, code, describeRun(r))

// stdout must be exactly one JSON document.
const jsonOf = (r: CliResult): any => {
  const parsed = Either.try(() => JSON.parse(r.stdout))
  assert.isTrue(Either.isRight(parsed), `stdout is not one JSON document: ${describeRun(r)}`)
  return (parsed as Either.Right<never, unknown>).right
}

const tempDir = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "rr-cli-cont-" }))

const listing = (dir: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readDirectory(dir)).pipe(Effect.map((names) => [...names].sort()))

// Every file of a folder with its bytes, for "nothing changed" (SQLite's -wal/-shm, which a read-only open may leave, aside).
const snapshot = (dir: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const out: Array<[string, string]> = []
    for (const name of yield* listing(dir)) {
      if (name.endsWith("-wal") || name.endsWith("-shm")) continue
      out.push([name, Buffer.from(yield* fs.readFile(`${dir}/${name}`)).toString("base64")])
    }
    return out
  })

// Every header's status and every run's high-water, read in-process (SQLite rows, not file bytes: a close checkpoints).
const ledgerState = (store: PersistentStore, workspace: string) =>
  Effect.gen(function*() {
    const events = yield* RuntimeEventStore
    const headers = yield* RunHeaderStore
    const out: Array<string> = []
    for (const h of yield* headers.list()) out.push(`header ${h.runId} ${h.status} ${h.statusReason ?? "-"}`)
    for (const runId of yield* events.listRuns()) {
      const hw = yield* events.highWater(runId)
      out.push(`run ${runId} ${hw.seq} ${hw.digest}`)
    }
    return out
  }).pipe(Effect.provide(layerStores(store, workspace, true)), Effect.scoped)

const layerStores = (store: PersistentStore, workspace: string, readOnly: boolean) =>
  layerWorkspaceStores(store, { workspace, readOnly }).pipe(Layer.provide(NodeWorkspaceLock.layerNode))

const idsOf = (name: string): EventBuilder.RunIds => ({
  sessionId: "sess-1",
  invocationId: `inv-${name}`,
  runId: name,
  turnId: `turn-${name}`
})

const headerOf = (name: string, status: RunStatus = "running", statusReason?: StatusReason) => {
  const ids = idsOf(name)
  return new RunHeader({
    runId: ids.runId as RunHeader["runId"],
    sessionId: ids.sessionId as RunHeader["sessionId"],
    invocationId: ids.invocationId as RunHeader["invocationId"],
    turnId: ids.turnId as RunHeader["turnId"],
    status,
    ...(statusReason !== undefined ? { statusReason } : {}),
    workspaceId: WS_ID,
    createdAt: 1,
    updatedAt: 1
  })
}

interface SeedRun {
  readonly name: string
  readonly events: ReadonlyArray<RuntimeEvent>
  /** No header: an unmanaged run. */
  readonly header?: RunHeader
}

// Writes runs and headers in-process through the real layers (setup only; what is under test goes through the CLI).
const seed = (store: PersistentStore, workspace: string, runs: ReadonlyArray<SeedRun>) =>
  Effect.gen(function*() {
    const events = yield* RuntimeEventStore
    const headers = yield* RunHeaderStore
    for (const r of runs) {
      // Restore mode: the tool facts are written here without their dedicated writers (setup only).
      if (r.events.length > 0) {
        yield* events.appendBatch([{ runId: EventBuilder.make(idsOf(r.name)).runId, events: r.events }], { mode: "restore" })
      }
      if (r.header !== undefined) {
        const { status, statusReason, ...rest } = r.header
        const initial = status === "created" ? "created" : "running"
        yield* headers.create(new RunHeader({ ...rest, status: initial }))
        if (status !== initial) {
          yield* headers.setStatus(r.header.runId, status, { at: 2, ...(statusReason !== undefined ? { reason: statusReason } : {}) })
        }
      }
    }
  }).pipe(Effect.provide(layerStores(store, workspace, false)), Effect.scoped)

const writeMarker = (workspace: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.writeFileString(`${workspace}/${MARKER_FILE_NAME}`, `${WS_ID}\n`))

// Each of repair's cases: interrupted (events, no terminal), abandoned (header, no events), lagging (terminal event,
// header running), unmanaged (no header), closed (already terminal).
const repairCases = (): ReadonlyArray<SeedRun> => {
  const interrupted = EventBuilder.make(idsOf("interrupted"))
  const lagging = EventBuilder.make(idsOf("lagging"))
  const unmanaged = EventBuilder.make(idsOf("unmanaged"))
  const closed = EventBuilder.make(idsOf("closed"))
  return [
    { name: "interrupted", events: [interrupted.opened(), interrupted.user("hello"), interrupted.model("working")], header: headerOf("interrupted") },
    { name: "abandoned", events: [], header: headerOf("abandoned", "created") },
    { name: "lagging", events: [lagging.opened(), lagging.user("hi"), lagging.terminated("completed")], header: headerOf("lagging") },
    { name: "unmanaged", events: [unmanaged.opened(), unmanaged.user("imported")] },
    { name: "closed", events: [closed.opened(), closed.terminated("cancelled")], header: headerOf("closed", "cancelled") }
  ]
}

// A run whose tool call was answered before the crash, sealed by repair: eligible for a continuation.
const answered = (name: string, terminal = true): SeedRun => {
  const b = EventBuilder.make(idsOf(name))
  return {
    name,
    events: [
      b.opened(T1),
      b.user("list the files"),
      b.call("c1", "read", { path: "a" }),
      b.dispatched("c1", "read", { path: "a" }, "read_only"),
      b.response("c1", "read", { ok: true }, { operationBound: true }),
      ...(terminal ? [b.terminated("failed", "process_interrupted")] : [])
    ],
    header: terminal ? headerOf(name, "failed", "process_interrupted") : headerOf(name)
  }
}

// A run killed in the middle of its tool: the call was dispatched, no result; sealed by repair.
const midTool = (name: string): SeedRun => {
  const b = EventBuilder.make(idsOf(name))
  return {
    name,
    events: [
      b.opened(T1),
      b.user("deploy"),
      b.call("d1", "deploy", { env: "prod" }),
      b.dispatched("d1", "deploy", { env: "prod" }, "never_auto_retry"),
      b.terminated("failed", "process_interrupted")
    ],
    header: headerOf(name, "failed", "process_interrupted")
  }
}

// Starts harness/OwnerLockChild in a holding mode and waits for its report that it holds the owner lock.
const holdOwnerLock = (mode: "exclusive" | "shared", workspace: string) =>
  Effect.gen(function*() {
    const proc = yield* Command.make("node", "--import", "tsx", OWNER_CHILD, mode, workspace).pipe(
      Command.workingDirectory(ROOT),
      Command.start
    )
    const line = yield* proc.stdout.pipe(Stream.decodeText(), Stream.splitLines, Stream.runHead, Effect.timeout("60 seconds"))
    assert.isTrue(Option.isSome(line), "the owner-lock child exited before reporting")
    const report = yield* Schema.decodeUnknown(OwnerChildReport)(Option.getOrThrow(line))
    assert.deepStrictEqual([report._tag, "mode" in report ? report.mode : undefined], ["Holding", mode])
    return proc
  })

const killHard = (proc: CommandExecutor.Process) =>
  Effect.gen(function*() {
    yield* proc.kill("SIGKILL")
    yield* Effect.either(proc.exitCode)
  })

const Live = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.provide(effect, NodeContext.layer)

const STORES: ReadonlyArray<PersistentStore> = ["sqlite", "jsonl"]

describe("runtime-resume repair and resume (the real bin as a child process)", () => {
  for (const store of STORES) {
    it.scopedLive(`repair on ${store}: each action of 04's table, unmanaged left alone, a second run changes nothing`, () =>
      Live(Effect.gen(function*() {
        const ws = yield* tempDir
        yield* seed(store, ws, repairCases())
        const unmanagedBefore = (yield* ledgerState(store, ws)).filter((line) => line.startsWith("run unmanaged"))

        const first = yield* cli("repair", "--json", ws)
        expectCode(first, 0)
        const doc = jsonOf(first)
        assert.strictEqual(doc.workspace, ws)
        assert.strictEqual(doc.store, store)
        assert.deepStrictEqual(
          doc.repaired.map((r: any) => [r.runId, r.action, r.status, r.statusReason ?? "-", r.terminatedSeq ?? 0]),
          [
            ["interrupted", "interrupted_run_closed", "failed", "process_interrupted", 4],
            ["abandoned", "abandoned_continuation_closed", "failed", "continuation_abandoned_before_provider_call", 0],
            ["lagging", "header_caught_up", "completed", "-", 0]
          ]
        )
        assert.deepStrictEqual(doc.unmanaged, ["unmanaged"])
        assert.deepStrictEqual(doc.failed, [])
        assert.strictEqual(doc.alreadyTerminal, 1)

        const after = yield* ledgerState(store, ws)
        assert.includeMembers(after, [
          "header interrupted failed process_interrupted",
          "header abandoned failed continuation_abandoned_before_provider_call",
          "header lagging completed -",
          "header closed cancelled -"
        ])
        assert.isTrue(after.some((line) => line.startsWith("run interrupted 4 ")), after.join("\n"))
        assert.deepStrictEqual(after.filter((line) => line.startsWith("run unmanaged")), unmanagedBefore)
        assert.isFalse(after.some((line) => line.startsWith("run abandoned")), "nothing was appended for the abandoned run")

        // Idempotent: the second repair changes nothing; the human form says so.
        const second = yield* cli("repair", ws)
        expectCode(second, 0)
        assert.include(second.stdout, "no managed run needed repair")
        assert.include(second.stdout, "already terminal: 4")
        assert.include(second.stdout, "unmanaged (no header, left alone): unmanaged")
        assert.deepStrictEqual(yield* ledgerState(store, ws), after)
      })))
  }

  it.scopedLive("repair's human table names each action", () =>
    Live(Effect.gen(function*() {
      const ws = yield* tempDir
      yield* seed("jsonl", ws, repairCases())
      const r = yield* cli("repair", ws)
      expectCode(r, 0)
      const lines = r.stdout.split("\n")
      assert.match(lines[0]!, /^RUN\s+ACTION\s+STATUS\s+REASON\s+TERMINATED AT$/)
      assert.match(lines[1]!, /^interrupted\s+interrupted_run_closed\s+failed\s+process_interrupted\s+seq 4$/)
      assert.match(lines[2]!, /^abandoned\s+abandoned_continuation_closed\s+failed\s+continuation_abandoned_before_provider_call\s+-$/)
      assert.match(lines[3]!, /^lagging\s+header_caught_up\s+completed\s+-\s+-$/)
      assert.strictEqual(r.stderr, "")
    })))

  it.scopedLive("repair reports an unreadable run (exit 2, one JSON document) and leaves it exactly as it was", () =>
    Live(Effect.gen(function*() {
      const ws = yield* tempDir
      const b = EventBuilder.make(idsOf("tampered"))
      yield* seed("sqlite", ws, [
        { name: "tampered", events: [b.opened(), b.user("hello"), b.model("world")], header: headerOf("tampered") },
        ...repairCases().slice(0, 1)
      ])
      const file = `${ws}/${LEDGER_FILES.sqlite}`
      const db = new Database(file)
      const { bytes } = db.prepare("SELECT bytes FROM events WHERE run_id = ? AND seq = 2").get("tampered") as { bytes: Buffer }
      const flipped = Buffer.from(bytes)
      flipped[flipped.length - 3] = flipped[flipped.length - 3]! ^ 1
      db.prepare("UPDATE events SET bytes = ? WHERE run_id = ? AND seq = 2").run(flipped, "tampered")
      const rowsOf = (d: Database.Database) => d.prepare("SELECT run_id, seq, digest, bytes FROM events WHERE run_id = 'tampered' ORDER BY pos").all()
      const before = rowsOf(db)
      db.close()

      for (const args of [["repair", "--json", ws], ["repair", ws]]) {
        const r = yield* cli(...args)
        expectCode(r, 2)
        if (args.includes("--json")) {
          const doc = jsonOf(r)
          assert.deepStrictEqual(doc.failed.map((f: any) => [f.runId, f.error, f.reason]), [["tampered", "LedgerCorruption", "digest_mismatch"]])
          assert.isString(doc.failed[0].message)
          // The other run was still repaired.
          assert.deepStrictEqual(doc.repaired.map((x: any) => [x.runId, x.action]), [["interrupted", "interrupted_run_closed"]])
        } else {
          assert.match(r.stdout, /FAILED tampered: LedgerCorruption\(digest_mismatch\): .* \(left untouched\)/)
        }
      }
      const reopened = new Database(file, { readonly: true })
      assert.deepStrictEqual(rowsOf(reopened), before)
      reopened.close()
      assert.include(yield* ledgerState("sqlite", ws), "header tampered running -")
    })))

  it.scopedLive("repair while another process holds the owner lock: WorkspaceLocked, exit 2, nothing changed", () =>
    Live(Effect.gen(function*() {
      const ws = yield* tempDir
      yield* seed("sqlite", ws, repairCases())
      const before = yield* ledgerState("sqlite", ws)
      const holder = yield* holdOwnerLock("exclusive", ws)
      const started = Date.now()
      const locked = yield* cli("repair", "--json", ws)
      const waited = Date.now() - started
      expectCode(locked, 2)
      const doc = jsonOf(locked)
      assert.strictEqual(doc.error._tag, "WorkspaceLocked", describeRun(locked))
      assert.strictEqual(doc.error.holderPid, holder.pid)
      assert.strictEqual(doc.store, "sqlite")
      assert.isAtLeast(waited, 2_000, "repair waits the owner wait (2 s) before giving up")
      assert.deepStrictEqual(yield* ledgerState("sqlite", ws), before)
      // A live host (a shared holder) blocks repair too; once the holder is SIGKILLed, the OS frees the lock.
      yield* killHard(holder)
      const host = yield* holdOwnerLock("shared", ws)
      const plain = yield* cli("repair", ws)
      expectCode(plain, 2)
      assert.strictEqual(plain.stdout, "")
      assert.match(plain.stderr, /^WorkspaceLocked: /)
      assert.deepStrictEqual(yield* ledgerState("sqlite", ws), before)
      yield* killHard(host)
      const after = yield* cli("repair", "--json", ws)
      expectCode(after, 0)
      assert.strictEqual(jsonOf(after).repaired.length, 3)
    })))

  it.scopedLive("repair on a folder without a ledger: WorkspaceNotFound, exit 2, the folder left exactly as it was", () =>
    Live(Effect.gen(function*() {
      const ws = yield* tempDir
      const r = yield* cli("repair", "--json", ws)
      expectCode(r, 2)
      assert.strictEqual(jsonOf(r).error._tag, "WorkspaceNotFound")
      assert.deepStrictEqual(yield* listing(ws), [])
    })))

  for (const store of STORES) {
    it.scopedLive(`resume --plan on ${store}: AwaitingConfirmation, every park reason and next step, and nothing created`, () =>
      Live(Effect.gen(function*() {
        const ws = yield* tempDir
        yield* seed(store, ws, [answered("done"), midTool("crashed"), answered("open", false)])
        yield* writeMarker(ws)
        const before = yield* snapshot(ws)

        // The default run is the newest: the unrepaired one, which parks asking for repair.
        const newest = yield* cli("resume", "--plan", "--json", "--tool", "read", ws)
        expectCode(newest, 1)
        const newestDoc = jsonOf(newest)
        assert.strictEqual(newestDoc.runId, "open")
        assert.strictEqual(newestDoc.plan._tag, "Park")
        assert.strictEqual(newestDoc.plan.nextStep, "run_repair")
        assert.include(newestDoc.plan.reasons, "terminal_repair_failed")

        const [eligible, dangling, noTools] = yield* Effect.all([
          cli("resume", "--plan", "--json", "--tool", "read", "--run", "done", ws),
          cli("resume", "--plan", "--json", "--tool", "read", "--run", "crashed", ws),
          cli("resume", "--plan", "--json", "--run", "done", ws)
        ], { concurrency: 2 })
        expectCode(eligible, 1)
        const plan = jsonOf(eligible).plan
        assert.strictEqual(plan._tag, "AwaitingConfirmation", describeRun(eligible))
        assert.deepStrictEqual(plan.reasons, [])
        assert.strictEqual(plan.candidate.source.runId, "done")
        assert.strictEqual(plan.candidate.source.highWater.seq, 6)
        assert.strictEqual(plan.candidate.workspaceId, WS_ID)
        assert.deepStrictEqual(plan.candidate.replay[0].refs.map((r: any) => r.seq), [2, 3, 5])

        expectCode(dangling, 1)
        const parked = jsonOf(dangling).plan
        assert.strictEqual(parked._tag, "Park")
        assert.deepStrictEqual(parked.reasons, ["dangling_tool_state"])
        assert.strictEqual(parked.nextStep, "resolve_tool_operation")
        assert.deepStrictEqual(parked.findings.map((f: any) => [f.reason, f.runId, f.ref]), [["dangling_tool_state", "crashed", "d1"]])

        // Without --tool the CLI offers no tools: the replayed call parks.
        expectCode(noTools, 1)
        assert.deepStrictEqual(jsonOf(noTools).plan.reasons, ["tool_catalog_mismatch"])
        assert.strictEqual(jsonOf(noTools).plan.findings[0].ref, "read")

        // The human form names the reasons and the next step.
        const human = yield* cli("resume", "--plan", "--tool", "read", "--run", "crashed", ws)
        expectCode(human, 1)
        assert.match(human.stdout, /^run crashed: Park \(next step: resolve_tool_operation\) at seq 5\n/)
        assert.match(human.stdout, /dangling_tool_state\s+\S+\s+crashed\s+d1/)

        assert.deepStrictEqual(yield* snapshot(ws), before, "resume --plan changed or created nothing")
      })))
  }

  it.scopedLive("resume --plan creates nothing in a workspace without a marker, run headers or lock (JSONL)", () =>
    Live(Effect.gen(function*() {
      const ws = yield* tempDir
      const b = EventBuilder.make(idsOf("bare"))
      yield* seed("jsonl", ws, [{ name: "bare", events: [b.opened(), b.user("hi")] }])
      const fs = yield* FileSystem.FileSystem
      yield* fs.remove(`${ws}/run-headers.jsonl`)
      const before = yield* snapshot(ws)
      const [none, named] = yield* Effect.all([
        cli("resume", "--plan", "--json", ws),
        cli("resume", "--plan", "--json", "--run", "bare", ws)
      ], { concurrency: 2 })
      expectCode(none, 2)
      assert.strictEqual(jsonOf(none).error._tag, "NoResumableRun")
      expectCode(named, 1)
      const plan = jsonOf(named).plan
      assert.includeMembers(plan.reasons, ["source_run_unreadable", "workspace_identity_mismatch"])
      assert.deepStrictEqual(
        plan.findings.filter((f: any) => f.reason !== "terminal_repair_failed").map((f: any) => [f.reason, f.detail]),
        [["source_run_unreadable", "unmanaged_run"], ["workspace_identity_mismatch", "marker_missing"]]
      )
      assert.deepStrictEqual(yield* snapshot(ws), before)
      const empty = yield* tempDir
      const missing = yield* cli("resume", "--plan", "--json", empty)
      expectCode(missing, 2)
      assert.strictEqual(jsonOf(missing).error._tag, "WorkspaceNotFound")
      assert.deepStrictEqual(yield* listing(empty), [])
    })))

  it.scopedLive("resume without --yes follows the flag: awaits confirmation when unset; with the flag or --yes it needs a provider", () =>
    Live(Effect.gen(function*() {
      const ws = yield* tempDir
      yield* seed("sqlite", ws, [answered("done")])
      yield* writeMarker(ws)
      const before = yield* ledgerState("sqlite", ws)
      const [awaiting, flagged, confirmed, both] = yield* Effect.all([
        cli("resume", "--json", "--tool", "read", ws),
        run({ [FLAG]: "1" }, ["resume", "--json", "--tool", "read", ws]),
        cli("resume", "--yes", "--json", "--tool", "read", ws),
        cli("resume", "--plan", "--yes", "--json", ws)
      ], { concurrency: 2 })
      expectCode(awaiting, 1)
      assert.strictEqual(jsonOf(awaiting).plan._tag, "AwaitingConfirmation")
      assert.isFalse(jsonOf(awaiting).enabled)
      expectCode(flagged, 2)
      assert.deepStrictEqual([jsonOf(flagged).plan._tag, jsonOf(flagged).plan.authorizedBy, jsonOf(flagged).enabled], ["Continue", "flag", true])
      assert.strictEqual(jsonOf(flagged).error._tag, "ModelProviderMissing")
      expectCode(confirmed, 2)
      assert.deepStrictEqual([jsonOf(confirmed).plan._tag, jsonOf(confirmed).plan.authorizedBy], ["Continue", "confirmation"])
      assert.strictEqual(jsonOf(confirmed).error._tag, "ModelProviderMissing")
      expectCode(both, 2)
      assert.strictEqual(jsonOf(both).error._tag, "UsageError")
      assert.deepStrictEqual(yield* ledgerState("sqlite", ws), before, "nothing was claimed or written")
    })))

  for (const store of STORES) {
    it.scopedLive(`resume --yes on ${store}: executes once through the scripted provider; the boundary is then claimed; a held lock refuses`, () =>
      Live(Effect.gen(function*() {
        const ws = yield* tempDir
        yield* seed(store, ws, [answered("done")])
        yield* writeMarker(ws)
        const before = yield* ledgerState(store, ws)

        // Another process holds the owner lock: the plan is Continue, execution cannot take the lock; nothing written.
        const holder = yield* holdOwnerLock("exclusive", ws)
        const locked = yield* cli("resume", "--yes", "--json", "--tool", "read", "--scripted-reply", "ok", ws)
        expectCode(locked, 2)
        assert.strictEqual(jsonOf(locked).plan._tag, "Continue")
        assert.strictEqual(jsonOf(locked).error._tag, "WorkspaceLocked", describeRun(locked))
        assert.isUndefined(jsonOf(locked).outcome)
        assert.deepStrictEqual(yield* ledgerState(store, ws), before)
        yield* killHard(holder)

        const done = yield* cli("resume", "--yes", "--json", "--tool", "read", "--scripted-reply", "all done", ws)
        expectCode(done, 0)
        const doc = jsonOf(done)
        assert.strictEqual(doc.runId, "done")
        assert.strictEqual(doc.outcome._tag, "Continued", describeRun(done))
        assert.deepStrictEqual([doc.outcome.sourceRunId, doc.outcome.authorizedBy, doc.outcome.startedSeq], ["done", "confirmation", 1])
        const continuation = doc.outcome.continuationRunId as string
        const after = yield* ledgerState(store, ws)
        assert.include(after, `header ${continuation} completed -`)
        assert.isTrue(after.some((line) => line.startsWith(`run ${continuation} ${doc.outcome.terminalSeq} `)), after.join("\n"))
        // Every source row is unchanged.
        assert.deepStrictEqual(after.filter((line) => line.startsWith("run done ")), before.filter((line) => line.startsWith("run done ")))

        // The boundary is claimed: a second resume of the same run parks with continuation_already_exists and calls nothing.
        const again = yield* cli("resume", "--yes", "--json", "--tool", "read", "--scripted-reply", "twice", "--run", "done", ws)
        expectCode(again, 1)
        assert.deepStrictEqual(jsonOf(again).plan.reasons, ["continuation_already_exists"])
        assert.strictEqual(jsonOf(again).plan.nextStep, "inspect_existing_continuation")
        assert.deepStrictEqual(yield* ledgerState(store, ws), after)
        // The default run is now the continuation (the source is continued).
        const next = yield* cli("resume", "--plan", "--json", "--tool", "read", ws)
        assert.strictEqual(jsonOf(next).runId, continuation, describeRun(next))
      })))
  }
})

describe("resume's default run", () => {
  const continuing = (name: string, parent: string, status: RunStatus, statusReason?: StatusReason) => {
    const ids = idsOf(parent)
    return new RunHeader({
      ...headerOf(name, status, statusReason),
      parentRunId: ids.runId as RunHeader["runId"],
      continuationSource: new ContinuationSource({
        sessionId: ids.sessionId as RunHeader["sessionId"],
        invocationId: ids.invocationId as RunHeader["invocationId"],
        runId: ids.runId as RunHeader["runId"],
        turnId: ids.turnId as RunHeader["turnId"],
        highWater: new SourceHighWater({ seq: 6, digest: `sha256:${"0".repeat(64)}` })
      }),
      claimId: `claim-${name}`
    })
  }

  it("is the newest run no live continuation continues; an abandoned continuation neither counts nor is chosen", () => {
    const a = headerOf("a", "failed", "process_interrupted")
    const b = headerOf("b", "completed")
    assert.strictEqual(defaultRun([])?.runId, undefined)
    assert.strictEqual(defaultRun([a, b])?.runId, "b")
    // b continued by c: c is the newest leaf.
    const c = continuing("c", "b", "completed")
    assert.strictEqual(defaultRun([a, b, c])?.runId, "c")
    // b's continuation was abandoned before any provider call: b is resumable again (its claim may be superseded).
    const abandoned = continuing("c", "b", "failed", "continuation_abandoned_before_provider_call")
    assert.strictEqual(defaultRun([a, b, abandoned])?.runId, "b")
    // An unrepaired newest run is chosen (it parks asking for repair) rather than an older one behind it.
    const open = headerOf("open", "running")
    assert.strictEqual(defaultRun([a, b, open])?.runId, "open")
    // Only an abandoned continuation: nothing to resume.
    assert.strictEqual(defaultRun([abandoned])?.runId, undefined)
  })
})
