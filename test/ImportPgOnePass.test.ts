// `import`'s one pass into a PostgreSQL workspace that does not exist yet (docs/stores.md "PostgreSQL"): the ledger the
// two passes write, byte for byte; a file refused late leaves no schema and no table; an existing workspace takes the
// two passes; a host opening the same new workspace meanwhile waits for the import and finds its ledger; a real
// SIGKILL mid-import leaves nothing (the transaction never commits), and readers say so. On the real test server.
import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import type pg from "pg"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import type { RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import { canonicalText } from "../src/Domain/RuntimeEvent.js"
import { PgRuntimeEventStore } from "../src/Postgres.js"
import { importFreshPg } from "../src/Workspace/ImportPgOnePass.js"
import { pgUrl, rawClient } from "./support/pg.js"
import { BIN, expectCode, jsonOf, runProcess, ROOT, describeRun } from "./support/cliProcess.js"

// The real executable, told where the test PostgreSQL server is.
const cli = (...args: ReadonlyArray<string>) => runProcess(BIN, args, { env: { RUNTIME_RESUME_PG_URL: Redacted.value(pgUrl()) } })

const Live = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.provide(effect, NodeContext.layer)
const freshName = (tag: string) => `${tag}_${Math.random().toString(36).slice(2, 10)}`
const textOf = (e: RuntimeEvent) => Either.getOrThrow(canonicalText(e))

// A tool run of `n` calls (most answered, some left unanswered; no dispatch: store-format lines holding recovery facts
// take the two passes, as into SQLite), each line padded to about 600 bytes; then a chat run. With n = 2,400 the tool run spans several pieces
// of 2,000 events and 1 MiB chunks and is not the file's last (its rows are written before its end is known).
const runsOf = (prefix: string, n: number): string => {
  const t = EventBuilder.make(`${prefix}-tool`, 7)
  const pad = "x".repeat(480)
  const events: Array<RuntimeEvent> = [t.opened("t1_after_preflight_v1"), t.user("go")]
  for (let i = 0; i < n; i++) {
    const callId = `call_${((i * 7_919) % 10_007).toString(36)}_${i}`
    const args = { path: `/f/${i}`, n: i, pad }
    events.push(t.call(callId, "Write", args))
    if (i % 7 !== 3) events.push(t.response(callId, "Write", `ok ${i}`))
  }
  events.push(t.model("done"), t.terminated("completed"))
  const c = EventBuilder.make(`${prefix}-chat`, 8)
  const chat = [c.opened(), c.user("hi"), c.model("hello"), c.terminated("completed")]
  return [...events, ...chat].map((e) => `${textOf(e)}\n`).join("")
}

// A bare-event file and its store-format export (version 2), made by the CLI through SQLite.
const filesOf = (dir: string, prefix: string, n: number) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    yield* fs.writeFileString(`${dir}/${prefix}-bare.jsonl`, runsOf(prefix, n))
    expectCode(yield* cli("import", "--json", "--store", "sqlite", `${dir}/${prefix}-src`, `${dir}/${prefix}-bare.jsonl`), 0)
    expectCode(yield* cli("export", "--store", "sqlite", `${dir}/${prefix}-src`, `${dir}/${prefix}.jsonl`), 0)
    return { bare: `${dir}/${prefix}-bare.jsonl`, rows: `${dir}/${prefix}.jsonl` }
  })

const schemaExists = (client: pg.Client, workspace: string) =>
  Effect.promise(() => client.query("SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = $1", [`rr_${workspace}`])).pipe(
    Effect.map((r) => r.rows[0].n === 1)
  )

// Creates an empty workspace (a host's first open).
const createEmpty = (workspace: string) => Effect.scoped(PgRuntimeEventStore.make({ url: pgUrl(), workspace }))

