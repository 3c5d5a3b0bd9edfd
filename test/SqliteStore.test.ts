// Tests of the SQLite RuntimeEventStore: the shared conformance suite, then what only SQLite has (pragmas, file
// mode, COMMIT failure, tampered bytes, read-only opens, several connections and processes, index-only appends).
import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as Reactivity from "@effect/experimental/Reactivity"
import * as Statement from "@effect/sql/Statement"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { RunId } from "../src/Domain/Ids.js"
import { UserMessage } from "../src/Domain/RuntimeEvent.js"
import * as Tool from "../src/Domain/Tool.js"
import * as SqliteRuntimeEventStore from "../src/Layers/SqliteRuntimeEventStore.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as ToolRuntime from "../src/Programs/ToolRuntime.js"
import * as Failpoints from "../src/Services/Failpoints.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { conformance } from "./support/conformance.js"
import { EVIDENCE_DIGEST, sealedRun } from "./support/recoveryConformance.js"
import * as RecoveryBundle from "../src/Domain/Rules/RecoveryBundle.js"

conformance({
  name: "sqlite",
  layer: (ws) => SqliteRuntimeEventStore.layer({ workspace: ws }).pipe(Layer.provide(NodeFileSystem.layer)),
  persistent: true
})

const rid = (s: string) => RunId.make(s)
const projectRoot = fileURLToPath(new URL("..", import.meta.url))
const storeModule = fileURLToPath(new URL("../src/Layers/SqliteRuntimeEventStore.ts", import.meta.url))
const builderModule = fileURLToPath(new URL("../src/Domain/Rules/EventBuilder.ts", import.meta.url))
const eventModule = fileURLToPath(new URL("../src/Domain/RuntimeEvent.ts", import.meta.url))

const tempWorkspace = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "rr-sqlite-" }))

const openStore = (workspace: string, readOnly = false) =>
  SqliteRuntimeEventStore.make({ workspace, ...(readOnly ? { readOnly } : {}) })

const dbPath = (workspace: string) => join(workspace, SqliteRuntimeEventStore.FILE_NAME)

/** A separate better-sqlite3 connection to the ledger, closed with the scope. */
const rawConnection = (workspace: string) =>
  Effect.acquireRelease(Effect.sync(() => new Database(dbPath(workspace))), (db) => Effect.sync(() => db.close()))

const failureOf = <E>(exit: Either.Either<unknown, E>): E => {
  assert.isTrue(Either.isLeft(exit), "expected a failure, but it succeeded")
  return (exit as Either.Left<E, unknown>).left
}

// A SCAN is allowed only over the constant rows of a VALUES clause (a multi-row INSERT).
const scanLines = (plan: ReadonlyArray<string>) =>
  plan.filter((line) => /^SCAN\b/.test(line) && !/^SCAN (\d+ CONSTANT ROWS|\d+-ROW VALUES CLAUSE|CONSTANT ROW)$/.test(line))

