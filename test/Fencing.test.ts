// Fencing of the owner lock (docs/stores.md "Fencing"), with real processes: a live host appending to a managed
// run loses its owner lock (PostgreSQL: its lock session terminated, or the postmaster SIGKILLed and restarted;
// SQLite and JSONL: the lock files moved away), and a second process's `repair` races it. Every round: the host never
// gets an acknowledgement after the other's exclusive acquisition (its acknowledged events all precede the seal),
// no run is sealed while its host still writes (a sealed run's host was refused `OwnershipLost`, never `RunSealed`),
// and every acknowledged event is in the ledger where it was acknowledged.
// Rounds per scenario: RR_FENCING_ROUNDS (default 3; the 50 with RR_FENCING_ROUNDS=50).
import * as NodeContext from "@effect/platform-node/NodeContext"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import type { ChildProcess } from "node:child_process"
import { chmodSync, mkdtempSync, readFileSync, renameSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { RunId } from "../src/Domain/Ids.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import { layerStore } from "../src/Layers/NodeRuntimeEventStore.js"
import { PgWorkspace } from "../src/Postgres.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { loadEmbeddedPostgres } from "./support/embeddedPostgres.js"
import { freePort } from "./support/freePort.js"
import { type LineChild as Child, startLineChild } from "./support/lineChild.js"
import { TEST_PASSWORD } from "./support/pgGlobalSetup.js"

const ROUNDS = Number(process.env.RR_FENCING_ROUNDS ?? 3)
const root = fileURLToPath(new URL("..", import.meta.url))
const childScript = fileURLToPath(new URL("./support/fenceChild.ts", import.meta.url))

const children = new Set<ChildProcess>()
afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL")
})

