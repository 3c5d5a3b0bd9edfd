// Tests of the PostgreSQL RuntimeEventStore on the real server the tests started: the shared conformance suite,
// then what only the server store has (workspace isolation, typed bad input, tampered rows, cross-connection appends).
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Equal, Redacted, Stream } from "effect"
import { RunId } from "../src/Domain/Ids.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { PgRunHeaderStore, PgRuntimeEventStore, PgWorkspaceOwner } from "../src/Postgres.js"
import type { RuntimeEventStoreShape } from "../src/Services/RuntimeEventStore.js"
import { conformance } from "./support/conformance.js"
import { claimFor, DIGEST } from "./support/pgClaims.js"
import { pgUrl, rawClient, workspaceFor } from "./support/pg.js"

conformance({
  name: "postgres",
  layer: (workspace) => PgRuntimeEventStore.layer({ url: pgUrl(), workspace: workspaceFor(workspace) }),
  persistent: true
})


const freshName = (tag: string) => `${tag}_${Math.random().toString(36).slice(2, 10)}`

const openStore = (workspace: string, extra: Partial<PgRuntimeEventStore.PgStoreOptions> = {}) =>
  PgRuntimeEventStore.make({ url: pgUrl(), workspace, ...extra })

const seed = (store: RuntimeEventStoreShape, runId: string) =>
  Effect.gen(function*() {
    const b = EventBuilder.make(runId)
    yield* store.append(RunId.make(runId), [b.opened(), b.user("hello"), b.model("hi")])
    yield* store.append(RunId.make(runId), [b.user("again"), b.model("there")])
  })

const corruptionOf = (exit: Either.Either<unknown, { readonly _tag: string }>) => {
  assert.isTrue(Either.isLeft(exit), "the read succeeded over tampered rows")
  const error = (exit as Either.Left<{ _tag: string; reason?: string }, unknown>).left
  assert.strictEqual(error._tag, "LedgerCorruption")
  return error.reason
}