describe("SqliteRuntimeEventStore", () => {
  it.scopedLive("sets synchronous=FULL on its own connection after a reopen (a plain reopen reports NORMAL)", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const a = EventBuilder.make("run-sync")
      yield* Effect.scoped(Effect.flatMap(openStore(ws), (store) => store.append(rid("run-sync"), [a.opened()])))
      // What the pragma would be without the store setting it: a new connection to the existing WAL database.
      const plain = yield* rawConnection(ws)
      assert.strictEqual(plain.pragma("synchronous", { simple: true }), 1)
      const reopened = yield* openStore(ws)
      // Read the pragma through the store's own connection, from inside one of its statements (an export's page read,
      // which goes through the SQL client; a run's pages are read synchronously, as values).
      const seen: Array<unknown> = []
      yield* Stream.runDrain(reopened.exportRows()).pipe(
        Statement.withTransformer((self, sql) =>
          sql.unsafe("PRAGMA synchronous").pipe(
            Statement.withTransformerDisabled,
            Effect.orDie,
            Effect.map((rows) => {
              seen.push(...rows)
              return self
            })
          )
        )
      )
      assert.deepStrictEqual(seen, [{ synchronous: 2 }])
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("creates the workspace folder 0700 and runtime.sqlite 0600", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = join(yield* tempWorkspace, "nested", "ws")
      const store = yield* openStore(ws)
      const a = EventBuilder.make("run-mode")
      yield* store.append(rid("run-mode"), [a.opened()])
      assert.strictEqual((yield* fs.stat(ws)).mode & 0o777, 0o700)
      assert.strictEqual((yield* fs.stat(dbPath(ws))).mode & 0o777, 0o600)
      assert.strictEqual((yield* fs.stat(`${dbPath(ws)}-wal`)).mode & 0o777, 0o600)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a failing COMMIT is StoreWriteFailed, leaves nothing, and the next append works", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const store = yield* openStore(ws)
      const ok = EventBuilder.make("run-ok")
      yield* store.append(rid("run-ok"), [ok.opened()])
      // Through a separate connection: a deferred foreign key that any row of run-doomed violates. Statements
      // succeed; only the COMMIT fails (the store's connection enforces foreign keys).
      const raw = yield* rawConnection(ws)
      raw.exec(`
        CREATE TABLE doom_parent (id INTEGER PRIMARY KEY);
        CREATE TABLE doom_child (parent INTEGER REFERENCES doom_parent (id) DEFERRABLE INITIALLY DEFERRED);
        CREATE TRIGGER doom AFTER INSERT ON events WHEN NEW.run_id = 'run-doomed'
        BEGIN INSERT INTO doom_child VALUES (1); END;
      `)
      const doomed = EventBuilder.make("run-doomed")
      const events = [doomed.opened(), doomed.user("lost")]
      const error = failureOf(yield* Effect.either(store.append(rid("run-doomed"), events)))
      assert.strictEqual(error._tag, "StoreWriteFailed")
      assert.strictEqual((error as { runId: string }).runId, "run-doomed")
      assert.match(error.message, /at COMMIT/)
      assert.match((error as { cause: string }).cause, /FOREIGN KEY constraint failed/)
      // Nothing of it is readable, through the store or the file.
      assert.strictEqual(failureOf(yield* Effect.either(store.readRun(rid("run-doomed"))))._tag, "RunNotFound")
      assert.deepStrictEqual(yield* store.listRuns(), [rid("run-ok")])
      assert.deepStrictEqual(raw.prepare("SELECT count(*) AS n FROM events WHERE run_id = 'run-doomed'").get(), { n: 0 })
      assert.deepStrictEqual(raw.prepare("SELECT count(*) AS n FROM runs WHERE run_id = 'run-doomed'").get(), { n: 0 })
      // The connection is out of the transaction: the next append commits.
      yield* store.append(rid("run-ok"), [ok.user("after")])
      assert.deepStrictEqual((yield* store.readRun(rid("run-ok"))).map((r) => r.seq), [1, 2])
      raw.exec("DROP TRIGGER doom")
      const rows = yield* store.append(rid("run-doomed"), events)
      assert.deepStrictEqual(rows.map((r) => r.seq), [1, 2])
      assert.strictEqual((yield* store.readRun(rid("run-doomed"))).length, 2)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a failing statement inside the transaction is StoreWriteFailed and rolls back", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const store = yield* openStore(ws)
      const a = EventBuilder.make("run-raise")
      yield* store.append(rid("run-raise"), [a.opened()])
      const raw = yield* rawConnection(ws)
      raw.exec(`CREATE TRIGGER refuse BEFORE UPDATE ON runs WHEN NEW.tail_seq = 3 BEGIN SELECT RAISE(ABORT, 'refused by test'); END;`)
      // The events insert succeeds, then the runs update fails: the rows of the append must not stay.
      const error = failureOf(yield* Effect.either(store.append(rid("run-raise"), [a.user("x"), a.user("y")])))
      assert.strictEqual(error._tag, "StoreWriteFailed")
      assert.match(error.message, /in a statement/)
      assert.deepStrictEqual(raw.prepare("SELECT count(*) AS n FROM events WHERE run_id = 'run-raise'").get(), { n: 1 })
      assert.strictEqual((yield* store.highWater(rid("run-raise"))).seq, 1)
      yield* store.append(rid("run-raise"), [a.user("z")])
      assert.deepStrictEqual((yield* store.readRun(rid("run-raise"))).map((r) => r.seq), [1, 2])
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("readRowsAt checks every row it reads on its own and against the row before it; rows not asked are never read", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const store = yield* openStore(ws)
      const b = EventBuilder.make("run-at")
      yield* store.append(rid("run-at"), [b.opened(), b.user("hello"), b.model("world"), b.user("again"), b.model("more")])
      const raw = yield* rawConnection(ws)
      const row = (seq: number) => raw.prepare("SELECT bytes, digest FROM events WHERE run_id = 'run-at' AND seq = ?").get(seq) as { bytes: Buffer; digest: string }
      const reasonAt = (seqs: ReadonlyArray<number>) =>
        Effect.map(Effect.either(store.readRowsAt(rid("run-at"), seqs)), (e) => {
          const error = failureOf(e) as { _tag: string; reason?: string; seq?: number }
          return [error._tag, error.reason, error.seq]
        })
      // A byte of seq 2's text: still canonical JSON, but its digest no longer chains from seq 1.
      const original = row(2).bytes
      const changed = Buffer.from(original)
      changed[changed.indexOf("hello")] = "j".charCodeAt(0)
      raw.prepare("UPDATE events SET bytes = ? WHERE run_id = 'run-at' AND seq = 2").run(changed)
      assert.deepStrictEqual(yield* reasonAt([2]), ["LedgerCorruption", "digest_mismatch", 2])
      // Not asked for, seq 2 is not read (its digest column is, to chain seq 3): the other rows still read.
      assert.deepStrictEqual((yield* store.readRowsAt(rid("run-at"), [5, 3])).map((r) => r.seq), [5, 3])
      raw.prepare("UPDATE events SET bytes = ? WHERE run_id = 'run-at' AND seq = 2").run(original)
      // A digest column that does not chain breaks the row after it too.
      raw.prepare("UPDATE events SET digest = ? WHERE run_id = 'run-at' AND seq = 3").run(`sha256:${"0".repeat(64)}`)
      assert.deepStrictEqual(yield* reasonAt([3]), ["LedgerCorruption", "digest_mismatch", 3])
      assert.deepStrictEqual(yield* reasonAt([4]), ["LedgerCorruption", "digest_mismatch", 4])
      // Bytes that are not JSON; an event id column that is not the event's; a row the run's high-water covers, gone.
      raw.prepare("UPDATE events SET bytes = ? WHERE run_id = 'run-at' AND seq = 1").run(Buffer.from("[" + row(1).bytes.toString("utf8").slice(1)))
      assert.deepStrictEqual(yield* reasonAt([1]), ["LedgerCorruption", "non_canonical", 1])
      raw.prepare("UPDATE events SET event_id = 'someone-else' WHERE run_id = 'run-at' AND seq = 5").run()
      assert.deepStrictEqual(yield* reasonAt([5]), ["LedgerCorruption", "identity_mismatch", 5])
      raw.prepare("DELETE FROM events WHERE run_id = 'run-at' AND seq = 4").run()
      assert.deepStrictEqual(yield* reasonAt([4]), ["LedgerCorruption", "seq_gap", 4])
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("readRunFrom checks its window: a tampered row, a broken link to the anchor, a gap are LedgerCorruption", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const store = yield* openStore(ws)
      for (const name of ["run-wc", "run-wa", "run-wg"]) {
        const b = EventBuilder.make(name)
        yield* store.append(rid(name), [b.opened(), b.user("hello"), b.model("world"), b.user("again"), b.model("done")])
      }
      const raw = yield* rawConnection(ws)
      // A byte of row 3's text: still canonical JSON, but its digest no longer follows.
      const bytes = Buffer.from((raw.prepare("SELECT bytes FROM events WHERE run_id = 'run-wc' AND seq = 3").get() as { bytes: Buffer }).bytes)
      bytes[bytes.indexOf("world")] = "v".charCodeAt(0)
      raw.prepare("UPDATE events SET bytes = ? WHERE run_id = 'run-wc' AND seq = 3").run(bytes)
      // The anchor's stored digest changed: the window's first row does not follow from it.
      raw.prepare("UPDATE events SET digest = ? WHERE run_id = 'run-wa' AND seq = 2").run(`sha256:${"1".repeat(64)}`)
      raw.prepare("DELETE FROM events WHERE run_id = 'run-wg' AND seq = 4").run()
      const reasonOf = (run: string, from: number, limit: number) =>
        Effect.map(Effect.either(store.readRunFrom(rid(run), from, limit)), (e) => {
          const error = failureOf(e) as { _tag: string; reason?: string; seq?: number }
          return [error._tag, error.reason, error.seq]
        })
      assert.deepStrictEqual(yield* reasonOf("run-wc", 2, 3), ["LedgerCorruption", "digest_mismatch", 3])
      assert.deepStrictEqual(yield* reasonOf("run-wc", 3, 1), ["LedgerCorruption", "digest_mismatch", 3])
      assert.deepStrictEqual(yield* reasonOf("run-wa", 3, 2), ["LedgerCorruption", "digest_mismatch", 3])
      assert.deepStrictEqual(yield* reasonOf("run-wg", 3, 2), ["LedgerCorruption", "seq_gap", 5])
      // Windows that do not touch the damage read (they are not verified from the run's start: readRun is).
      assert.deepStrictEqual((yield* store.readRunFrom(rid("run-wc"), 4, 2)).map((r) => r.seq), [4, 5])
      assert.deepStrictEqual((yield* store.readRunFrom(rid("run-wa"), 4, 2)).map((r) => r.seq), [4, 5])
      assert.deepStrictEqual(yield* reasonOf("run-wa", 1, 2), ["LedgerCorruption", "digest_mismatch", 2])
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("tampered rows read as LedgerCorruption naming run and seq; other runs still read", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const store = yield* openStore(ws)
      const names = ["run-content", "run-structure", "run-utf8", "run-idcol", "run-tail", "run-short", "run-clean"]
      for (const name of names) {
        const b = EventBuilder.make(name)
        yield* store.append(rid(name), [b.opened(), b.user("hello"), b.model("world")])
      }
      const raw = yield* rawConnection(ws)
      const bytesOf = (run: string, seq: number) =>
        Buffer.from((raw.prepare("SELECT bytes FROM events WHERE run_id = ? AND seq = ?").get(run, seq) as { bytes: Buffer }).bytes)
      const setBytes = (run: string, seq: number, bytes: Buffer) =>
        raw.prepare("UPDATE events SET bytes = ? WHERE run_id = ? AND seq = ?").run(bytes, run, seq)
      const flip = (run: string, seq: number, at: (b: Buffer) => number, value: number) => {
        const bytes = bytesOf(run, seq)
        bytes[at(bytes)] = value
        setBytes(run, seq, bytes)
      }
      // A byte of the text: still canonical JSON, but the chain breaks.
      flip("run-content", 2, (b) => b.indexOf("hello"), "j".charCodeAt(0))
      // The opening brace: no longer JSON at all.
      flip("run-structure", 2, () => 0, "[".charCodeAt(0))
      // Not UTF-8.
      flip("run-utf8", 3, (b) => b.indexOf("world"), 0xff)
      raw.prepare("UPDATE events SET event_id = 'someone-else' WHERE run_id = 'run-idcol' AND seq = 2").run()
      raw.prepare("UPDATE runs SET tail_digest = ? WHERE run_id = 'run-tail'").run(`sha256:${"0".repeat(64)}`)
      raw.prepare("DELETE FROM events WHERE run_id = 'run-short' AND seq = 3").run()
      const expectations: Array<[string, string, number]> = [
        ["run-content", "digest_mismatch", 2],
        ["run-structure", "non_canonical", 2],
        ["run-utf8", "non_canonical", 3],
        ["run-idcol", "identity_mismatch", 2],
        ["run-tail", "digest_mismatch", 3],
        ["run-short", "seq_gap", 3]
      ]
      for (const [run, reason, seq] of expectations) {
        const error = failureOf(yield* Effect.either(store.readRun(rid(run))))
        assert.strictEqual(error._tag, "LedgerCorruption", run)
        const corruption = error as { runId: string; reason: string; seq?: number; eventId?: string }
        assert.deepStrictEqual([corruption.runId, corruption.reason, corruption.seq], [run, reason, seq], error.message)
        assert.include(error.message, run)
        const paged = failureOf(yield* Effect.either(Stream.runCollect(store.readRunPages(rid(run), 1))))
        assert.strictEqual((paged as { reason?: string }).reason, reason)
      }
      assert.strictEqual(
        (failureOf(yield* Effect.either(store.readRun(rid("run-idcol")))) as { eventId?: string }).eventId,
        "someone-else"
      )
      assert.strictEqual((yield* store.readRun(rid("run-clean"))).length, 3)
      // Reading the first seq only stops before the problem.
      assert.strictEqual((yield* store.readRun(rid("run-content"), { upToSeq: 1 })).length, 1)
      const exported = failureOf(yield* Effect.either(Stream.runCollect(store.exportRows())))
      assert.deepStrictEqual(
        [exported._tag, (exported as { runId?: string }).runId, (exported as { reason?: string }).reason],
        ["LedgerCorruption", "run-content", "digest_mismatch"]
      )
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a malformed runs row fails appends with StoreWriteFailed and reads with LedgerCorruption", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const store = yield* openStore(ws)
      const a = EventBuilder.make("run-badtail")
      yield* store.append(rid("run-badtail"), [a.opened()])
      const raw = yield* rawConnection(ws)
      raw.prepare("UPDATE runs SET tool_boundary = 'bogus' WHERE run_id = 'run-badtail'").run()
      const error = failureOf(yield* Effect.either(store.append(rid("run-badtail"), [a.user("x")])))
      assert.strictEqual(error._tag, "StoreWriteFailed")
      assert.match(error.message, /tail state of run run-badtail is malformed/)
      const read = failureOf(yield* Effect.either(store.readRun(rid("run-badtail"))))
      assert.deepStrictEqual([read._tag, (read as { reason?: string }).reason], ["LedgerCorruption", "schema_invalid"])
      assert.deepStrictEqual(raw.prepare("SELECT count(*) AS n FROM events").get(), { n: 1 })
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a batch past SQLite's variable limit is split into several statements of one transaction", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const store = yield* openStore(ws)
      const a = EventBuilder.make("run-many")
      const b = EventBuilder.make("run-many-2")
      const events = [a.opened(), ...Array.from({ length: 6000 }, (_, i) => a.user(`m${i}`))]
      const rows = yield* store.appendBatch([
        { runId: rid("run-many"), events },
        { runId: rid("run-many-2"), events: [b.opened()] }
      ])
      assert.deepStrictEqual(rows.map((r) => r.length), [6001, 1])
      assert.isTrue(rows[0]!.every((r) => r.end === 6001))
      const read = yield* store.readRun(rid("run-many"))
      assert.deepStrictEqual([read.length, read[6000]!.digest], [6001, rows[0]![6000]!.digest])
      assert.deepStrictEqual(yield* store.listRuns(), [rid("run-many"), rid("run-many-2")])
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("read-only: a folder without the file is WorkspaceNotFound and stays as it was", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* tempWorkspace
      yield* fs.writeFileString(join(ws, "notes.txt"), "keep")
      const before = (yield* fs.readDirectory(ws)).slice().sort()
      const error = failureOf(yield* Effect.either(Effect.scoped(openStore(ws, true))))
      assert.strictEqual(error._tag, "WorkspaceNotFound")
      assert.deepStrictEqual((yield* fs.readDirectory(ws)).slice().sort(), before)
      const missing = join(ws, "missing")
      assert.strictEqual(failureOf(yield* Effect.either(Effect.scoped(openStore(missing, true))))._tag, "WorkspaceNotFound")
      assert.isFalse(yield* fs.exists(missing))
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("read-only: reads what a writer wrote, refuses appends with StoreWriteFailed, writes nothing", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const a = EventBuilder.make("run-ro")
      yield* Effect.scoped(Effect.flatMap(openStore(ws), (store) => store.append(rid("run-ro"), [a.opened(), a.user("1")])))
      const store = yield* openStore(ws, true)
      assert.deepStrictEqual((yield* store.readRun(rid("run-ro"))).map((r) => r.seq), [1, 2])
      assert.deepStrictEqual(yield* store.listRuns(), [rid("run-ro")])
      const error = failureOf(yield* Effect.either(store.append(rid("run-ro"), [a.user("2")])))
      assert.strictEqual(error._tag, "StoreWriteFailed")
      assert.strictEqual((error as { cause: string }).cause, "opened read-only")
      const batch = failureOf(yield* Effect.either(store.appendBatch([{ runId: rid("run-ro"), events: [a.user("3")] }])))
      assert.strictEqual(batch._tag, "StoreWriteFailed")
      assert.strictEqual((yield* store.highWater(rid("run-ro"))).seq, 2)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("read-only over a file no writer initialised holds no runs; a newer format version is refused", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* tempWorkspace
      yield* fs.writeFile(dbPath(ws), new Uint8Array(0), { mode: 0o600 })
      const empty = yield* openStore(ws, true)
      assert.deepStrictEqual(yield* empty.listRuns(), [])
      assert.strictEqual(failureOf(yield* Effect.either(empty.readRun(rid("x"))))._tag, "RunNotFound")
      const newer = yield* tempWorkspace
      yield* Effect.scoped(openStore(newer))
      const raw = new Database(dbPath(newer))
      raw.pragma("user_version = 5")
      raw.close()
      for (const readOnly of [false, true]) {
        const error = failureOf(yield* Effect.either(Effect.scoped(openStore(newer, readOnly))))
        assert.strictEqual(error._tag, "StoreReadFailed")
        assert.match(error.message, /format version 5 is newer than 4/)
      }
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("a format 2 ledger migrates to 4: the call index gains the recorded mode, key and evidence digest; bundles then write and read", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const runId = rid("run-mig")
      let calls: Record<string, { readonly call: ReturnType<EventBuilder.EventBuilder["call"]> }> = {}
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* openStore(ws)
        const built = yield* sealedRun(store, "run-mig", [
          { callId: "idem", mode: "idempotent" },
          { callId: "rec", mode: "reconcilable" },
          { callId: "never", mode: "never_auto_retry" }
        ])
        calls = { idem: { call: built.call("idem") }, rec: { call: built.call("rec") }, never: { call: built.call("never") } }
      }))
      const columns = "run_id, call_id, recovery_mode, idempotency_key, evidence_digest, recovery_kind, recovery_seq"
      const read = () => {
        const raw = new Database(dbPath(ws), { readonly: true })
        const rows = raw.prepare(`SELECT ${columns} FROM calls ORDER BY run_id, call_id`).all()
        const version = raw.pragma("user_version", { simple: true })
        raw.close()
        return { rows, version }
      }
      const written = read()
      assert.strictEqual(written.version, 4)
      // Back to format 2, as an older runtime-resume left it: the format 3 columns do not exist, and the projections
      // are tables (their rows are dropped with them: the migration makes them views again).
      const raw = new Database(dbPath(ws))
      raw.exec("DROP VIEW tool_operations; DROP VIEW tool_operation_journal")
      raw.exec("CREATE TABLE tool_operations (operation_id TEXT NOT NULL PRIMARY KEY) WITHOUT ROWID")
      raw.exec("CREATE TABLE tool_operation_journal (journal_id TEXT NOT NULL PRIMARY KEY) WITHOUT ROWID")
      raw.exec("DROP INDEX calls_unsettled")
      for (const column of ["recovery_mode", "idempotency_key", "evidence_digest", "recovery_kind", "recovery_disposition", "recovery_reason", "recovery_actor", "recovery_seq"]) {
        raw.exec(`ALTER TABLE calls DROP COLUMN ${column}`)
      }
      raw.pragma("user_version = 2")
      raw.close()
      // A read-only open does not migrate, and still answers toolCallState (with no recovery state).
      const reader = yield* openStore(ws, true)
      assert.strictEqual((yield* reader.toolCallState(runId, "idem")).call?.recoveryMode, undefined)
      const store = yield* openStore(ws)
      assert.deepStrictEqual(read(), written)
      const idem = yield* store.toolCallState(runId, "idem")
      assert.deepStrictEqual([idem.call?.recoveryMode, idem.call?.idempotencyKey], ["idempotent", RecoveryBundle.operationIdOf(calls.idem!.call)])
      assert.strictEqual((yield* store.toolCallState(runId, "rec")).call?.evidenceDigest, EVIDENCE_DIGEST)
      // The migrated index is what the recovery writer checks: the wrong key is refused, the right one accepted.
      const wrong = yield* store.appendRecovery(runId, RecoveryBundle.reexecutedIdempotent(calls.idem!.call, { ts: 1, result: 1, idempotencyKey: "other" })).pipe(Effect.either)
      assert.isTrue(Either.isLeft(wrong))
      yield* store.appendRecovery(runId, RecoveryBundle.reexecutedIdempotent(calls.idem!.call, { ts: 1, result: 1, idempotencyKey: idem.call!.idempotencyKey! }))
      yield* store.appendRecovery(runId, RecoveryBundle.reconcileParked(calls.rec!.call, { ts: 1, evidenceDigest: EVIDENCE_DIGEST, observation: "diverged" }))
      yield* store.appendRecovery(runId, RecoveryBundle.manualAbort(calls.never!.call, { ts: 1, actor: "alice" }))
      assert.strictEqual((yield* store.readRun(runId)).length, 14)
      assert.strictEqual((yield* store.toolCallState(runId, "rec")).call?.recovery?.reasonCode, "reconcile_diverged")
      assert.deepStrictEqual((yield* store.unsettledOperations()).map((o) => o.call.callId), [])
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("two store instances in one process: compare-and-append has one winner; appends interleave", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const first = yield* openStore(ws)
      const second = yield* openStore(ws)
      const a = EventBuilder.make("run-race")
      yield* first.append(rid("run-race"), [a.opened()])
      const hw = yield* second.highWater(rid("run-race"))
      const expectedHighWater = { seq: hw.seq, digest: hw.digest }
      const results = yield* Effect.all(
        [
          Effect.either(first.append(rid("run-race"), [a.user("from first")], { expectedHighWater })),
          Effect.either(second.append(rid("run-race"), [a.user("from second")], { expectedHighWater }))
        ],
        { concurrency: 2 }
      )
      assert.strictEqual(results.filter(Either.isRight).length, 1)
      const loser = results.find(Either.isLeft)!.left
      assert.strictEqual(loser._tag, "RuntimeOffsetMismatch")
      assert.strictEqual((loser as { actual: { seq: number } }).actual.seq, 2)
      // Different runs (and the same run) from both instances at once.
      const x = EventBuilder.make("run-x")
      const y = EventBuilder.make("run-y")
      yield* first.append(rid("run-x"), [x.opened()])
      yield* second.append(rid("run-y"), [y.opened()])
      const work = Array.from({ length: 20 }, (_, i) => [
        first.append(rid("run-x"), [x.user(`x${i}`)]),
        second.append(rid("run-y"), [y.user(`y${i}`)]),
        (i % 2 === 0 ? first : second).append(rid("run-race"), [a.user(`r${i}`)])
      ]).flat()
      yield* Effect.all(work, { concurrency: 6, discard: true })
      for (const store of [first, second]) {
        assert.deepStrictEqual((yield* store.readRun(rid("run-x"))).map((r) => r.seq), Array.from({ length: 21 }, (_, i) => i + 1))
        assert.deepStrictEqual((yield* store.readRun(rid("run-y"))).map((r) => r.seq), Array.from({ length: 21 }, (_, i) => i + 1))
        assert.strictEqual((yield* store.readRun(rid("run-race"))).length, 22)
        assert.deepStrictEqual(yield* store.listRuns(), [rid("run-race"), rid("run-x"), rid("run-y")])
        const exported = Chunk.toReadonlyArray(yield* Stream.runCollect(store.exportRows()))
        assert.strictEqual(exported.length, 64)
      }
    }).pipe(Effect.provide(NodeContext.layer)))

  // An append with nothing to run inside its transaction is one synchronous step and takes no permit when no
  // other write of this process is in progress on the file. A T2 whose inside_t2 failpoint suspends holds the file's
  // gate with its transaction open: appends from the same instance (one connection) and from a second instance (a
  // second connection, whose BEGIN IMMEDIATE would block the event loop on SQLite's lock) must wait for it.
  it.scopedLive("appends issued while a T2 transaction is suspended inside it wait for its COMMIT (same and other instance)", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const first = yield* openStore(ws)
      const second = yield* openStore(ws)
      const t = EventBuilder.make("run-tool")
      const x = EventBuilder.make("run-x")
      yield* first.append(rid("run-tool"), [t.opened("t1_after_preflight_v1")])
      yield* first.append(rid("run-x"), [x.opened()])
      const log: Array<string> = []
      const inside = yield* Deferred.make<void>()
      const tool = Tool.make({
        name: "Echo",
        args: Schema.Struct({ text: Schema.String }),
        recoveryMode: "idempotent",
        implementation: (args) => Effect.succeed({ echoed: args.text })
      })
      const failpoints = Failpoints.layerAt("inside_t2", () =>
        Effect.zipRight(
          Effect.sync(() => log.push("inside_t2")),
          Effect.zipRight(Deferred.succeed(inside, undefined), Effect.sleep("150 millis"))
        ))
      const toolCall = ToolRuntime.run(rid("run-tool"), t.call("c1", "Echo", { text: "hi" }), { tools: [tool] }).pipe(
        Effect.provideService(RuntimeEventStore, first),
        Effect.provide(failpoints),
        Effect.tap(() => Effect.sync(() => log.push("t2 committed")))
      )
      const appendsMeanwhile = Effect.zipRight(
        Deferred.await(inside),
        Effect.all([
          first.append(rid("run-x"), [x.user("from the same instance")]).pipe(Effect.tap(() => Effect.sync(() => log.push("same")))),
          second.append(rid("run-x"), [x.user("from the other instance")]).pipe(Effect.tap(() => Effect.sync(() => log.push("other"))))
        ], { concurrency: 2 })
      )
      const [outcome, appended] = yield* Effect.all([toolCall, appendsMeanwhile], { concurrency: 2 })
      assert.strictEqual(outcome._tag, "Completed")
      assert.deepStrictEqual(appended.flatMap((rows) => rows.map((r) => r.seq)).sort(), [2, 3])
      assert.deepStrictEqual(log.slice(0, 2), ["inside_t2", "t2 committed"])
      assert.sameMembers(log.slice(2), ["same", "other"])
      assert.deepStrictEqual((yield* second.readRun(rid("run-tool"))).map((r) => r.event.body._tag), [
        "RunOpened",
        "FunctionCall",
        "ToolDispatched",
        "FunctionResponse"
      ])
    }).pipe(Effect.provide(NodeContext.layer)))

  // A read takes no permit when the connection is in no transaction (it runs in one synchronous step); while a T2 is
  // suspended inside its open transaction it waits for it, so it never sees rows that may yet be rolled back.
  it.scopedLive("a read issued while a T2 transaction is suspended inside it never sees that T2's uncommitted rows", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const store = yield* openStore(ws)
      const t = EventBuilder.make("run-tool")
      yield* store.append(rid("run-tool"), [t.opened("t1_after_preflight_v1")])
      const inside = yield* Deferred.make<void>()
      const tool = Tool.make({
        name: "Echo",
        args: Schema.Struct({ text: Schema.String }),
        recoveryMode: "idempotent",
        implementation: (args) => Effect.succeed({ echoed: args.text })
      })
      // The T2 dies inside its transaction (a crash there): it is rolled back.
      const failpoints = Failpoints.layerAt("inside_t2", () =>
        Effect.zipRight(Deferred.succeed(inside, undefined), Effect.zipRight(Effect.sleep("100 millis"), Effect.dieMessage("crash inside T2"))))
      const toolCall = ToolRuntime.run(rid("run-tool"), t.call("c1", "Echo", { text: "hi" }), { tools: [tool] }).pipe(
        Effect.provideService(RuntimeEventStore, store),
        Effect.provide(failpoints),
        Effect.exit
      )
      const readMeanwhile = Effect.zipRight(
        Deferred.await(inside),
        Effect.all([store.toolCallState(rid("run-tool"), "c1"), store.highWater(rid("run-tool"))])
      )
      const [exit, [state, hw]] = yield* Effect.all([toolCall, readMeanwhile], { concurrency: 2 })
      assert.strictEqual(exit._tag, "Failure")
      assert.deepStrictEqual([state.call?.dispatchSeq, state.call?.responseSeq, hw.seq], [3, undefined, 3])
      assert.deepStrictEqual((yield* store.readRun(rid("run-tool"))).map((r) => r.event.body._tag), [
        "RunOpened",
        "FunctionCall",
        "ToolDispatched"
      ])
    }).pipe(Effect.provide(NodeContext.layer)))

  // T1 and T2 read the run's row, the call's index row and the taken ids in one statement: a malformed row fails them
  // as it fails every other append (nothing written), and `toolCallState` (one joined statement) reports it.
  it.scopedLive("a malformed runs or calls row fails T1 and T2 with StoreWriteFailed and toolCallState with LedgerCorruption", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const store = yield* openStore(ws)
      const t = EventBuilder.make("run-bad")
      const call = t.call("c1", "Echo", { text: "hi" })
      yield* store.append(rid("run-bad"), [t.opened("t1_after_preflight_v1"), call])
      const raw = yield* rawConnection(ws)
      const dispatch = t.dispatched("c1", "Echo", { text: "hi" })
      raw.prepare("UPDATE runs SET tail_seq = 'x' WHERE run_id = 'run-bad'").run()
      const t1 = failureOf(yield* Effect.either(store.appendDispatch(rid("run-bad"), { dispatch })))
      assert.strictEqual(t1._tag, "StoreWriteFailed")
      assert.match(t1.message, /tail state of run run-bad is malformed/)
      const read = failureOf(yield* Effect.either(store.toolCallState(rid("run-bad"), "c1")))
      assert.deepStrictEqual([read._tag, (read as { reason?: string }).reason], ["LedgerCorruption", "schema_invalid"])
      raw.prepare("UPDATE runs SET tail_seq = 2 WHERE run_id = 'run-bad'").run()
      yield* store.appendDispatch(rid("run-bad"), { dispatch })
      raw.prepare("UPDATE calls SET hidden = 7 WHERE run_id = 'run-bad' AND call_id = 'c1'").run()
      const response = t.response("c1", "Echo", { echoed: "hi" }, { operationBound: true })
      const t2 = failureOf(yield* Effect.either(store.appendOutcome(rid("run-bad"), response)))
      assert.strictEqual(t2._tag, "StoreWriteFailed")
      assert.match(t2.message, /call index/)
      const state = failureOf(yield* Effect.either(store.toolCallState(rid("run-bad"), "c1")))
      assert.match(state.message, /call index row of c1 in run run-bad is malformed/)
      assert.deepStrictEqual(raw.prepare("SELECT count(*) AS n FROM events").get(), { n: 3 })
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("two processes append to one run at once: every append lands, seqs dense, no SQLITE_BUSY", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* tempWorkspace
      const store = yield* openStore(ws)
      const shared = EventBuilder.make("run-shared")
      yield* store.append(rid("run-shared"), [shared.opened()])
      const count = 150
      const go = join(ws, "go")
      const go2 = join(ws, "go2")
      const script = `
        import * as Effect from "effect/Effect"
        import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
        import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
        import { existsSync } from "node:fs"
        const Store = await import(${JSON.stringify(storeModule)})
        const Builder = await import(${JSON.stringify(builderModule)})
        const Events = await import(${JSON.stringify(eventModule)})
        const program = Effect.gen(function*() {
          const store = yield* Store.make({ workspace: ${JSON.stringify(ws)} })
          const b = Builder.make("run-shared")
          process.stdout.write("ready\\n")
          while (!existsSync(${JSON.stringify(go)})) yield* Effect.sleep(2)
          for (let i = 0; i < ${count}; i++) {
            yield* store.append("run-shared", [b.custom(new Events.UserMessage({ text: "child " + i }), { id: "child-" + i })])
            if (i === 0) {
              process.stdout.write("first\\n")
              // Go on once the parent's first row is in, so the two writers overlap however the machine is loaded.
              while (!existsSync(${JSON.stringify(go2)})) yield* Effect.sleep(2)
            }
          }
          process.stdout.write("done\\n")
        }).pipe(Effect.scoped, Effect.provide(NodeFileSystem.layer))
        NodeRuntime.runMain(program)
      `
      const child = yield* Command.make("node", "--import", "tsx", "--input-type=module", "-e", script).pipe(
        Command.workingDirectory(projectRoot),
        Command.start
      )
      const stderr = yield* Effect.fork(Stream.decodeText(child.stderr).pipe(Stream.runCollect, Effect.map(Chunk.join(""))))
      const pull = yield* Stream.decodeText(child.stdout).pipe(Stream.splitLines, Stream.toPull)
      const out: Array<string> = []
      const nextLine = Effect.gen(function*() {
        while (out.length === 0) {
          const chunk = yield* Effect.either(pull)
          if (Either.isLeft(chunk)) return undefined
          out.push(...chunk.right)
        }
        return out.shift()
      })
      assert.strictEqual(yield* Effect.timeoutFail(nextLine, { duration: "60 seconds", onTimeout: () => "no ready line" }), "ready")
      yield* fs.writeFileString(go, "")
      // The parent starts once the child's first row is in, and the child goes on once the parent's first row is in:
      // appends are synchronous transactions, so without the handshake one writer could finish before the other wakes.
      assert.strictEqual(yield* Effect.timeoutFail(nextLine, { duration: "60 seconds", onTimeout: () => "no first line" }), "first")
      for (let i = 0; i < count; i++) {
        yield* store.append(rid("run-shared"), [shared.custom(new UserMessage({ text: `parent ${i}` }), { id: `parent-${i}` })])
        if (i === 0) yield* fs.writeFileString(go2, "")
      }
      const rest: Array<string> = []
      for (let line = yield* nextLine; line !== undefined; line = yield* nextLine) rest.push(line)
      const code = yield* child.exitCode
      const errors = yield* stderr.await
      assert.strictEqual(code, 0, `child stdout: ${rest.join("\n")}\nstderr: ${JSON.stringify(errors)}`)
      assert.deepStrictEqual(rest, ["done"])
      const rows = yield* store.readRun(rid("run-shared"))
      assert.deepStrictEqual(rows.map((r) => r.seq), Array.from({ length: 2 * count + 1 }, (_, i) => i + 1))
      const ids = rows.map((r) => r.event.id as string)
      assert.strictEqual(new Set(ids).size, 2 * count + 1)
      // The two writers really overlapped: a parent row sits between the first and the last child row.
      const firstChild = ids.findIndex((id) => id.startsWith("child-"))
      const lastChild = ids.length - 1 - ids.slice().reverse().findIndex((id) => id.startsWith("child-"))
      assert.isTrue(ids.slice(firstChild, lastChild).some((id) => id.startsWith("parent-")), "the writers did not overlap")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("an append inside a caller's own SQL transaction (another database) commits on its own and leaves no transaction open", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const store = yield* openStore(ws)
      const a = EventBuilder.make("run-nested")
      // The caller's own database and transaction: its TransactionConnection is in the context of the append.
      const other = yield* SqliteClient.make({ filename: join(ws, "other.sqlite") }).pipe(Effect.provide(Reactivity.layer))
      yield* other.unsafe("CREATE TABLE t (x INTEGER)")
      const outer = yield* Effect.either(
        Effect.gen(function*() {
          yield* other.unsafe("INSERT INTO t VALUES (1)")
          yield* store.append(rid("run-nested"), [a.opened(), a.user("inside")])
          return yield* Effect.fail("the caller rolls its own transaction back")
        }).pipe(other.withTransaction)
      )
      assert.isTrue(Either.isLeft(outer))
      // The caller's row is gone with its rollback; the ledger's append committed in the ledger's own transaction.
      assert.deepStrictEqual(yield* other.unsafe("SELECT count(*) AS n FROM t"), [{ n: 0 }])
      const raw = yield* rawConnection(ws)
      assert.deepStrictEqual(raw.prepare("SELECT count(*) AS n FROM events WHERE run_id = ?").get("run-nested"), { n: 2 })
      // The ledger's connection is not left inside a transaction: the next append (and a reader) see it all.
      yield* store.append(rid("run-nested"), [a.user("after")])
      assert.strictEqual((yield* store.readRun(rid("run-nested"))).length, 3)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("every statement an append runs is an indexed lookup or a VALUES insert, never a table scan", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const store = yield* openStore(ws)
      const raw = yield* rawConnection(ws)
      const plans = new Map<string, Array<string>>()
      // The store runs its append statements synchronously on better-sqlite3 statements (not through the SQL
      // client's compiler), so capture them where they run: every statement of the store's connection is explained.
      const proto = Object.getPrototypeOf(raw.prepare("SELECT 1")) as Record<"run" | "all", (...args: Array<unknown>) => unknown>
      const originals = { run: proto.run, all: proto.all }
      let capturing = false
      const explain = (source: string, params: Array<unknown>) => {
        if (!capturing || /^(BEGIN|COMMIT|ROLLBACK|SAVEPOINT)/.test(source)) return
        const plan = raw.prepare(`EXPLAIN QUERY PLAN ${source}`).all(...params) as Array<{ detail: string }>
        plans.set(source, plan.map((p) => p.detail))
      }
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          for (const method of ["run", "all"] as const) {
            const original = originals[method]
            proto[method] = function(this: { readonly source: string; readonly database: unknown }, ...params: Array<unknown>) {
              if (this.database !== raw) explain(this.source, params)
              return original.apply(this, params)
            }
          }
        }),
        () => Effect.sync(() => Object.assign(proto, originals))
      )
      const capture = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        Effect.acquireUseRelease(Effect.sync(() => (capturing = true)), () => effect, () => Effect.sync(() => (capturing = false)))
      // The checker itself can fail: a lookup by an unindexed column is a SCAN.
      yield* store.append(rid("warm"), [EventBuilder.make("warm").opened()])
      const scan = raw.prepare("EXPLAIN QUERY PLAN SELECT * FROM events WHERE digest = ?").all("x") as Array<{ detail: string }>
      assert.isNotEmpty(scanLines(scan.map((p) => p.detail)))

      const a = EventBuilder.make("run-plan")
      const b = EventBuilder.make("run-plan-2")
      yield* Effect.all([
        store.append(rid("run-plan"), [a.opened(), a.user("u"), a.call("c1", "Bash", { x: 1 })]),
        store.append(rid("run-plan"), [a.response("c1", "Bash", "ok"), a.call("c2", "Read", {})]),
        store.appendBatch([
          { runId: rid("run-plan"), events: [a.response("c2", "Read", 1)] },
          { runId: rid("run-plan-2"), events: [b.opened(), b.user("v")] }
        ]),
        store.appendBatch(
          [{ runId: rid("run-plan"), events: [a.call("c3", "Bash", {}), a.dispatched("c3", "Bash", {})] }],
          { mode: "restore" }
        ),
        Effect.either(store.append(rid("run-plan"), [a.custom(a.user("dup").body, { id: "run-plan:1" })]))
      ]).pipe(capture)
      assert.strictEqual((yield* store.readRun(rid("run-plan"))).length, 8)

      const all = [...plans.entries()]
      for (const [sql, plan] of all) assert.deepStrictEqual(scanLines(plan), [], `${sql}\n${plan.join("\n")}`)
      const searches = all.flatMap(([, plan]) => plan).filter((line) => line.startsWith("SEARCH"))
      for (const expected of [/^SEARCH runs .*\(run_id=\?\)/, /^SEARCH runs .*\(invocation_id=\?\)/, /^SEARCH events .*\(event_id=\?\)/, /^SEARCH calls .*\(run_id=\? AND call_id=\?\)/, /^SEARCH events .*\(run_id=\? AND seq=\?\)/]) {
        assert.isTrue(searches.some((line) => expected.test(line)), `no statement did ${expected}: ${searches.join(" | ")}`)
      }
      assert.isTrue(all.some(([sql]) => sql.startsWith("INSERT INTO events")))
      assert.isTrue(all.some(([sql]) => sql.startsWith("INSERT INTO calls")))
    }).pipe(Effect.provide(NodeContext.layer)))
})
