// Generated damage (docs/reliability.md, File hygiene, "readers that fail open"): every SQLite table × {a row deleted, a column edited, rows
// swapped}, every page overwritten, the header's user_version, and JSONL corruption classes; verify, inspect, export and
// the facade must all refuse each one (none calls it clean). Also: canaries in event fields never reach an error.
import * as FileSystem from "@effect/platform/FileSystem"
import * as Command from "@effect/platform/Command"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import Sqlite from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as fc from "effect/FastCheck"
import * as NodePath from "node:path"
import { fileURLToPath } from "node:url"
import { RecoveryResolver, RuntimeEventStore as Facade } from "runtime-resume/promise"
import * as CanonicalJson from "../src/Domain/CanonicalJson.js"
import { RunId } from "../src/Domain/Ids.js"
import type { RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import { canonicalText, jsonlLine } from "../src/Domain/RuntimeEvent.js"
import * as NodeLedgerFileSystem from "../src/Layers/NodeLedgerFileSystem.js"
import { layerStore, layerWorkspace } from "../src/Layers/NodeRuntimeEventStore.js"
import type { PersistentStore } from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as NodeWorkspaceOwner from "../src/Layers/NodeWorkspaceOwner.js"
import { FORMAT_VERSION } from "../src/Layers/internal/sqliteConnection.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { exportToFile } from "../src/Programs/ExportLedger.js"
import { importLedger } from "../src/Programs/ImportLedger.js"
import { inspectionExitCode, inspectWorkspace } from "../src/Programs/InspectWorkspace.js"
import { repairWorkspace } from "../src/Workspace/RepairWorkspace.js"
import { verificationOk, verifyWorkspace } from "../src/Programs/VerifyWorkspace.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import * as Gen from "./support/fuzzGenerators.js"

const BIN = fileURLToPath(new URL("../bin/runtime-resume", import.meta.url))
const ROOT = fileURLToPath(new URL("..", import.meta.url))
const SEED = 20261202

const platform = Layer.mergeAll(NodeLedgerFileSystem.layer, NodeWorkspaceLock.layerNode)
const owner = NodeWorkspaceOwner.layer.pipe(Layer.provide(NodeWorkspaceLock.layerNode), Layer.provide(NodeLedgerFileSystem.layer))

// A small deterministic PRNG for picking rows, columns and bytes.
const rng = (seed: number) => {
  let x = seed >>> 0 || 1
  return (n: number) => {
    x ^= x << 13
    x >>>= 0
    x ^= x >>> 17
    x ^= x << 5
    x >>>= 0
    return x % n
  }
}

// Three runs, interleaved: one with a dispatched and answered call (projection rows), one blocked, one safe.
const ledgerEvents = (text: (what: string) => string = (w) => w): ReadonlyArray<ReadonlyArray<RuntimeEvent>> => {
  const a = EventBuilder.make("run-a", 5)
  const b = EventBuilder.make("run-b", 6)
  const c = EventBuilder.make("run-c", 7)
  return [
    [a.opened("t1_after_preflight_v1"), b.opened(), a.user(text("prompt")), c.opened(), a.call("c1", "Bash", { command: text("args") })],
    [
      a.dispatched("c1", "Bash", { command: text("args") }, "read_only"),
      b.user(text("deploy")),
      a.response("c1", "Bash", { stdout: text("result") }, { operationBound: true }),
      c.user(text("hello")),
      b.call("d1", "Deploy", { env: text("env") }),
      a.model(text("done")),
      c.model(text("reply")),
      a.terminated("completed")
    ]
  ]
}

const seed = (store: PersistentStore, workspace: string, groups = ledgerEvents()) =>
  Effect.gen(function*() {
    const ledger = yield* RuntimeEventStore
    for (const group of groups) {
      const byRun = new Map<string, Array<RuntimeEvent>>()
      for (const e of group) byRun.set(e.runId, [...(byRun.get(e.runId) ?? []), e])
      yield* ledger.appendBatch([...byRun].map(([runId, evs]) => ({ runId: RunId.make(runId), events: evs })), { mode: "restore" })
    }
  }).pipe(Effect.provide(layerStore(store, { workspace, readOnly: false })), Effect.provide(platform), Effect.scoped, Effect.orDie)

/** What each reader said: whether it called the ledger clean, and every message it produced. */
interface Verdicts {
  readonly verify: boolean
  readonly inspect: boolean
  readonly export: boolean
  readonly facade: boolean
  readonly messages: ReadonlyArray<string>
}

const readOnly = (workspace: string) => Layer.provide(layerWorkspace({ workspace, readOnly: true }), platform)

// The four readers, in-process, as the CLI runs them: clean means exit 0 with a clean report.
const readAll = (workspace: string, scratch: string) =>
  Effect.gen(function*() {
    const messages: Array<string> = []
    const note = (exit: Exit.Exit<unknown, unknown>) => {
      messages.push(JSON.stringify(exit))
    }
    const verified = yield* Effect.exit(verifyWorkspace().pipe(Effect.provide(readOnly(workspace))))
    note(verified)
    const inspected = yield* Effect.exit(inspectWorkspace().pipe(Effect.provide(readOnly(workspace))))
    note(inspected)
    const file = NodePath.join(scratch, `export-${Math.random().toString(36).slice(2)}.jsonl`)
    const exported = yield* Effect.exit(exportToFile(file).pipe(Effect.provide(readOnly(workspace)), Effect.provide(platform)))
    note(exported)
    const word = yield* Effect.promise(() =>
      Facade.open(workspace).then((h) => new RecoveryResolver(h).computeResumePlan()).then(
        (w) => ({ ok: true as const, word: w }),
        (e: unknown) => ({ ok: false as const, error: JSON.stringify(e) })
      )
    )
    messages.push(JSON.stringify(word))
    const verdicts: Verdicts = {
      verify: Exit.isSuccess(verified) && verificationOk(verified.value),
      inspect: Exit.isSuccess(inspected) && inspectionExitCode(inspected.value) < 2,
      export: Exit.isSuccess(exported),
      facade: word.ok && word.word !== "corruption" && word.word !== "indeterminate",
      messages
    }
    return verdicts
  })

const assertAllRefuse = (what: string, v: Verdicts) => {
  const clean = (["verify", "inspect", "export", "facade"] as const).filter((k) => v[k])
  assert.deepStrictEqual(clean, [], `${what}: these readers called a damaged ledger clean: ${clean.join(", ")}\n${v.messages.join("\n").slice(0, 3000)}`)
}

// ---- SQLite damage -------------------------------------------------------------------------------------------

// The tool projections (tool_operations, tool_operation_journal) are views over calls and events since format 4:
// damaging those tables is damaging them.
const TABLES = ["events", "runs", "calls"] as const
const KEYS: Record<(typeof TABLES)[number], ReadonlyArray<string>> = {
  events: ["pos"],
  runs: ["run_id"],
  calls: ["run_id", "call_id"]
}
// Columns that must hold unique values (a temporary value keeps a swap within the constraints).
const UNIQUE = new Set(["events.event_id", "runs.invocation_id"])

type Row = Record<string, unknown>

interface SqliteDamage {
  readonly name: string
  readonly apply: (db: Sqlite.Database) => void
}

const where = (table: string) => KEYS[table as keyof typeof KEYS].map((k) => `${k} = ?`).join(" AND ")
const keyValues = (table: string, row: Row) => KEYS[table as keyof typeof KEYS].map((k) => row[k])

// Another value of the same kind, different from `value`, that still fits the column's type.
const edited = (value: unknown, pick: (n: number) => number): unknown => {
  if (typeof value === "number") return value + 100 + pick(3)
  if (typeof value === "string") return value.length > 0 ? value.slice(0, -1) + (value.endsWith("x") ? "y" : "x") : "x"
  if (value instanceof Uint8Array) {
    const copy = Buffer.from(value)
    copy[pick(copy.length)] ^= 0x01
    return copy
  }
  return value === null ? 1 : null
}

// Every table × {each row deleted, each column edited in a row, two rows swapped}; each page overwritten; the header.
const sqliteDamages = (db: Sqlite.Database, pages: number): Array<SqliteDamage> => {
  const pick = rng(SEED)
  const out: Array<SqliteDamage> = []
  for (const table of TABLES) {
    const rows = db.prepare(`SELECT * FROM ${table}`).all() as Array<Row>
    assert.isAbove(rows.length, 0, `the seeded ledger has rows in ${table}`)
    for (const [i, row] of rows.entries()) {
      out.push({ name: `${table}: row ${i} deleted`, apply: (d) => void d.prepare(`DELETE FROM ${table} WHERE ${where(table)}`).run(...keyValues(table, row)) })
    }
    for (const column of Object.keys(rows[0]!)) {
      // The commit position of a later row moved before its run's first row (moved elsewhere among other runs' rows
      // it changes only the interleaving of runs, which no reader can or need tell).
      const later = rows.filter((r) => r.seq !== 1)
      const row = table === "events" && column === "pos" ? later[pick(later.length)]! : rows[pick(rows.length)]!
      const value = table === "events" && column === "pos" ? -1 - pick(100) : edited(row[column], pick)
      out.push({
        name: `${table}: column ${column} edited`,
        apply: (d) => void d.prepare(`UPDATE ${table} SET ${column} = ? WHERE ${where(table)}`).run(value, ...keyValues(table, row))
      })
    }
    // Two rows whose non-key columns differ, swapped (for events, their commit positions within one run).
    const pairs: Array<[Row, Row]> = []
    for (let i = 0; i < rows.length; i++) {
      for (let j = i + 1; j < rows.length; j++) {
        if (table === "events" && rows[i]!.run_id !== rows[j]!.run_id) continue
        pairs.push([rows[i]!, rows[j]!])
      }
    }
    if (pairs.length > 0) {
      const [r1, r2] = pairs[pick(pairs.length)]!
      out.push({
        name: `${table}: two rows swapped`,
        apply: (d) => {
          const columns = Object.keys(r1).filter((c) => !KEYS[table].includes(c))
          const set = columns.map((c) => `${c} = ?`).join(", ")
          d.transaction(() => {
            if (table === "events") {
              d.prepare("UPDATE events SET pos = -1 WHERE pos = ?").run(r1.pos)
              d.prepare("UPDATE events SET pos = ? WHERE pos = ?").run(r1.pos, r2.pos)
              d.prepare("UPDATE events SET pos = ? WHERE pos = -1").run(r2.pos)
              return
            }
            for (const c of columns) if (UNIQUE.has(`${table}.${c}`)) d.prepare(`UPDATE ${table} SET ${c} = '__swap__' WHERE ${where(table)}`).run(...keyValues(table, r2))
            d.prepare(`UPDATE ${table} SET ${set} WHERE ${where(table)}`).run(...columns.map((c) => r2[c]), ...keyValues(table, r1))
            d.prepare(`UPDATE ${table} SET ${set} WHERE ${where(table)}`).run(...columns.map((c) => r1[c]), ...keyValues(table, r2))
          })()
        }
      })
    }
  }
  for (const version of [0, 1, FORMAT_VERSION + 1, -1, 99]) {
    out.push({ name: `header: user_version ${version}`, apply: (d) => void d.pragma(`user_version = ${version}`) })
  }
  for (let page = 1; page <= pages; page++) {
    out.push({ name: `page ${page} of ${pages} overwritten`, apply: () => undefined })
  }
  return out
}

const PAGE = 4096

// Closes the WAL into the main file, so every page is in runtime.sqlite.
const checkpoint = (file: string) => {
  const db = new Sqlite(file)
  db.pragma("wal_checkpoint(TRUNCATE)")
  db.close()
}

describe("damaged ledgers: every reader refuses (generated)", () => {
  it.scopedLive("SQLite: every table × {row deleted, column edited, rows swapped}, every page, the header", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const scratch = yield* fs.makeTempDirectoryScoped({ prefix: "rr-damage-" })
      const pristine = NodePath.join(scratch, "pristine")
      yield* seed("sqlite", pristine)
      const pristineFile = NodePath.join(pristine, "runtime.sqlite")
      checkpoint(pristineFile)
      // The undamaged ledger reads clean everywhere: the readers are not refusing everything.
      const clean = yield* readAll(pristine, scratch)
      assert.isTrue(clean.verify && clean.inspect && clean.export && clean.facade, clean.messages.join("\n"))
      const bytes = yield* fs.readFile(pristineFile)
      const pages = bytes.length / PAGE
      const probe = new Sqlite(pristineFile, { readonly: true })
      const damages = sqliteDamages(probe, pages)
      probe.close()
      const pick = rng(SEED + 1)
      let n = 0
      for (const damage of damages) {
        const ws = NodePath.join(scratch, `case-${n++}`)
        yield* fs.makeDirectory(ws)
        const file = NodePath.join(ws, "runtime.sqlite")
        const page = /^page (\d+)/.exec(damage.name)
        if (page !== null) {
          const copy = Buffer.from(bytes)
          const at = (Number(page[1]) - 1) * PAGE
          for (let i = 0; i < PAGE; i++) copy[at + i] = pick(256)
          yield* fs.writeFile(file, copy)
        } else {
          yield* fs.writeFile(file, bytes)
          const db = new Sqlite(file)
          // An adversary's editor enforces no foreign key (better-sqlite3 turns them on by default).
          db.pragma("foreign_keys = OFF")
          db.pragma("ignore_check_constraints = ON")
          damage.apply(db)
          db.pragma("wal_checkpoint(TRUNCATE)")
          db.close()
        }
        assertAllRefuse(`sqlite ${damage.name}`, yield* readAll(ws, scratch))
      }
      // The size of the generated SQLite suite (reported by the test's own output).
      console.log(`DamagedLedger: ${damages.length} SQLite damage cases`)
      assert.isAbove(damages.length, 60)
    }).pipe(Effect.provide(NodeContext.layer)), 240_000)

  it.scopedLive("JSONL: whole-file unreadable content, every corruption reason of 01, random mutations", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const scratch = yield* fs.makeTempDirectoryScoped({ prefix: "rr-damage-jsonl-" })
      const random = rng(SEED + 2)
      const noise = Buffer.from(Array.from({ length: 300 }, () => random(256)))
      const cases: Array<{ name: string; bytes: Uint8Array }> = [
        { name: "not json", bytes: Buffer.from("not json\n") },
        { name: "a JSON object that is no row", bytes: Buffer.from("{\"a\":1}\n") },
        { name: "a partial line", bytes: Buffer.from("{\"dig") },
        { name: "random bytes", bytes: noise },
        { name: "random bytes and a newline", bytes: Buffer.concat([noise, Buffer.from("\n")]) },
        { name: "an empty line", bytes: Buffer.from("\n") },
        { name: "NULs", bytes: Buffer.alloc(4096) },
        { name: "a JSON array", bytes: Buffer.from("[1,2]\n") }
      ]
      for (const reason of Gen.REASONS) {
        const samples = fc.sample(fc.gen().map(Gen.reasonLedger(reason)), { numRuns: 2, seed: SEED + reason.length })
        samples.forEach((c, i) => cases.push({ name: `${reason} #${i} (${c.variant})`, bytes: c.built.bytes }))
      }
      for (const [i, c] of fc.sample(fc.gen().map(Gen.mutatedLedger), { numRuns: 12, seed: SEED }).entries()) {
        cases.push({ name: `mutation #${i} (${c.mutation})`, bytes: c.bytes })
      }
      let n = 0
      let judged = 0
      for (const c of cases) {
        const ws = NodePath.join(scratch, `case-${n++}`)
        yield* fs.makeDirectory(ws)
        yield* fs.writeFile(NodePath.join(ws, "runtime-events.jsonl"), c.bytes)
        const v = yield* readAll(ws, scratch)
        // A random mutation may leave a valid ledger (a byte flipped back, a line still canonical): then all agree clean.
        if (c.name.startsWith("mutation") && v.verify && v.inspect && v.export && v.facade) continue
        judged++
        assertAllRefuse(`jsonl ${c.name}`, v)
      }
      console.log(`DamagedLedger: ${cases.length} JSONL cases (${judged} damaged)`)
      assert.isAbove(judged, 40)
    }).pipe(Effect.provide(NodeContext.layer)), 240_000)

  it.scopedLive("the real CLI: verify, inspect and export exit 2 on a header, a lost runs row, a wrong call-index row and an unreadable JSONL file", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const scratch = yield* fs.makeTempDirectoryScoped({ prefix: "rr-damage-cli-" })
      const damaged: Array<[string, string]> = []
      for (const [name, sql] of [
        ["user_version 0", "PRAGMA user_version = 0"],
        ["runs row deleted", "DELETE FROM runs WHERE run_id = 'run-b'"],
        ["call index row edited", "UPDATE calls SET response_seq = NULL WHERE call_id = 'c1'"]
      ] as const) {
        const ws = NodePath.join(scratch, name.replace(/ /g, "-"))
        yield* seed("sqlite", ws)
        const db = new Sqlite(NodePath.join(ws, "runtime.sqlite"))
        db.pragma("foreign_keys = OFF")
        db.exec(sql)
        db.close()
        damaged.push([name, ws])
      }
      const jsonl = NodePath.join(scratch, "not-json")
      yield* fs.makeDirectory(jsonl)
      yield* fs.writeFileString(NodePath.join(jsonl, "runtime-events.jsonl"), "not json\n")
      damaged.push(["not json", jsonl])
      const cli = (...args: ReadonlyArray<string>) =>
        Effect.scoped(Effect.gen(function*() {
          const proc = yield* Command.make(BIN, ...args).pipe(Command.workingDirectory(ROOT), Command.start)
          const text = (s: typeof proc.stdout) => s.pipe(Stream.decodeText(), Stream.mkString)
          const [stdout, stderr, code] = yield* Effect.all([text(proc.stdout), text(proc.stderr), proc.exitCode], { concurrency: "unbounded" })
          return { code: Number(code), stdout, stderr }
        }))
      // One verb per damage (each CLI start costs seconds; the in-process suites above cover every verb on each).
      const verbs = ["verify", "inspect", "export", "verify"] as const
      yield* Effect.forEach(damaged, ([name, ws], i) =>
        Effect.gen(function*() {
          const verb = verbs[i]!
          if (verb === "export") {
            const out = NodePath.join(scratch, `${name.replace(/ /g, "-")}.backup.jsonl`)
            const r = yield* cli("export", ws, out)
            assert.strictEqual(r.code, 2, `export on ${name}: ${r.stderr}`)
            assert.isFalse(yield* fs.exists(out), `export on ${name} left no backup`)
            return
          }
          const r = yield* cli(verb, "--json", ws)
          assert.strictEqual(r.code, 2, `${verb} on ${name}: ${r.stdout} ${r.stderr}`)
          const doc = JSON.parse(r.stdout)
          assert.isTrue(doc.error !== undefined || doc.runs.some((run: { ok?: boolean; error?: unknown }) => run.ok === false || run.error !== undefined), `${verb} on ${name}: ${r.stdout}`)
        }), { concurrency: 2 })
    }).pipe(Effect.provide(NodeContext.layer)), 120_000)
})