describe("PgRuntimeEventStore on PostgreSQL", () => {
  it.scopedLive("workspaces in one database are isolated: each sees only its own runs", () =>
    Effect.gen(function*() {
      const a = yield* openStore(freshName("iso_a"))
      const b = yield* openStore(freshName("iso_b"))
      yield* seed(a, "run-1")
      const bb = EventBuilder.make("run-1")
      // The same run id, event ids and invocation in another workspace: no conflict.
      yield* b.append(RunId.make("run-1"), [bb.opened()])
      assert.strictEqual((yield* a.readRun(RunId.make("run-1"))).length, 5)
      assert.strictEqual((yield* b.readRun(RunId.make("run-1"))).length, 1)
    }))

  it.scopedLive("a workspace name that is not a plain identifier is refused, and nothing is created", () =>
    Effect.gen(function*() {
      const client = yield* rawClient
      for (const name of ["", "a-b", "1abc", "x; DROP SCHEMA public", "a".repeat(49), "é"]) {
        const exit = yield* Effect.either(openStore(name))
        assert.isTrue(Either.isLeft(exit))
        const error = (exit as Either.Left<{ _tag: string; message: string }, unknown>).left
        assert.strictEqual(error._tag, "WorkspaceNotFound")
        assert.include(error.message, "not a plain identifier")
      }
      const { rows } = yield* Effect.promise(() => client.query("SELECT count(*)::int AS n FROM pg_namespace WHERE nspname LIKE 'rr_x;%' OR nspname = 'rr_a-b'"))
      assert.strictEqual(rows[0].n, 0)
    }))

  it.scopedLive("a wrong URL, a server that is down, a wrong password: typed StoreReadFailed naming the server, never the password", () =>
    Effect.gen(function*() {
      const canary = "canary-Secret-93xQ"
      const port = new URL(Redacted.value(pgUrl())).port
      const cases = [
        { url: `mysql://u:${canary}@127.0.0.1:1/db`, expect: "not a postgres:// URL" },
        { url: `postgres://u:${canary}@[::bad/db`, expect: "unparsable" },
        { url: `postgres://postgres:${canary}@127.0.0.1:1/postgres`, expect: "could not connect" },
        { url: `postgres://postgres:${canary}@127.0.0.1:${port}/postgres`, expect: "could not connect" }
      ]
      for (const c of cases) {
        const exit = yield* Effect.either(PgRuntimeEventStore.make({ url: Redacted.make(c.url), workspace: "w", connectTimeout: "3 seconds" }))
        assert.isTrue(Either.isLeft(exit), c.url)
        const error = (exit as Either.Left<{ _tag: string; message: string }, unknown>).left
        assert.strictEqual(error._tag, "StoreReadFailed", c.url)
        assert.include(error.message, c.expect)
        const everything = JSON.stringify(error) + error.message + String(error)
        assert.notInclude(everything, canary, `the password leaked: ${everything}`)
      }
    }))

  it.scopedLive("a workspace of a newer format version is refused on open, and left as it is", () =>
    Effect.gen(function*() {
      const name = freshName("newer")
      yield* Effect.scoped(openStore(name))
      const client = yield* rawClient
      yield* Effect.promise(() => client.query(`UPDATE "rr_${name}".meta SET value = 99 WHERE key = 'format_version'`))
      const exit = yield* Effect.either(Effect.scoped(openStore(name)))
      assert.isTrue(Either.isLeft(exit))
      const error = (exit as Either.Left<{ _tag: string; message: string }, unknown>).left
      assert.strictEqual(error._tag, "StoreReadFailed")
      assert.include(error.message, "format version 99 is newer")
      const { rows } = yield* Effect.promise(() => client.query(`SELECT value FROM "rr_${name}".meta`))
      assert.strictEqual(rows[0].value, 99)
    }))

  it.scopedLive("opening a workspace never waits behind another host's open write transaction (no DDL on a current workspace)", () =>
    Effect.gen(function*() {
      const name = freshName("busy")
      const first = yield* openStore(name)
      yield* seed(first, "run-busy")
      // Another host mid-transaction: it holds the row locks a T2 append takes on the ledger's tables.
      const client = yield* rawClient
      yield* Effect.promise(() => client.query("BEGIN"))
      yield* Effect.promise(() =>
        client.query(`LOCK TABLE "rr_${name}".events, "rr_${name}".calls, "rr_${name}".run_headers IN ROW EXCLUSIVE MODE`)
      )
      yield* Effect.addFinalizer(() => Effect.promise(() => client.query("ROLLBACK")))
      // A writer opening the same workspace, and one creating another (the creation lock is server-wide), both open
      // and read: an open that ran the workspace's DDL again would wait for that transaction (past the 3 s bound).
      const bounded = { operationTimeout: "3 seconds" as const }
      const second = yield* openStore(name, bounded)
      assert.strictEqual((yield* second.readRun(RunId.make("run-busy"))).length, 5)
      const other = yield* openStore(freshName("busy_other"), bounded)
      assert.deepStrictEqual(yield* other.listRuns(), [])
    }))

  it.scopedLive("the database refuses changes and deletes of committed events (trigger)", () =>
    Effect.gen(function*() {
      const name = freshName("append_only")
      const store = yield* openStore(name)
      yield* seed(store, "run-t")
      const client = yield* rawClient
      const attempt = (text: string) => Effect.promise(() => client.query(text).then(() => "committed", (e: Error) => e.message))
      assert.include(yield* attempt(`UPDATE "rr_${name}".events SET digest = 'x' WHERE seq = 2`), "never changed")
      assert.include(yield* attempt(`DELETE FROM "rr_${name}".events WHERE seq = 5`), "never changed")
      assert.include(yield* attempt(`TRUNCATE "rr_${name}".events CASCADE`), "never changed")
      assert.strictEqual((yield* store.readRun(RunId.make("run-t"))).length, 5)
    }))

  it.scopedLive("tampered rows (edited, deleted, reordered) read as typed corruption at the lowest seq", () =>
    Effect.gen(function*() {
      const client = yield* rawClient
      // As the superuser with triggers off (session_replication_role = replica): what a person with the keys could do.
      const tamper = (text: string) =>
        Effect.promise(() => client.query(`SET session_replication_role = replica; ${text}; SET session_replication_role = origin`))
      const cases: ReadonlyArray<readonly [string, (s: string) => string, ReadonlyArray<string>]> = [
        ["edited", (s) => `UPDATE ${s}.events SET bytes = replace(encode(bytes, 'escape'), 'again', 'AGAIN')::bytea WHERE seq = 4`, ["digest_mismatch"]],
        ["deleted", (s) => `DELETE FROM ${s}.events WHERE seq = 3`, ["seq_gap"]],
        [
          "reordered",
          (s) =>
            `UPDATE ${s}.events SET seq = 1000, end_seq = 1000 WHERE seq = 2; UPDATE ${s}.events SET seq = 2 WHERE seq = 3; ` +
            `UPDATE ${s}.events SET seq = 3, end_seq = 3 WHERE seq = 1000`,
          ["digest_mismatch", "seq_gap"]
        ],
        ["tail cut", (s) => `DELETE FROM ${s}.events WHERE seq = 5`, ["seq_gap", "digest_mismatch"]]
      ]
      for (const [what, sql, reasons] of cases) {
        const name = freshName("tamper")
        const store = yield* openStore(name)
        yield* seed(store, "run-x")
        yield* tamper(sql(`"rr_${name}"`))
        const reason = corruptionOf(yield* Effect.either(store.readRun(RunId.make("run-x"))))
        assert.include(reasons, reason, what)
        const exported = yield* Effect.either(Stream.runCollect(store.exportRows()))
        assert.include(reasons, corruptionOf(exported), what)
      }
    }))

  it.scopedLive("two pools claiming one boundary at once: exactly one claim commits, the other gets ContinuationAlreadyExists", () =>
    Effect.gen(function*() {
      const name = freshName("claims")
      const one = yield* PgRunHeaderStore.make({ url: pgUrl(), workspace: name })
      const two = yield* PgRunHeaderStore.make({ url: pgUrl(), workspace: name })
      for (let round = 0; round < 10; round++) {
        const a = claimFor(`claim-a-${round}`, `run-a-${round}`, round)
        const b = claimFor(`claim-b-${round}`, `run-b-${round}`, round)
        const results = yield* Effect.all([Effect.either(one.claim(a.claim, a.header)), Effect.either(two.claim(b.claim, b.header))], {
          concurrency: "unbounded"
        })
        assert.strictEqual(results.filter(Either.isRight).length, 1)
        const loser = results.find(Either.isLeft) as Either.Left<{ _tag: string }, unknown>
        assert.strictEqual(loser.left._tag, "ContinuationAlreadyExists")
        assert.strictEqual((yield* one.claimsAt({ sourceRunId: RunId.make("run-source"), sourceSeq: round, sourceDigest: DIGEST })).length, 1)
      }
    }))

  it.scopedLive("the database itself refuses a second live claim, a change to a terminal header, and any delete", () =>
    Effect.gen(function*() {
      const name = freshName("guards")
      const store = yield* PgRunHeaderStore.make({ url: pgUrl(), workspace: name })
      const pair = claimFor("claim-1", "run-c1", 7)
      yield* store.claim(pair.claim, pair.header)
      const client = yield* rawClient
      const s = `"rr_${name}"`
      const attempt = (text: string) => Effect.promise(() => client.query(text).then(() => "committed", (e: Error) => e.message))
      assert.include(
        yield* attempt(`INSERT INTO ${s}.continuation_claims (claim_id, source_run_id, source_seq, source_digest, generation,
          continuation_run_id, created_at) VALUES ('claim-x', 'run-source', 7, '${DIGEST}', 0, 'run-c1x', 1)`),
        "duplicate key"
      )
      assert.include(yield* attempt(`UPDATE ${s}.run_headers SET workspace_id = 'x' WHERE run_id = 'run-c1'`), "only the status fields")
      yield* store.setStatus(RunId.make("run-c1"), "completed", { at: 3000 })
      assert.include(yield* attempt(`UPDATE ${s}.run_headers SET status = 'failed' WHERE run_id = 'run-c1'`), "only the status fields")
      assert.include(yield* attempt(`DELETE FROM ${s}.run_headers WHERE run_id = 'run-c1'`), "never deleted")
      assert.include(yield* attempt(`DELETE FROM ${s}.continuation_claims`), "never changed")
      assert.include(yield* attempt(`UPDATE ${s}.continuation_claims SET created_at = 5`), "never changed")
      assert.include(yield* attempt(`TRUNCATE ${s}.continuation_claims CASCADE`), "never changed")
      const again = yield* store.claimsAt({ sourceRunId: RunId.make("run-source"), sourceSeq: 7, sourceDigest: DIGEST })
      assert.isTrue(Equal.equals(again[0], pair.claim))
    }))
})