describe("import's one pass into a new PostgreSQL workspace (docs/stores.md)", () => {
  it.scopedLive("writes the ledger the two passes write (export byte for byte, verify clean), store-format lines and bare events", () =>
    Live(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const client = yield* rawClient
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-pg-onepass-" })
      const files = yield* filesOf(dir, "same", 2_400)
      for (const file of [files.rows, files.bare]) {
        const one = freshName("onepass")
        const two = freshName("twopass")
        const once = yield* importFreshPg(Redacted.value(pgUrl()), one, file)
        assert.isTrue(Option.isSome(once), `${file}: the one pass took the file`)
        // An existing (empty) workspace: the two passes.
        yield* createEmpty(two)
        assert.isTrue(Option.isNone(yield* importFreshPg(Redacted.value(pgUrl()), two, file)), "an existing workspace takes the two passes")
        const viaCli = yield* cli("import", "--json", "--store", "postgres", two, file)
        expectCode(viaCli, 0)
        assert.deepStrictEqual(Option.getOrThrow(once).runs, jsonOf(viaCli).runs)
        expectCode(yield* cli("verify", "--store", "postgres", one), 0)
        // The events stay append-only (the one pass creates their trigger last).
        const changed = yield* Effect.either(Effect.tryPromise(() => client.query(`UPDATE "rr_${one}".events SET end_seq = end_seq`)))
        assert.isTrue(Either.isLeft(changed) && String(changed.left.error).includes("never changed"), String(changed))
        expectCode(yield* cli("export", "--store", "postgres", one, `${dir}/one.jsonl`), 0)
        expectCode(yield* cli("export", "--store", "postgres", two, `${dir}/two.jsonl`), 0)
        assert.strictEqual(yield* fs.readFileString(`${dir}/one.jsonl`), yield* fs.readFileString(`${dir}/two.jsonl`), file)
        assert.strictEqual(yield* fs.readFileString(`${dir}/one.jsonl`), yield* fs.readFileString(files.rows), file)
        yield* fs.remove(`${dir}/one.jsonl`)
        yield* fs.remove(`${dir}/two.jsonl`)
      }
    })), 300_000)

  it.scopedLive("a file refused late leaves no schema and no table; an existing workspace with runs takes the two passes", () =>
    Live(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const client = yield* rawClient
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-pg-onepass-late-" })
      const files = yield* filesOf(dir, "late", 2_400)
      const lines = (yield* fs.readFileString(files.rows)).split("\n").slice(0, -1)
      const bare = (yield* fs.readFileString(files.bare)).split("\n").slice(0, -1)
      const n = lines.length
      const at = n - 3
      const firstId = JSON.parse(bare[1]!).id as string
      const bad = [
        ["a tampered digest near the end", [...lines.slice(0, at), lines[at]!.replace(/"digest":"sha256:(.)/, (_, c: string) => `"digest":"sha256:${c === "0" ? "1" : "0"}`), ...lines.slice(at + 1)].join("\n") + "\n", at + 1],
        ["a torn last line", [...lines.slice(0, n - 2), lines[n - 2]!.slice(0, 100)].join("\n"), n - 1],
        ["trailing garbage", lines.join("\n") + "\nnot json at all\n", n + 1],
        // No digest to break: an id used twice is found by the unique index, inside the COPY.
        ["an id used twice near the end", [...bare.slice(0, bare.length - 3), bare[bare.length - 3]!.replace(`"id":"${JSON.parse(bare[bare.length - 3]!).id}"`, `"id":"${firstId}"`), ...bare.slice(bare.length - 2)].join("\n") + "\n", bare.length - 2]
      ] as const
      for (const [i, [name, text, line]] of bad.entries()) {
        yield* fs.writeFileString(`${dir}/bad-${i}.jsonl`, text)
        const ws = freshName("late")
        assert.isTrue(Option.isNone(yield* importFreshPg(Redacted.value(pgUrl()), ws, `${dir}/bad-${i}.jsonl`)), name)
        assert.isFalse(yield* schemaExists(client, ws), `${name}: the one pass left its schema behind`)
        const refused = yield* cli("import", "--json", "--store", "postgres", ws, `${dir}/bad-${i}.jsonl`)
        expectCode(refused, 2)
        assert.strictEqual(jsonOf(refused).error.line, line, `${name}: ${describeRun(refused)}`)
        assert.isFalse(yield* schemaExists(client, ws), `${name}: the refused import left a schema behind`)
      }
      // A workspace holding runs: never the one pass; the two passes add the file beside them.
      const existing = freshName("existing")
      yield* fs.writeFileString(`${dir}/other.jsonl`, runsOf("other", 3))
      expectCode(yield* cli("import", "--store", "postgres", existing, `${dir}/other.jsonl`), 0)
      assert.isTrue(Option.isNone(yield* importFreshPg(Redacted.value(pgUrl()), existing, files.rows)))
      const added = yield* cli("import", "--json", "--store", "postgres", existing, files.rows)
      expectCode(added, 0)
      assert.strictEqual(jsonOf(added).added, n - 2)
      expectCode(yield* cli("verify", "--store", "postgres", existing), 0)
    })), 300_000)

  it.scopedLive("a host opening the same new workspace meanwhile waits for the import's COMMIT, then finds its ledger", () =>
    Live(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const client = yield* rawClient
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-pg-onepass-host-" })
      const files = yield* filesOf(dir, "host", 2_400)
      const ws = freshName("hostrace")
      // The import's read of the file stops after two chunks (rows already written in its open transaction) until
      // `go` is completed.
      const paused = yield* Deferred.make<void>()
      const go = yield* Deferred.make<void>()
      const hooked = Layer.effect(FileSystem.FileSystem, Effect.map(FileSystem.FileSystem, (real) => ({
        ...real,
        stream: (path: string, options?: FileSystem.StreamOptions) =>
          path !== files.rows ? real.stream(path, options) : real.stream(path, options).pipe(
            Stream.take(2),
            Stream.concat(Stream.fromEffect(Effect.zipRight(Deferred.succeed(paused, undefined), Deferred.await(go))).pipe(Stream.drain)),
            Stream.concat(Stream.suspend(() => real.stream(path, { ...options, offset: FileSystem.Size(2 * 1024 * 1024) })))
          )
      }))).pipe(Layer.provide(NodeFileSystem.layer))
      const importing = yield* importFreshPg(Redacted.value(pgUrl()), ws, files.rows).pipe(Effect.provide(hooked), Effect.fork)
      yield* Deferred.await(paused)
      assert.isFalse(yield* schemaExists(client, ws), "nothing is visible before COMMIT")
      // A reader meanwhile: the workspace does not exist.
      const reader = yield* cli("verify", "--json", "--store", "postgres", ws)
      expectCode(reader, 2)
      assert.strictEqual(jsonOf(reader).error._tag, "WorkspaceNotFound", describeRun(reader))
      // A host opens the same new workspace: it waits on a lock (the import's creation lock) ...
      const host = yield* Effect.scoped(Effect.flatMap(PgRuntimeEventStore.make({ url: pgUrl(), workspace: ws }), (store) => store.listRuns())).pipe(Effect.fork)
      for (;;) {
        const waiting = yield* Effect.promise(() =>
          client.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND application_name = 'runtime-resume'")
        )
        if (waiting.rows[0].n > 0) break
        yield* Effect.sleep("20 millis")
      }
      // ... and once the import commits, it finds the imported runs (never a failed CREATE over the import's schema).
      yield* Deferred.succeed(go, undefined)
      const imported = yield* Fiber.join(importing)
      assert.isTrue(Option.isSome(imported), "the one pass took the file")
      const runs = yield* Fiber.join(host)
      assert.deepStrictEqual([...runs].sort(), ["host-chat", "host-tool"])
      expectCode(yield* cli("export", "--store", "postgres", ws, `${dir}/out.jsonl`), 0)
      assert.strictEqual(yield* fs.readFileString(`${dir}/out.jsonl`), yield* fs.readFileString(files.rows))
    })), 300_000)
})

// A child that imports FILE into the PostgreSQL workspace WS through the one pass, its read of FILE paused for good
// after two chunks (rows of the first chunks already written in the open transaction): it prints PAUSED, then waits.
const pausedChild = `
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { importFreshPg } from "./src/Workspace/ImportPgOnePass.ts"
const [url, workspace, file] = process.argv.slice(1)
const hooked = Layer.effect(FileSystem.FileSystem, Effect.map(FileSystem.FileSystem, (fs) => ({
  ...fs,
  stream: (path, options) => path !== file ? fs.stream(path, options) : fs.stream(path, options).pipe(
    Stream.take(2),
    Stream.concat(Stream.fromEffect(Effect.sync(() => process.stdout.write("PAUSED\\n"))).pipe(Stream.drain)),
    Stream.concat(Stream.never)
  )
}))).pipe(Layer.provide(NodeFileSystem.layer))
await Effect.runPromise(importFreshPg(url, workspace, file).pipe(Effect.provide(hooked)))
process.stdout.write("DONE\\n")
`

describe("a one-pass PostgreSQL import killed midway (docs/stores.md)", () => {
  it.scopedLive("a real SIGKILL mid-import leaves no schema; readers meanwhile and after say the workspace does not exist; the same import then completes", () =>
    Live(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const client = yield* rawClient
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-pg-onepass-kill-" })
      const files = yield* filesOf(dir, "kill", 2_400)
      const ws = freshName("killed")
      const printed = yield* Effect.scoped(Effect.gen(function*() {
        const proc = yield* Command.make(process.execPath, "--import", "tsx", "--input-type=module", "-e", pausedChild, Redacted.value(pgUrl()), ws, files.rows)
          .pipe(Command.workingDirectory(ROOT), Command.start)
        const lines: Array<string> = []
        yield* proc.stdout.pipe(Stream.decodeText(), Stream.splitLines, Stream.runForEach((l) => Effect.sync(() => lines.push(l))), Effect.forkScoped)
        yield* proc.stderr.pipe(Stream.decodeText(), Stream.runForEach((t) => Effect.sync(() => lines.push(t))), Effect.forkScoped)
        while (!lines.includes("PAUSED") && !lines.includes("DONE") && (yield* proc.isRunning)) yield* Effect.sleep("5 millis")
        // Mid-import: the transaction holds rows, yet a reader sees no workspace.
        const meanwhile = yield* cli("verify", "--json", "--store", "postgres", ws)
        lines.push(`meanwhile: ${meanwhile.code} ${meanwhile.stdout}`)
        yield* proc.kill("SIGKILL").pipe(Effect.ignore)
        return lines
      }))
      assert.include(printed, "PAUSED", printed.join("\n"))
      const meanwhile = printed.find((l) => l.startsWith("meanwhile: "))!
      assert.match(meanwhile, /^meanwhile: 2 /, meanwhile)
      assert.include(meanwhile, "WorkspaceNotFound")
      // After the kill: the server rolls the transaction back; nothing of the file, not even the schema.
      assert.isFalse(yield* schemaExists(client, ws))
      const verify = yield* cli("verify", "--json", "--store", "postgres", ws)
      expectCode(verify, 2)
      assert.strictEqual(jsonOf(verify).error._tag, "WorkspaceNotFound", describeRun(verify))
      assert.include(jsonOf(verify).error.message, "runtime-resume import --store postgres", describeRun(verify))
      // The next command: the same import, which completes.
      const again = yield* cli("import", "--json", "--store", "postgres", ws, files.rows)
      expectCode(again, 0)
      expectCode(yield* cli("export", "--store", "postgres", ws, `${dir}/again.jsonl`), 0)
      assert.strictEqual(yield* fs.readFileString(`${dir}/again.jsonl`), yield* fs.readFileString(files.rows))
    })), 300_000)
})