// ---- canaries ----------------------------------------------------------------------------------------------

describe("canaries: no value from an event reaches an error message", () => {
  it.scopedLive("import of a bad event; verify, inspect, repair and export of a stored bad event, on both stores", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const scratch = yield* fs.makeTempDirectoryScoped({ prefix: "rr-canary-" })
      const tag = Math.random().toString(36).slice(2, 10)
      const canary = (what: string) => `CANARY-${what}-${tag}`
      const outputs: Array<string> = []
      const captured = (exit: Exit.Exit<unknown, unknown>) => outputs.push(JSON.stringify(exit), String(Exit.isFailure(exit) ? exit.cause : ""))

      // Every content field of a valid ledger holds a canary; then one event's text is made a non-string holding one.
      const groups = ledgerEvents(canary)
      const all = groups.flat()
      const bad = (value: unknown) => {
        const event = JSON.parse(canonicalText(all[2]!).pipe((e) => (e._tag === "Right" ? e.right : ""))) as { body: { text: unknown } }
        event.body.text = value
        return event
      }
      const badValues: ReadonlyArray<unknown> = [[canary("array")], { x: canary("object") }, 7, null, true]

      // Import of a bad event (bare events), into each store.
      for (const store of ["sqlite", "jsonl"] as const) {
        for (const value of badValues) {
          const file = NodePath.join(scratch, `import-${store}-${outputs.length}.jsonl`)
          const lines = all.map((e, i) => i === 2 ? `${JSON.stringify(bad(value))}\n` : `${canonicalText(e).pipe((t) => t._tag === "Right" ? t.right : "")}\n`)
          yield* fs.writeFileString(file, lines.join(""))
          const ws = NodePath.join(scratch, `ws-import-${store}-${outputs.length}`)
          captured(yield* Effect.exit(importLedger(file).pipe(Effect.provide(layerStore(store, { workspace: ws, readOnly: false })), Effect.provide(platform), Effect.scoped)))
        }
      }

      // A stored bad event: canonical bytes, a well-formed digest, a text that is not a string.
      for (const value of badValues) {
        const jsonlWs = NodePath.join(scratch, `ws-jsonl-${outputs.length}`)
        yield* seed("jsonl", jsonlWs, groups)
        const ledgerFile = NodePath.join(jsonlWs, "runtime-events.jsonl")
        const lines = (yield* fs.readFileString(ledgerFile)).split("\n")
        const rowAt = lines.findIndex((l) => l.includes(`"id":"${all[2]!.id}"`))
        const row = JSON.parse(lines[rowAt]!) as { seq: number; end: number; digest: string }
        const encoded = CanonicalJson.encodeParsed(bad(value))
        assert.strictEqual(encoded._tag, "Ok")
        lines[rowAt] = jsonlLine(row.seq, row.end, row.digest, encoded._tag === "Ok" ? encoded.text : "").slice(0, -1)
        yield* fs.writeFileString(ledgerFile, lines.join("\n"))

        const sqliteWs = NodePath.join(scratch, `ws-sqlite-${outputs.length}`)
        yield* seed("sqlite", sqliteWs, groups)
        const db = new Sqlite(NodePath.join(sqliteWs, "runtime.sqlite"))
        db.prepare("UPDATE events SET bytes = ? WHERE event_id = ?").run(Buffer.from(encoded._tag === "Ok" ? encoded.text : ""), all[2]!.id)
        db.close()

        for (const ws of [jsonlWs, sqliteWs]) {
          const v = yield* readAll(ws, scratch)
          assertAllRefuse(`stored non-string text in ${ws}`, v)
          outputs.push(...v.messages)
          captured(yield* Effect.exit(repairWorkspace({ workspace: ws }).pipe(Effect.provide(owner), Effect.provide(platform))))
        }
      }

      // A few real CLI runs: every verb's stdout and stderr.
      const last = outputs.length
      const ws = NodePath.join(scratch, `ws-cli`)
      yield* seed("sqlite", ws, groups)
      const db = new Sqlite(NodePath.join(ws, "runtime.sqlite"))
      const encoded = CanonicalJson.encodeParsed(bad([canary("cli")]))
      db.prepare("UPDATE events SET bytes = ? WHERE event_id = ?").run(Buffer.from(encoded._tag === "Ok" ? encoded.text : ""), all[2]!.id)
      db.close()
      for (const args of [["verify", ws], ["inspect", "--json", ws], ["export", ws]]) {
        const r = yield* Effect.scoped(Effect.gen(function*() {
          const proc = yield* Command.make(BIN, ...args).pipe(Command.workingDirectory(ROOT), Command.start)
          const text = (s: typeof proc.stdout) => s.pipe(Stream.decodeText(), Stream.mkString)
          const [stdout, stderr, code] = yield* Effect.all([text(proc.stdout), text(proc.stderr), proc.exitCode], { concurrency: "unbounded" })
          return { code: Number(code), stdout, stderr }
        }))
        assert.strictEqual(r.code, 2, `${args.join(" ")}: ${r.stdout} ${r.stderr}`)
        outputs.push(r.stdout, r.stderr)
      }
      assert.isAbove(outputs.length, last)

      const text = outputs.join("\n")
      assert.include(text, "schema_invalid", "the errors were produced")
      const leaked = [...new Set(text.match(/CANARY-[a-z]+-[0-9a-z]+/g) ?? [])]
      // Stored valid events' content (prompts, arguments, results) is in no error either.
      assert.deepStrictEqual(leaked, [], "no canary in any output")
    }).pipe(Effect.provide(NodeContext.layer)), 180_000)
})