describe("PgWorkspaceOwner", () => {
  it.scopedLive("shared holds coexist; exclusive waits for them and fails typed; probe sees an exclusive holder; release frees it", () =>
    Effect.gen(function*() {
      const name = freshName("owner")
      const one = yield* PgWorkspaceOwner.make({ url: pgUrl(), workspace: name })
      const two = yield* PgWorkspaceOwner.make({ url: pgUrl(), workspace: name })
      assert.strictEqual(yield* one.probe(name), "free")
      yield* Effect.scoped(Effect.gen(function*() {
        yield* one.acquire(name, "shared")
        yield* Effect.scoped(two.acquire(name, "shared"))
        const refused = yield* Effect.either(Effect.scoped(two.acquire(name, "exclusive", { timeoutMs: 300 })))
        assert.isTrue(Either.isLeft(refused))
        assert.strictEqual((refused as Either.Left<{ _tag: string }, unknown>).left._tag, "WorkspaceLocked")
        assert.strictEqual(yield* two.probe(name), "free")
      }))
      yield* Effect.scoped(Effect.gen(function*() {
        yield* one.acquire(name, "exclusive", { timeoutMs: 2000 })
        assert.strictEqual(yield* two.probe(name), "held")
        const blocked = yield* Effect.either(Effect.scoped(two.acquire(name, "shared", { timeoutMs: 200 })))
        assert.isTrue(Either.isLeft(blocked))
        // Another workspace of the same database is not affected.
        yield* Effect.scoped(two.acquire(`${name}_other`, "exclusive", { timeoutMs: 200 }))
      }))
      assert.strictEqual(yield* two.probe(name), "free")
      yield* Effect.scoped(two.acquire(name, "exclusive", { timeoutMs: 2000 }))
    }))
})
