// `import`'s one pass into a SQLite folder that does not exist yet (docs/stores.md): the same ledger as the two passes;
// a file refused late (near its end) leaves nothing behind in a fresh target and an existing target untouched, on
// SQLite and PostgreSQL; a real SIGKILL inside the one pass leaves a state the next command reports and imports over.
import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import * as Option from "effect/Option"
import { canonicalText } from "../src/Domain/RuntimeEvent.js"
import { draftPattern, importFreshSqlite } from "../src/Workspace/ImportSqliteOnePass.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { pgUrl } from "./support/pg.js"
import { BIN, expectCode, jsonOf, runProcess, ROOT, describeRun } from "./support/cliProcess.js"

// The real executable, told where the test PostgreSQL server is.
const cli = (...args: ReadonlyArray<string>) => runProcess(BIN, args, { env: { RUNTIME_RESUME_PG_URL: Redacted.value(pgUrl()) } })

const Live = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.provide(effect, NodeContext.layer)

// Bare events of `runs` runs of `perRun` events each (about 600 bytes a line): several pieces of 2,000 events and
// several 1 MiB chunks of the file, so a refusal near the end comes after rows were written in the one transaction.
const bareLines = (prefix: string, runs: number, perRun: number): string => {
  const lines: Array<string> = []
  for (let r = 0; r < runs; r++) {
    const b = EventBuilder.make(`${prefix}-${r}`, r)
    const events = [b.opened(), ...Array.from({ length: perRun - 2 }, (_, k) => b.model(`${k} `.padEnd(560, "x"))), b.terminated("completed")]
    for (const e of events) lines.push(Either.getOrThrow(canonicalText(e)))
  }
  return lines.join("\n") + "\n"
}

// A store-format export (version 2: marker, rows, trailer) of `runs` runs, made by the CLI.
const exportOf = (dir: string, prefix: string, runs: number, perRun: number) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    yield* fs.writeFileString(`${dir}/${prefix}-bare.jsonl`, bareLines(prefix, runs, perRun))
    expectCode(yield* cli("import", "--json", "--store", "sqlite", `${dir}/${prefix}-src`, `${dir}/${prefix}-bare.jsonl`), 0)
    expectCode(yield* cli("export", "--store", "sqlite", `${dir}/${prefix}-src`, `${dir}/${prefix}.jsonl`), 0)
    return (yield* fs.readFileString(`${dir}/${prefix}.jsonl`)).split("\n").slice(0, -1)
  })