const startChild = (order: Record<string, unknown>): Child => {
  const child = startLineChild(childScript, [JSON.stringify(order)], root)
  children.add(child.proc)
  return child
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

interface RoundResult {
  readonly repairWon: boolean
  /** The repair was locked out and the host went on: it took its lock back on a new session. */
  readonly kept: boolean
}

/**
 * One round: the host starts run-R and appends; once it has some acknowledgements, `breakLock` takes its owner lock
 * from under it, and the repairer runs `repair` at once. Checks the round's outcome; returns who won.
 */
const round = async (
  r: number,
  host: Child,
  repairer: Child,
  breakLock: () => Promise<void>,
  allowedFailures: ReadonlyArray<string>
): Promise<RoundResult> => {
  // PostgreSQL: odd rounds watch the lock session every 3 s (the repair nearly always wins the race), even ones every
  // 250 ms (the host often takes its lock back first, and the repair then waits in vain: WorkspaceLocked).
  host.send(`round ${r} ${r % 2 === 1 ? 3000 : 250}`)
  const ready = await host.waitFor((l) => l === `ready ${r}` || l.startsWith(`fail ${r} `))
  assert.strictEqual(ready, `ready ${r}`)
  const acks = () => host.lines.filter((l) => l.startsWith(`ack ${r} `))
  while (acks().length < 5) await host.waitFor(() => acks().length >= 5)
  await breakLock()
  repairer.send(`repair ${r}`)
  const result = await repairer.waitFor((l) => l.startsWith(`repaired ${r} `) || l.startsWith(`rfail ${r} `))
  // The host goes on (if it may) for a while after the repair, then is asked to stop.
  await sleep(300)
  host.send(`stop ${r}`)
  const end = await host.waitFor((l) => l === `done ${r}` || l.startsWith(`fail ${r} `))
  const run = `run-${r}`
  const sealed = result.startsWith(`repaired ${r} `)
    ? (JSON.parse(result.slice(`repaired ${r} `.length)) as { repaired: Array<{ runId: string; terminatedSeq?: number }> })
      .repaired.find((x) => x.runId === run)
    : undefined
  // Never RunSealed (nor anything else unexpected): a host that lost its lock is refused before anything is sealed
  // under it.
  if (end !== `done ${r}`) assert.include(allowedFailures, end.split(" ")[2], `round ${r}: ${end}`)
  if (sealed !== undefined) {
    // No run is sealed while its host still writes: the host was refused, and every acknowledgement precedes the seal.
    assert.notStrictEqual(end, `done ${r}`, `round ${r}: the run was sealed while its host still got acknowledgements`)
    const last = Math.max(...acks().map((l) => Number(l.split(" ")[3])))
    assert.isBelow(last, sealed.terminatedSeq!, `round ${r}: an acknowledgement at seq ${last} after the seal at ${sealed.terminatedSeq}`)
  } else {
    assert.match(result, new RegExp(`^(repaired ${r} |rfail ${r} WorkspaceLocked)`), `round ${r}: ${result}`)
  }
  return { repairWon: sealed !== undefined, kept: sealed === undefined && end === `done ${r}` }
}

// Every acknowledgement of every round is in the ledger, at its acknowledged seq.
const assertAcked = (lines: ReadonlyArray<string>, seqs: ReadonlyMap<string, number>) => {
  const acks = lines.filter((l) => l.startsWith("ack ")).map((l) => l.split(" "))
  const lost = acks.filter(([, , id, seq]) => seqs.get(id!) !== Number(seq))
  assert.isAbove(acks.length, 0)
  assert.deepStrictEqual(lost, [])
  return acks.length
}

describe("fencing: a host that lost its owner lock is refused before a racing repair seals its run", () => {
  for (const store of ["sqlite", "jsonl"] as const) {
    it.scopedLive(`${store}: the lock file${store === "jsonl" ? "s" : ""} moved away under a live host, repair racing it, ${ROUNDS} rounds`, () =>
      Effect.gen(function*() {
        const workspace = mkdtempSync(join(tmpdir(), `rr-fence-${store}-`))
        yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(workspace, { recursive: true, force: true })))
        const host = startChild({ role: "host", store, workspace })
        const repairer = startChild({ role: "repair", store, workspace })
        yield* Effect.promise(() => Promise.all([host.waitFor((l) => l === "ready"), repairer.waitFor((l) => l === "ready")]))
        let won = 0
        for (let r = 0; r < ROUNDS; r++) {
          const result = yield* Effect.promise(() =>
            round(r, host, repairer, async () => {
              // Moved, not deleted: the holder's file is no longer the one the path names, and nothing shows it held.
              renameSync(join(workspace, "runtime-owner.lock"), join(workspace, `moved-owner-${r}.lock`))
              if (store === "jsonl") renameSync(join(workspace, "runtime-events.lock"), join(workspace, `moved-events-${r}.lock`))
            }, store === "jsonl" ? ["OwnershipLost", "StoreWriteFailed"] : ["OwnershipLost"])
          )
          if (result.repairWon) won++
        }
        host.send("exit")
        repairer.send("exit")
        const seqs = new Map<string, number>()
        yield* Effect.gen(function*() {
          const ledger = yield* RuntimeEventStore
          for (const runId of yield* ledger.listRuns()) {
            for (const row of yield* ledger.readRun(runId)) seqs.set(row.event.id, row.seq)
          }
        }).pipe(
          Effect.provide(layerStore(store, { workspace, readOnly: true }).pipe(
            Layer.provide(NodeWorkspaceLock.layerNode),
            Layer.provide(NodeContext.layer)
          ))
        )
        const n = assertAcked(host.lines, seqs)
        // With the lock files moved, nothing keeps a repair out: it wins every round, and the host is refused.
        assert.strictEqual(won, ROUNDS)
        console.log(`[fencing ${store}] ${ROUNDS} rounds, repair sealed ${won}, acknowledged ${n}, all present`)
      }), { timeout: 120_000 + ROUNDS * 20_000 })
  }

  describe("PostgreSQL, on a server of its own", () => {
    const EmbeddedPostgresP = loadEmbeddedPostgres()
    let server: { url: string; options: Record<string, unknown>; current: { stop: () => Promise<void> }; root: string } | undefined
    const startServer = async () => {
      const EmbeddedPostgres = await EmbeddedPostgresP
      const dir = mkdtempSync(join(tmpdir(), "rr-pg-fence-"))
      chmodSync(dir, 0o777)
      const port = await freePort()
      const options = {
        databaseDir: join(dir, "data"),
        port,
        user: "postgres",
        password: TEST_PASSWORD,
        persistent: true,
        createPostgresUser: true,
        onLog: () => {},
        onError: () => {},
        postgresFlags: ["-c", "listen_addresses=127.0.0.1"]
      }
      const first = new EmbeddedPostgres(options)
      await first.initialise()
      await first.start()
      return { url: `postgres://postgres:${TEST_PASSWORD}@127.0.0.1:${port}/postgres`, options, current: first, root: dir }
    }
    afterAll(async () => {
      if (server !== undefined) {
        await server.current.stop().catch(() => {})
        rmSync(server.root, { recursive: true, force: true })
      }
    })
    const restart = async () => {
      const EmbeddedPostgres = await EmbeddedPostgresP
      for (let attempt = 0; ; attempt++) {
        const next = new EmbeddedPostgres(server!.options)
        if (await next.start().then(() => true, () => false)) {
          server!.current = next
          return
        }
        if (attempt > 40) throw new Error("the server did not restart")
        await sleep(500)
      }
    }

    const scenario = (name: string, rounds: number, breakLock: (workspace: string) => Promise<void>) =>
      it.scopedLive(`${name}, repair racing it, ${rounds} rounds`, () =>
        Effect.gen(function*() {
          if (server === undefined) server = yield* Effect.promise(startServer)
          const url = server.url
          const workspace = `fence_${Math.random().toString(36).slice(2, 10)}`
          // The workspace exists before the host starts (a host on a server it created).
          yield* Effect.scoped(PgWorkspace.make({ url: Redacted.make(url), workspace }))
          const host = startChild({ role: "host", store: "postgres", workspace, url })
          const repairer = startChild({ role: "repair", store: "postgres", workspace, url })
          yield* Effect.promise(() => Promise.all([host.waitFor((l) => l === "ready"), repairer.waitFor((l) => l === "ready")]))
          let won = 0
          let kept = 0
          for (let r = 0; r < rounds; r++) {
            const result = yield* Effect.promise(() => round(r, host, repairer, () => breakLock(workspace), ["OwnershipLost"]))
            if (result.repairWon) won++
            if (result.kept) kept++
          }
          host.send("exit")
          repairer.send("exit")
          const seqs = new Map<string, number>()
          yield* Effect.scoped(Effect.gen(function*() {
            const ws = yield* PgWorkspace.make({ url: Redacted.make(url), workspace })
            for (const runId of yield* ws.store.listRuns()) {
              for (const row of yield* ws.store.readRun(RunId.make(runId))) seqs.set(row.event.id, row.seq)
            }
          }))
          const n = assertAcked(host.lines, seqs)
          if (rounds > 1) assert.isAbove(won, 0, "the repair never won the race: the lock was not lost")
          console.log(
            `[fencing postgres] ${name}: ${rounds} rounds, repair sealed ${won}, the host took its lock back first ${kept}, ` +
              `acknowledged ${n}, all present`
          )
        }), { timeout: 120_000 + rounds * 30_000 })

    scenario("the lock session killed (pg_terminate_backend) under a live host", ROUNDS, async (workspace) => {
      const client = new pg.Client({ connectionString: server!.url })
      await client.connect()
      try {
        const key = "('x' || substr(md5('runtime-resume/owner/' || $1), 1, 16))::bit(64)::bigint"
        const killed = await client.query(
          `SELECT pg_terminate_backend(l.pid) AS ok FROM pg_locks l, (SELECT ${key} AS k) key
           WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
             AND l.classid::bigint = (key.k >> 32) & 4294967295 AND l.objid::bigint = key.k & 4294967295`,
          [workspace]
        )
        assert.isAbove(killed.rowCount ?? 0, 0, "no lock session to kill")
      } finally {
        await client.end()
      }
    })

    scenario("the postmaster SIGKILLed and restarted under a live host", ROUNDS, async () => {
      const pid = Number(readFileSync(join(String(server!.options.databaseDir), "postmaster.pid"), "utf8").split("\n")[0])
      process.kill(pid, "SIGKILL")
      await sleep(1_000)
      await restart()
    })
  })
})
