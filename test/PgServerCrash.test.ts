// The PostgreSQL server SIGKILLed (postmaster -9) in the middle of a multi-host workload, then restarted: every
// acknowledged event is there, hosts see only typed failures during the outage (bounded by their timeouts), then go on.
import { afterEach, assert, describe, it } from "@effect/vitest"
import { loadEmbeddedPostgres } from "./support/embeddedPostgres.js"
import { Effect, Redacted } from "effect"
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { freePort } from "./support/freePort.js"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { RunId } from "../src/Domain/Ids.js"
import { PgWorkspace } from "../src/Postgres.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { killAllHosts, startHost } from "./support/pgHosts.js"
import { TEST_PASSWORD } from "./support/pgGlobalSetup.js"

const EmbeddedPostgres = await loadEmbeddedPostgres()


const HOSTS = 3

describe("the PostgreSQL server killed mid-workload", () => {
  afterEach(killAllHosts)

  it.scopedLive(`postmaster SIGKILLed under ${HOSTS} appending hosts and restarted: 0 acknowledged events lost, typed failures only`, () =>
    Effect.gen(function*() {
      // A server of its own (the shared test server must not die under the other suites).
      const root = mkdtempSync(join(tmpdir(), "rr-pg-crash-"))
      chmodSync(root, 0o777)
      const port = yield* Effect.promise(freePort)
      const options = {
        databaseDir: join(root, "data"),
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
      yield* Effect.promise(() => first.initialise().then(() => first.start()))
      let current = first
      yield* Effect.addFinalizer(() =>
        Effect.promise(() => current.stop().catch(() => {})).pipe(Effect.ensuring(Effect.sync(() => rmSync(root, { recursive: true, force: true }))))
      )
      const url = `postgres://postgres:${TEST_PASSWORD}@127.0.0.1:${port}/postgres`
      const workspace = "crash"
      yield* Effect.scoped(Effect.gen(function*() {
        const ws = yield* PgWorkspace.make({ url: Redacted.make(url), workspace })
        const b = EventBuilder.make("run-shared")
        yield* ws.store.append(RunId.make("run-shared"), [b.opened()])
      }))
      const go = join(root, "go")
      const perHost = 120
      const hosts = Array.from({ length: HOSTS }, (_, h) =>
        startHost({ mode: "append", url, workspace, host: `h${h}`, own: [`run-h${h}`], shared: "run-shared", count: perHost, go, deadlineMs: 90_000 }))
      yield* Effect.promise(() => Promise.all(hosts.map((h) => h.waitFor("ready"))))
      writeFileSync(go, "")
      const acked = () => hosts.reduce((n, h) => n + h.lines.filter((l) => l.startsWith("ack ")).length, 0)
      while (acked() < HOSTS * 20) yield* Effect.sleep("50 millis")
      // SIGKILL the postmaster (its pid is the first line of postmaster.pid); its backends exit after it.
      const pid = Number(readFileSync(join(options.databaseDir, "postmaster.pid"), "utf8").split("\n")[0])
      process.kill(pid, "SIGKILL")
      const ackedAtKill = acked()
      // The hosts fail (typed) while it is down.
      while (hosts.every((h) => !h.lines.some((l) => l.startsWith("fail ")))) yield* Effect.sleep("50 millis")
      yield* Effect.sleep("1 second")
      // Restart on the same data (crash recovery); a backend still exiting can hold shared memory for a moment.
      for (let attempt = 0; ; attempt++) {
        const next = new EmbeddedPostgres(options)
        const started = yield* Effect.promise(() => next.start().then(() => true, () => false))
        if (started) {
          current = next
          break
        }
        if (attempt > 20) assert.fail("the server did not restart")
        yield* Effect.sleep("500 millis")
      }
      const codes = yield* Effect.promise(() => Promise.all(hosts.map((h) => h.exited)))
      assert.deepStrictEqual(codes, hosts.map(() => 0), hosts.map((h) => h.lines.slice(-3).join("|")).join(" / "))
      const fails = hosts.flatMap((h) => h.lines.filter((l) => l.startsWith("fail ")))
      assert.isAbove(fails.length, 0)
      assert.isTrue(fails.every((l) => /^fail (StoreWriteFailed|StoreReadFailed) /.test(l)), fails.join("|"))
      const acks = hosts.flatMap((h) => h.lines.filter((l) => l.startsWith("ack ")).map((l) => l.split(" ")))
      assert.strictEqual(acks.length, HOSTS * perHost)
      assert.isAbove(acks.length, ackedAtKill)
      // Every acknowledged event is there, where it was acknowledged, and every run verifies.
      yield* Effect.scoped(Effect.gen(function*() {
        const ws = yield* PgWorkspace.make({ url: Redacted.make(url), workspace })
        const seqs = new Map<string, number>()
        for (const runId of yield* ws.store.listRuns()) {
          for (const row of yield* ws.store.readRun(runId)) seqs.set(row.event.id, row.seq)
        }
        const lost = acks.filter(([, , id, seq]) => seqs.get(id!) !== Number(seq))
        assert.deepStrictEqual(lost, [])
        console.log(`[pg crash] acknowledged ${acks.length}, lost ${lost.length}, typed failures during the outage ${fails.length}, acknowledged before the kill ${ackedAtKill}`)
      }))
    }))
})
