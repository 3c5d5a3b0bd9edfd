// Several hosts for real against one PostgreSQL server: each a Node child process with its own pool. Concurrent
// appends (distinct runs and one shared run), the claim race, and a host SIGKILLed inside a transaction.
import { afterEach, assert, describe, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import pg from "pg"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { RunId } from "../src/Domain/Ids.js"
import { Diagnostic } from "../src/Domain/RuntimeEvent.js"
import { PgWorkspace } from "../src/Postgres.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { RunHeader } from "../src/Domain/RunHeader.js"
import { DIGEST } from "./support/pgClaims.js"
import { pgUrl } from "./support/pg.js"
import { killAllHosts, startHost } from "./support/pgHosts.js"

const freshName = (tag: string) => `${tag}_${Math.random().toString(36).slice(2, 10)}`

const HOSTS = 4

describe("several hosts on one PostgreSQL server", () => {
  afterEach(killAllHosts)

  it.scopedLive(`${HOSTS} host processes append to their own runs and one shared run: no gap, every acknowledged event present, every run verifies`, () =>
    Effect.gen(function*() {
      const workspace = freshName("multi")
      const ws = yield* PgWorkspace.make({ url: pgUrl(), workspace })
      const shared = "run-shared"
      const b = EventBuilder.make(shared)
      yield* ws.store.append(RunId.make(shared), [b.opened()])
      const dir = mkdtempSync(join(tmpdir(), "rr-pg-hosts-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const go = join(dir, "go")
      const hosts = Array.from({ length: HOSTS }, (_, h) =>
        startHost({
          mode: "append",
          url: Redacted.value(pgUrl()),
          workspace,
          host: `h${h}`,
          own: [`run-h${h}-a`, `run-h${h}-b`],
          shared,
          count: 60,
          go
        }))
      yield* Effect.promise(() => Promise.all(hosts.map((h) => h.waitFor("ready"))))
      writeFileSync(go, "")
      const codes = yield* Effect.promise(() => Promise.all(hosts.map((h) => h.exited)))
      assert.deepStrictEqual(codes, hosts.map(() => 0), hosts.map((h) => h.lines.slice(-3).join("|")).join(" / "))
      const acks = hosts.flatMap((h) => h.lines.filter((l) => l.startsWith("ack ")).map((l) => l.split(" ")))
      assert.strictEqual(acks.length, HOSTS * 60)
      const runs = yield* ws.store.listRuns()
      assert.strictEqual(runs.length, 1 + HOSTS * 2)
      const byRun = new Map<string, Map<string, number>>()
      for (const runId of runs) {
        const rows = yield* ws.store.readRun(runId)
        // readRun verified density and the chain; each seq is where its acknowledgement said.
        assert.deepStrictEqual(rows.map((r) => r.seq), rows.map((_, i) => i + 1))
        byRun.set(runId, new Map(rows.map((r) => [r.event.id, r.seq])))
      }
      for (const [, runId, id, seq] of acks) assert.strictEqual(byRun.get(runId!)?.get(id!), Number(seq), `${id} in ${runId}`)
      // The shared run interleaves every host's appends (they serialized on its tail row).
      const sharedIds = [...byRun.get(shared)!.keys()].slice(1)
      assert.strictEqual(sharedIds.length, HOSTS * 30)
      assert.strictEqual(new Set(sharedIds.map((id) => id.split(":")[0])).size, HOSTS)
    }))

  it.scopedLive(`the claim race: ${HOSTS} hosts claim one boundary per round for 30 rounds; exactly one claim and one provider call per round`, () =>
    Effect.gen(function*() {
      const workspace = freshName("race")
      const ws = yield* PgWorkspace.make({ url: pgUrl(), workspace })
      const dir = mkdtempSync(join(tmpdir(), "rr-pg-race-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const go = join(dir, "go")
      const rounds = 30
      const hosts = Array.from({ length: HOSTS }, (_, h) =>
        startHost({ mode: "claim", url: Redacted.value(pgUrl()), workspace, host: `h${h}`, rounds, go }))
      yield* Effect.promise(() => Promise.all(hosts.map((h) => h.waitFor("ready"))))
      writeFileSync(go, "")
      const codes = yield* Effect.promise(() => Promise.all(hosts.map((h) => h.exited)))
      assert.deepStrictEqual(codes, hosts.map(() => 0), hosts.map((h) => h.lines.slice(-3).join("|")).join(" / "))
      const calls = hosts.flatMap((h) => h.lines.filter((l) => l.startsWith("provider ")))
      const lost = hosts.flatMap((h) => h.lines.filter((l) => l.startsWith("lost ")))
      assert.strictEqual(calls.length, rounds)
      assert.deepStrictEqual(calls.map((l) => Number(l.split(" ")[1])).sort((a, b) => a - b), Array.from({ length: rounds }, (_, i) => i + 1))
      assert.strictEqual(lost.length, rounds * (HOSTS - 1))
      assert.isTrue(lost.every((l) => l.endsWith("ContinuationAlreadyExists")), lost.join("|"))
      for (let round = 1; round <= rounds; round++) {
        const claims = yield* ws.headers.claimsAt({ sourceRunId: RunId.make("run-source"), sourceSeq: round, sourceDigest: DIGEST })
        assert.strictEqual(claims.length, 1, `round ${round}`)
      }
    }))

  it.scopedLive(`the continuation race through the ContinuationExecutor: ${HOSTS} hosts resume one boundary per round for 50 rounds; exactly one claim and one provider call per round`, () =>
    Effect.gen(function*() {
      const workspace = freshName("resume_race")
      const ws = yield* PgWorkspace.make({ url: pgUrl(), workspace })
      const rounds = 50
      // One sealed run per round, its tool call answered before the crash: each a boundary every host may continue.
      for (let round = 1; round <= rounds; round++) {
        const runId = `src-${round}`
        const b = EventBuilder.make({ sessionId: "sess-race", invocationId: `inv-${runId}`, runId, turnId: `turn-${runId}` })
        yield* ws.store.appendBatch([{
          runId: RunId.make(runId),
          events: [
            b.opened("t1_after_preflight_v1"),
            b.user("list the files"),
            b.call("c1", "read", { path: "a" }),
            b.dispatched("c1", "read", { path: "a" }, "read_only"),
            b.response("c1", "read", { ok: true }, { operationBound: true }),
            b.terminated("failed", "process_interrupted")
          ]
        }], { mode: "restore" })
        yield* ws.headers.create(new RunHeader({
          runId: RunId.make(runId),
          sessionId: b.ids.sessionId as RunHeader["sessionId"],
          invocationId: b.ids.invocationId as RunHeader["invocationId"],
          turnId: b.ids.turnId as RunHeader["turnId"],
          status: "running",
          workspaceId: ws.workspaceId,
          createdAt: 1,
          updatedAt: 1
        }))
        yield* ws.headers.setStatus(RunId.make(runId), "failed", { at: 2, reason: "process_interrupted" })
      }
      const dir = mkdtempSync(join(tmpdir(), "rr-pg-resume-race-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const hosts = Array.from({ length: HOSTS }, (_, h) =>
        startHost({ mode: "resume", url: Redacted.value(pgUrl()), workspace, host: `h${h}`, rounds, dir, hosts: HOSTS }))
      const codes = yield* Effect.promise(() => Promise.all(hosts.map((h) => h.exited)))
      assert.deepStrictEqual(codes, hosts.map(() => 0), hosts.map((h) => h.lines.slice(-3).join("|")).join(" / "))
      const lines = hosts.flatMap((h) => h.lines)
      const calls = lines.filter((l) => l.startsWith("provider ")).map((l) => l.split(" ")[1])
      const won = lines.filter((l) => / won /.test(l))
      const lost = lines.filter((l) => l.startsWith("round ") && !/ won /.test(l))
      // Exactly one provider call and one winner per round, in whichever host won it.
      assert.deepStrictEqual([...calls].sort(), Array.from({ length: rounds }, (_, i) => `src-${i + 1}`).sort())
      assert.deepStrictEqual(won.map((l) => Number(l.split(" ")[1])).sort((a, b) => a - b), Array.from({ length: rounds }, (_, i) => i + 1))
      assert.strictEqual(lost.length, rounds * (HOSTS - 1))
      // Every loser was refused typed: the boundary already claimed (planned or at revalidation/claim), or the lock.
      for (const line of lost) {
        assert.match(line, / (lost ContinuationAlreadyExists|lost WorkspaceLocked|parked continuation_already_exists)$/, lost.join("\n"))
      }
      for (let round = 1; round <= rounds; round++) {
        const source = RunId.make(`src-${round}`)
        const hw = yield* ws.store.highWater(source)
        const claims = yield* ws.headers.claimsAt({ sourceRunId: source, sourceSeq: hw.seq, sourceDigest: hw.digest })
        assert.strictEqual(claims.length, 1, `round ${round}`)
        // The winner's continuation completed, and its run holds exactly one provider answer.
        const winner = won.find((l) => l.startsWith(`round ${round} `))!.split(" ")[3]!
        assert.strictEqual(claims[0]!.continuationRunId, winner)
        const rows = yield* ws.store.readRun(RunId.make(winner))
        assert.deepStrictEqual(rows.map((r) => r.event.body._tag), ["ContinuationStarted", "ModelText", "RunTerminated"])
      }
      const headers = yield* ws.headers.list()
      assert.strictEqual(headers.length, rounds * 2)
      assert.isTrue(headers.every((h) => h.status === "completed" || h.runId.startsWith("src-")))
      // Which host won is up to the race; report the spread.
      console.log(`continuation race: ${rounds} rounds, wins per host ${hosts.map((h) => h.lines.filter((l) => / won /.test(l)).length).join("/")}, ` +
        `losses ${[...new Set(lost.map((l) => l.split(" ").slice(2).join(" ")))].join(", ")}`)
    }))

  it.scopedLive("a host SIGKILLed inside a T2 transaction: nothing of it is visible, the others go on, its owner lock is free", () =>
    Effect.gen(function*() {
      const workspace = freshName("killed")
      const ws = yield* PgWorkspace.make({ url: pgUrl(), workspace })
      const victim = startHost({ mode: "kill-inside", url: Redacted.value(pgUrl()), workspace, host: "victim", shared: "run-v" })
      const other = startHost({ mode: "hold", url: Redacted.value(pgUrl()), workspace, host: "other" })
      yield* Effect.promise(() => Promise.all([victim.waitFor("inside"), other.waitFor("held")]))
      // The victim holds the owner lock shared, and its T2 transaction holds the run's tail row.
      const locked = yield* Effect.either(Effect.scoped(ws.owner.acquire(workspace, "exclusive", { timeoutMs: 200 })))
      assert.strictEqual(locked._tag, "Left")
      victim.child.kill("SIGKILL")
      yield* Effect.promise(() => victim.exited)
      // Nothing of the transaction: the run ends with the dispatch; another host appends to it right away.
      const rows = yield* ws.store.readRun(RunId.make("run-v"))
      assert.deepStrictEqual(rows.map((r) => r.event.body._tag), ["RunOpened", "FunctionCall", "ToolDispatched"])
      // Its projection rows went with it: the operation is still prepared (T1's rows), no outcome journal row.
      const projection = yield* Effect.acquireUseRelease(
        Effect.promise(async () => {
          const client = new pg.Client({ connectionString: Redacted.value(pgUrl()) })
          await client.connect()
          return client
        }),
        (client) =>
          Effect.promise(async () => ({
            ops: (await client.query(`SELECT state, version FROM "rr_${workspace}".tool_operations`)).rows,
            journal: (await client.query(`SELECT state FROM "rr_${workspace}".tool_operation_journal`)).rows
          })),
        (client) => Effect.promise(() => client.end())
      )
      assert.deepStrictEqual(projection, { ops: [{ state: "prepared", version: 1 }], journal: [{ state: "prepared" }] })
      const b = EventBuilder.make("run-v")
      yield* ws.store.append(RunId.make("run-v"), [b.custom(new Diagnostic({ message: "after" }), { id: "after" })])
      // The victim's shared hold died with its session; the other host still holds it shared.
      const stillShared = yield* Effect.either(Effect.scoped(ws.owner.acquire(workspace, "exclusive", { timeoutMs: 200 })))
      assert.strictEqual(stillShared._tag, "Left")
      other.child.kill("SIGKILL")
      yield* Effect.promise(() => other.exited)
      // Once both sessions ended the exclusive lock is free (the server ends a killed client's session at once).
      const hold = yield* Effect.scoped(ws.owner.acquire(workspace, "exclusive", { timeoutMs: 5000 }))
      assert.strictEqual(hold.mode, "exclusive")
    }))
})