// The late refusals: each a file built from the export's lines, and the line the refusal must name (1-based).
const lateRefusals = (lines: ReadonlyArray<string>) => {
  const n = lines.length // the marker, the rows, the trailer
  const rowAt = n - 3 // a row near the end (0-based)
  return [
    {
      name: "a bad row near the end",
      text: [...lines.slice(0, rowAt), lines[rowAt]!.replace("\"_tag\":\"ModelText\"", "\"_tag\":\"ModelTexx\""), ...lines.slice(rowAt + 1)].join("\n") + "\n",
      line: rowAt + 1
    },
    {
      name: "a tampered digest near the end",
      text: [...lines.slice(0, rowAt), lines[rowAt]!.replace(/"digest":"sha256:(.)/, (_, c: string) => `"digest":"sha256:${c === "0" ? "1" : "0"}`), ...lines.slice(rowAt + 1)].join("\n") + "\n",
      line: rowAt + 1
    },
    {
      name: "a torn last line",
      text: [...lines.slice(0, n - 2), lines[n - 2]!.slice(0, 100)].join("\n"),
      line: n - 1
    },
    {
      name: "a wrong high-water (the trailer's row count)",
      text: [...lines.slice(0, n - 1), lines[n - 1]!.replace(/"rows":(\d+)/, (_, k: string) => `"rows":${Number(k) + 1}`)].join("\n") + "\n",
      line: n
    },
    {
      name: "trailing garbage",
      text: lines.join("\n") + "\nnot json at all\n",
      line: n + 1
    }
  ]
}

describe("import's one pass into a new SQLite folder (docs/stores.md)", () => {
  it.scopedLive("writes the ledger the two passes write (export byte for byte), bare events and store-format lines", () =>
    Live(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-onepass-" })
      const lines = yield* exportOf(dir, "same", 3, 2_500)
      for (const file of [`${dir}/same.jsonl`, `${dir}/same-bare.jsonl`]) {
        // A new folder takes the one pass; an existing empty one the two passes.
        const one = yield* cli("import", "--json", "--store", "sqlite", `${dir}/one`, file)
        yield* fs.makeDirectory(`${dir}/two`)
        const two = yield* cli("import", "--json", "--store", "sqlite", `${dir}/two`, file)
        expectCode(one, 0)
        expectCode(two, 0)
        assert.deepStrictEqual(jsonOf(one).runs, jsonOf(two).runs)
        assert.strictEqual(jsonOf(one).added, lines.length - 2)
        expectCode(yield* cli("verify", `${dir}/one`), 0)
        expectCode(yield* cli("export", `${dir}/one`, `${dir}/one.jsonl`), 0)
        expectCode(yield* cli("export", `${dir}/two`, `${dir}/two.jsonl`), 0)
        assert.strictEqual(yield* fs.readFileString(`${dir}/one.jsonl`), yield* fs.readFileString(`${dir}/same.jsonl`))
        assert.strictEqual(yield* fs.readFileString(`${dir}/two.jsonl`), yield* fs.readFileString(`${dir}/same.jsonl`))
        for (const name of ["one", "two", "one.jsonl", "two.jsonl"]) yield* fs.remove(`${dir}/${name}`, { recursive: true })
      }
    })), 300_000)

  it.scopedLive("a file refused late leaves nothing in a fresh target and an existing target untouched (SQLite)", () =>
    Live(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-onepass-late-" })
      const lines = yield* exportOf(dir, "late", 2, 3_000)
      // An existing target: another run, committed.
      yield* fs.writeFileString(`${dir}/other.jsonl`, bareLines("other", 1, 5))
      expectCode(yield* cli("import", "--store", "sqlite", `${dir}/existing`, `${dir}/other.jsonl`), 0)
      expectCode(yield* cli("export", `${dir}/existing`, `${dir}/existing-before.jsonl`), 0)
      const before = yield* fs.readFileString(`${dir}/existing-before.jsonl`)
      for (const [i, refusal] of lateRefusals(lines).entries()) {
        yield* fs.writeFileString(`${dir}/bad-${i}.jsonl`, refusal.text)
        const fresh = yield* cli("import", "--json", "--store", "sqlite", `${dir}/fresh-${i}`, `${dir}/bad-${i}.jsonl`)
        expectCode(fresh, 2)
        assert.strictEqual(jsonOf(fresh).error._tag, "ImportInvalid", `${refusal.name}: ${describeRun(fresh)}`)
        assert.strictEqual(jsonOf(fresh).error.line, refusal.line, `${refusal.name}: ${describeRun(fresh)}`)
        assert.isFalse(yield* fs.exists(`${dir}/fresh-${i}`), `${refusal.name}: the fresh target was left behind`)

        const existing = yield* cli("import", "--json", "--store", "sqlite", `${dir}/existing`, `${dir}/bad-${i}.jsonl`)
        expectCode(existing, 2)
        assert.deepStrictEqual(jsonOf(existing).error, jsonOf(fresh).error, refusal.name)
        expectCode(yield* cli("export", `${dir}/existing`, `${dir}/existing-after.jsonl`), 0)
        assert.strictEqual(yield* fs.readFileString(`${dir}/existing-after.jsonl`), before, refusal.name)
        yield* fs.remove(`${dir}/existing-after.jsonl`)
      }
      // An id used twice, near the end of a file of bare events (no digest to break): the one pass keeps no ids, the
      // store's insert finds it; the refusal is the two passes' own.
      const bare = (yield* fs.readFileString(`${dir}/late-bare.jsonl`)).split("\n").slice(0, -1)
      const firstId = JSON.parse(bare[1]!).id as string
      const at = bare.length - 3
      const twice = [...bare.slice(0, at), bare[at]!.replace(`"id":"${JSON.parse(bare[at]!).id}"`, `"id":"${firstId}"`), ...bare.slice(at + 1)]
      yield* fs.writeFileString(`${dir}/twice.jsonl`, twice.join("\n") + "\n")
      const dup = yield* cli("import", "--json", "--store", "sqlite", `${dir}/fresh-twice`, `${dir}/twice.jsonl`)
      expectCode(dup, 2)
      assert.strictEqual(jsonOf(dup).error.reason, "duplicate_event_id", describeRun(dup))
      assert.strictEqual(jsonOf(dup).error.line, at + 1, describeRun(dup))
      assert.isFalse(yield* fs.exists(`${dir}/fresh-twice`))
    })), 300_000)

  it.scopedLive("a file refused late leaves nothing in a fresh target and an existing target untouched (PostgreSQL)", () =>
    Live(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-onepass-pg-" })
      const lines = yield* exportOf(dir, "pglate", 2, 3_000)
      const tag = Math.random().toString(36).slice(2, 8)
      yield* fs.writeFileString(`${dir}/other.jsonl`, bareLines("other", 1, 5))
      const existing = `onepass_existing_${tag}`
      expectCode(yield* cli("import", "--store", "postgres", existing, `${dir}/other.jsonl`), 0)
      expectCode(yield* cli("export", "--store", "postgres", existing, `${dir}/existing-before.jsonl`), 0)
      const before = yield* fs.readFileString(`${dir}/existing-before.jsonl`)
      for (const [i, refusal] of lateRefusals(lines).entries()) {
        yield* fs.writeFileString(`${dir}/bad-${i}.jsonl`, refusal.text)
        const ws = `onepass_fresh_${tag}_${i}`
        const fresh = yield* cli("import", "--json", "--store", "postgres", ws, `${dir}/bad-${i}.jsonl`)
        expectCode(fresh, 2)
        assert.strictEqual(jsonOf(fresh).error._tag, "ImportInvalid", `${refusal.name}: ${describeRun(fresh)}`)
        assert.strictEqual(jsonOf(fresh).error.line, refusal.line, `${refusal.name}: ${describeRun(fresh)}`)
        // Nothing behind: the workspace is not found.
        const verify = yield* cli("verify", "--json", "--store", "postgres", ws)
        expectCode(verify, 2)
        assert.strictEqual(jsonOf(verify).error._tag, "WorkspaceNotFound", `${refusal.name}: ${describeRun(verify)}`)

        const into = yield* cli("import", "--json", "--store", "postgres", existing, `${dir}/bad-${i}.jsonl`)
        expectCode(into, 2)
        assert.deepStrictEqual(jsonOf(into).error, jsonOf(fresh).error, refusal.name)
        expectCode(yield* cli("export", "--store", "postgres", existing, `${dir}/existing-after.jsonl`), 0)
        assert.strictEqual(yield* fs.readFileString(`${dir}/existing-after.jsonl`), before, refusal.name)
        yield* fs.remove(`${dir}/existing-after.jsonl`)
      }
    })), 300_000)
})

// A child that imports FILE into WORKSPACE (SQLite) through the one pass, its read of FILE paused for good after two
// chunks (rows of the first chunks already written in the open transaction): it prints PAUSED, then waits.
const pausedChild = `
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { layerStore } from "./src/Layers/NodeRuntimeEventStore.ts"
import * as NodeWorkspaceLock from "./src/Layers/NodeWorkspaceLock.ts"
import { importInOnePass } from "./src/Programs/ImportOnePass.ts"
import { importFreshSqlite } from "./src/Workspace/ImportSqliteOnePass.ts"
const [workspace, file] = process.argv.slice(1)
const hooked = Layer.effect(FileSystem.FileSystem, Effect.map(FileSystem.FileSystem, (fs) => ({
  ...fs,
  stream: (path, options) => path !== file ? fs.stream(path, options) : fs.stream(path, options).pipe(
    Stream.take(3),
    Stream.concat(Stream.fromEffect(Effect.sync(() => process.stdout.write("PAUSED\\n"))).pipe(Stream.drain)),
    Stream.concat(Stream.never)
  )
}))).pipe(Layer.provide(NodeFileSystem.layer))
const write = (draft) => importInOnePass(file).pipe(
  Effect.provide(layerStore("sqlite", { workspace: draft, readOnly: false, importing: true })),
  Effect.scoped
)
await Effect.runPromise(importFreshSqlite(workspace, write).pipe(Effect.provide(Layer.mergeAll(hooked, NodeWorkspaceLock.layerNode))))
process.stdout.write("DONE\\n")
`

const killWhenPaused = (script: string, ...args: ReadonlyArray<string>) =>
  Effect.scoped(Effect.gen(function*() {
    const proc = yield* Command.make(process.execPath, "--import", "tsx", "--input-type=module", "-e", script, ...args)
      .pipe(Command.workingDirectory(ROOT), Command.start)
    const lines: Array<string> = []
    yield* proc.stdout.pipe(Stream.decodeText(), Stream.splitLines, Stream.runForEach((l) => Effect.sync(() => lines.push(l))), Effect.forkScoped)
    yield* proc.stderr.pipe(Stream.decodeText(), Stream.runForEach((t) => Effect.sync(() => lines.push(t))), Effect.forkScoped)
    while (!lines.includes("PAUSED") && !lines.includes("DONE") && (yield* proc.isRunning)) yield* Effect.sleep("5 millis")
    yield* proc.kill("SIGKILL").pipe(Effect.ignore)
    return lines
  }))

describe("a one-pass import killed midway (docs/stores.md)", () => {
  it.scopedLive("a real SIGKILL inside the one pass leaves no workspace, only its draft; the same import again removes it and completes", () =>
    Live(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-onepass-kill-" })
      yield* exportOf(dir, "kill", 2, 4_000)
      const ws = `${dir}/ws`
      const printed = yield* killWhenPaused(pausedChild, ws, `${dir}/kill.jsonl`)
      assert.include(printed, "PAUSED", printed.join("\n"))
      // Nothing of the file is visible: no workspace, only the killed import's draft folder beside it.
      assert.isFalse(yield* fs.exists(ws))
      const drafts = (yield* fs.readDirectory(dir)).filter((name) => draftPattern("ws").test(name))
      assert.strictEqual(drafts.length, 1, (yield* fs.readDirectory(dir)).join(","))
      const verify = yield* cli("verify", "--json", ws)
      expectCode(verify, 2)
      assert.strictEqual(jsonOf(verify).error._tag, "WorkspaceNotFound", describeRun(verify))
      // It names the draft and the command that clears it, which is typed next.
      assert.include(jsonOf(verify).error.message, drafts[0]!, describeRun(verify))
      assert.include(jsonOf(verify).error.message, `runtime-resume import ${ws} FILE`, describeRun(verify))
      // The next command a person types: the same import, which completes.
      const again = yield* cli("import", "--json", "--store", "sqlite", ws, `${dir}/kill.jsonl`)
      expectCode(again, 0)
      assert.strictEqual(jsonOf(again).added, 8_000)
      assert.deepStrictEqual((yield* fs.readDirectory(dir)).filter((name) => draftPattern("ws").test(name)), [], "the dead draft is removed")
      expectCode(yield* cli("export", ws, `${dir}/again.jsonl`), 0)
      assert.strictEqual(yield* fs.readFileString(`${dir}/again.jsonl`), yield* fs.readFileString(`${dir}/kill.jsonl`))
    })), 300_000)
})

describe("the one pass's draft folder (src/Workspace/ImportSqliteOnePass.ts)", () => {
  it.scopedLive("a workspace that appears while the pass runs is never touched: the draft is dropped, None", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-onepass-race-" })
      const ws = `${dir}/ws`
      const result = { added: 1, skipped: 0, file: "f", runs: [] } as never
      // Another process (a host) creates the workspace and writes into it while the one pass writes its draft.
      const raced = yield* importFreshSqlite(ws, (draft) =>
        Effect.gen(function*() {
          yield* fs.makeDirectory(draft)
          yield* fs.writeFileString(`${draft}/runtime.sqlite`, "the draft")
          yield* fs.makeDirectory(ws)
          yield* fs.writeFileString(`${ws}/runtime.sqlite`, "a host's rows")
          return result
        }))
      assert.isTrue(Option.isNone(raced))
      assert.strictEqual(yield* fs.readFileString(`${ws}/runtime.sqlite`), "a host's rows")
      assert.deepStrictEqual((yield* fs.readDirectory(dir)).sort(), ["ws"], "the draft is removed, nothing else")
      // A pass that fails leaves nothing at all; one that succeeds is renamed into place.
      const failed = yield* importFreshSqlite(`${dir}/other`, (draft) =>
        Effect.zipRight(fs.makeDirectory(draft), Effect.fail("refused")))
      assert.isTrue(Option.isNone(failed))
      assert.deepStrictEqual((yield* fs.readDirectory(dir)).sort(), ["ws"])
      const done = yield* importFreshSqlite(`${dir}/other`, (draft) =>
        Effect.as(Effect.zipRight(fs.makeDirectory(draft), fs.writeFileString(`${draft}/runtime.sqlite`, "ledger")), result))
      assert.isTrue(Option.isSome(done))
      assert.strictEqual(yield* fs.readFileString(`${dir}/other/runtime.sqlite`), "ledger")
      assert.deepStrictEqual((yield* fs.readDirectory(dir)).sort(), ["other", "ws"])
      // Missing parents are created for the draft, and removed with it when the pass fails.
      const nested = yield* importFreshSqlite(`${dir}/a/b/ws`, (draft) =>
        Effect.zipRight(fs.makeDirectory(draft), Effect.fail("refused")))
      assert.isTrue(Option.isNone(nested))
      assert.deepStrictEqual((yield* fs.readDirectory(dir)).sort(), ["other", "ws"])
      const kept = yield* importFreshSqlite(`${dir}/a/b/ws`, (draft) =>
        Effect.as(Effect.zipRight(fs.makeDirectory(draft), fs.writeFileString(`${draft}/runtime.sqlite`, "ledger")), result))
      assert.isTrue(Option.isSome(kept))
      assert.deepStrictEqual(yield* fs.readDirectory(`${dir}/a/b`), ["ws"])
      assert.isFalse(draftPattern("ws").test(".ws2.import-1-0123456789abcdef.partial"))
      assert.isTrue(draftPattern("ws").test(".ws.import-1-0123456789abcdef.partial"))
    }).pipe(Effect.provide(NodeContext.layer)))
})
