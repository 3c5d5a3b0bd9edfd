// The recovery section of a version 2 export (docs/wire-format.md, "Export file"): run headers and continuation claims
// written by `export`, restored by `import` on every store (memory, SQLite, JSONL, PostgreSQL) in the importing
// workspace's identity, and every file whose section does not match its events refused, typed, naming the line,
// with nothing written.
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer, Option, Stream } from "effect"
import { execFile } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { InvocationId, RunId, SessionId, TurnId } from "../src/Domain/Ids.js"
import { ContinuationClaim, RunHeader } from "../src/Domain/RunHeader.js"
import { ContinuationSource, ContinuationStarted, SourceHighWater } from "../src/Domain/RuntimeEvent.js"
import * as MemoryRunHeaderStore from "../src/Layers/MemoryRunHeaderStore.js"
import * as MemoryRuntimeEventStore from "../src/Layers/MemoryRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as PgWorkspace from "../src/Layers/PgWorkspace.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { exportText } from "../src/Programs/ExportLedger.js"
import { prepareImport } from "../src/Programs/ImportLedger.js"
import { importWithHeaders } from "../src/Programs/RestoreRunHeaders.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { layerWorkspaceStores } from "../src/Workspace/RepairWorkspace.js"
import { pgUrl } from "./support/pg.js"

const SOURCE_ID = "11111111-1111-4111-8111-111111111111"
const TARGET_ID = "22222222-2222-4222-8222-222222222222"

const header = (b: EventBuilder.EventBuilder, status: RunHeader["status"], extra: Partial<RunHeader> = {}) =>
  new RunHeader({
    runId: b.runId,
    sessionId: SessionId.make(b.ids.sessionId),
    invocationId: InvocationId.make(b.ids.invocationId),
    turnId: TurnId.make(b.ids.turnId),
    status,
    workspaceId: SOURCE_ID,
    createdAt: 10,
    updatedAt: 20,
    ...extra
  })

// A workspace with every kind of header: a completed source run; a continuation claimed on it and closed before its
// start committed (a header with no events); a continuation that superseded that claim; and an unmanaged run.
const populate = Effect.gen(function*() {
  const store = yield* RuntimeEventStore
  const headers = yield* RunHeaderStore
  const src = EventBuilder.make({ sessionId: "sess", invocationId: "inv-src", runId: "run-src", turnId: "turn-src" })
  yield* headers.create(header(src, "running"))
  const rows = yield* store.append(src.runId, [src.opened(), src.user("hi"), src.model("hello"), src.terminated("completed")])
  yield* headers.setStatus(src.runId, "completed", { at: 20 })
  const tail = rows[rows.length - 1]!
  const source = new ContinuationSource({
    sessionId: SessionId.make("sess"),
    invocationId: InvocationId.make("inv-src"),
    runId: src.runId,
    turnId: TurnId.make("turn-src"),
    highWater: new SourceHighWater({ seq: tail.seq, digest: tail.digest as SourceHighWater["digest"] })
  })
  const continuation = (name: string, claimId: string, supersedes?: string) => {
    const b = EventBuilder.make({ sessionId: "sess", invocationId: `inv-${name}`, runId: name, turnId: `turn-${name}` })
    const claim = new ContinuationClaim({
      claimId,
      sourceRunId: src.runId,
      sourceSeq: tail.seq,
      sourceDigest: tail.digest,
      continuationRunId: b.runId,
      ...(supersedes !== undefined ? { supersedes } : {}),
      createdAt: 30
    })
    return { b, claim, header: header(b, "created", { parentRunId: src.runId, continuationSource: source, claimId }) }
  }
  const c1 = continuation("run-c1", "claim-1")
  yield* headers.claim(c1.claim, c1.header)
  yield* headers.setStatus(c1.b.runId, "failed", { reason: "continuation_abandoned_before_provider_call", at: 40 })
  const c2 = continuation("run-c2", "claim-2", "claim-1")
  yield* headers.claim(c2.claim, c2.header)
  yield* store.append(c2.b.runId, [c2.b.custom(new ContinuationStarted({ toolBoundary: "none", source, claimId: "claim-2" })), c2.b.user("again")])
  yield* headers.setStatus(c2.b.runId, "running", { at: 50 })
  const free = EventBuilder.make("run-free")
  yield* store.append(free.runId, [free.opened(), free.user("no header")])
})

const exported = (onto: Layer.Layer<RuntimeEventStore | RunHeaderStore>) =>
  Stream.runCollect(exportText()).pipe(Effect.map((chunks) => [...chunks].join("")), Effect.provide(onto))

const memory = () => Layer.merge(MemoryRuntimeEventStore.layer, MemoryRunHeaderStore.layer)

// The source workspace's export, once.
const sourceText = Effect.gen(function*() {
  const stores = yield* Layer.build(memory())
  yield* Effect.provide(populate, stores)
  return yield* exported(Layer.succeedContext(stores))
})

type Kind = "memory" | "sqlite" | "jsonl" | "postgres"

const tmp = () => {
  const dir = mkdtempSync(join(tmpdir(), "rr-export-recovery-"))
  return dir
}

const targetLayer = (kind: Kind, dir: string): Layer.Layer<RuntimeEventStore | RunHeaderStore, unknown, FileSystem.FileSystem> =>
  kind === "memory"
    ? memory()
    : kind === "postgres"
    ? PgWorkspace.layer({ url: pgUrl(), workspace: `t_export_${Math.random().toString(36).slice(2, 10)}` })
    : layerWorkspaceStores(kind, { workspace: join(dir, "ws"), readOnly: false }).pipe(Layer.provide(NodeWorkspaceLock.layerNode))

const writeFile = (dir: string, name: string, text: string) => {
  const file = join(dir, name)
  writeFileSync(file, text)
  return file
}

const importInto = (file: string) =>
  Effect.flatMap(prepareImport(file), (prepared) => importWithHeaders(prepared, Effect.succeed(TARGET_ID)))

// The workspace's headers and claims as text, with the workspace identity they carry.
const headerState = Effect.gen(function*() {
  const headers = yield* RunHeaderStore
  const list = yield* headers.list()
  const claims = yield* headers.claims(RunId.make("run-src"))
  return {
    headers: list.map((h) => `${h.runId} ${h.status} ${h.statusReason ?? "-"} ${h.claimId ?? "-"} ${h.workspaceId}`).sort(),
    claims: claims.map((c) => `${c.claimId} ${c.continuationRunId} ${c.supersedes ?? "-"}`)
  }
})

const lines = (text: string) => text.trimEnd().split("\n")
// The lines with a trailer that counts them again (so a test reaches the checks after the trailer's).
const recount = (ls: ReadonlyArray<string>) => {
  const body = ls.filter((l) => !l.startsWith(`{"trailer"`))
  const count = (prefix: string) => body.filter((l) => l.startsWith(prefix)).length
  return [...body, `{"trailer":{"claims":${count(`{"continuationClaim"`)},"rows":${count(`{"digest"`)},"runHeaders":${count(`{"runHeader"`)}}}`].join("\n") + "\n"
}

describe("the recovery section of an export (docs/wire-format.md, Export file)", () => {
  it.scoped("export writes the marker, the rows, every header, the claims (first before superseding) and the trailer", () =>
    Effect.gen(function*() {
      const ls = lines(yield* sourceText)
      assert.strictEqual(ls[0], `{"format":"runtime-resume.export","version":2}`)
      assert.strictEqual(ls.filter((l) => l.startsWith(`{"digest"`)).length, 8)
      const headers = ls.filter((l) => l.startsWith(`{"runHeader"`)).map((l) => JSON.parse(l).runHeader.runId)
      assert.deepStrictEqual(headers, ["run-src", "run-c1", "run-c2"])
      const claims = ls.filter((l) => l.startsWith(`{"continuationClaim"`)).map((l) => JSON.parse(l).continuationClaim.claimId)
      assert.deepStrictEqual(claims, ["claim-1", "claim-2"])
      assert.strictEqual(ls[ls.length - 1], `{"trailer":{"claims":2,"rows":8,"runHeaders":3}}`)
    }))

  for (const kind of ["memory", "sqlite", "jsonl", "postgres"] as const) {
    it.scoped(`import restores every header and claim on ${kind}, in the importing workspace's identity; again, it skips them; re-exported, only the identity differs`, () =>
      Effect.gen(function*() {
        const dir = tmp()
        yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
        const text = yield* sourceText
        const file = writeFile(dir, "export.jsonl", text)
        const stores = yield* Layer.build(targetLayer(kind, dir))
        const first = yield* Effect.provide(importInto(file), stores)
        assert.deepStrictEqual([first.added, first.runHeaders, first.claims], [8, { restored: 3, skipped: 0 }, { restored: 2, skipped: 0 }])
        const state = yield* Effect.provide(headerState, stores)
        assert.deepStrictEqual(state, {
          headers: [
            `run-c1 failed continuation_abandoned_before_provider_call claim-1 ${TARGET_ID}`,
            `run-c2 running - claim-2 ${TARGET_ID}`,
            `run-src completed - - ${TARGET_ID}`
          ],
          claims: ["claim-1 run-c1 -", "claim-2 run-c2 claim-1"]
        })
        const again = yield* Effect.provide(importInto(file), stores)
        assert.deepStrictEqual([again.added, again.skipped, again.runHeaders, again.claims], [0, 8, { restored: 0, skipped: 3 }, { restored: 0, skipped: 2 }])
        // Each run was written in one append at the source, so its groups are the same: the same bytes, but for the identity.
        const back = yield* exported(Layer.succeedContext(stores))
        assert.strictEqual(back, text.replaceAll(SOURCE_ID, TARGET_ID))
      }).pipe(Effect.provide(NodeContext.layer)), { timeout: 120_000 })
  }

  // A file changed by `edit`, and the refusal its import must give: reason, line, and a message naming what is wrong.
  const refusals: ReadonlyArray<readonly [string, (ls: Array<string>) => string, string, number | undefined, RegExp]> = [
    ["a header record cut in the middle (a torn copy)", (ls) => ls.slice(0, 10).join("\n") + "\n" + ls[10]!.slice(0, 40), "invalid_json", 11, /not one JSON value/],
    ["the trailer missing (cut at a line's end)", (ls) => ls.slice(0, -1).join("\n") + "\n", "export_truncated", undefined, /no trailer/],
    ["a header line lost", (ls) => ls.filter((_, i) => i !== 10).join("\n") + "\n", "export_truncated", 14, /lines were lost/],
    ["a malformed header (status paused)", (ls) => recount(ls.map((l) => l.replace(`"status":"running"`, `"status":"paused"`))), "header_invalid", 12, /not a run header record/],
    ["a header of a run the file holds no event of", (ls) => recount([...ls.slice(0, 12), ls[9]!.replaceAll("run-src", "run-ghost"), ...ls.slice(12)]), "header_invalid", 13, /run-ghost.*unknown run/],
    ["a header naming another session than its events", (ls) => recount(ls.map((l, i) => i === 9 ? l.replace(`"sessionId":"sess"`, `"sessionId":"other"`) : l)), "header_invalid", 10, /sessionId other/],
    ["a terminal header on a run with no RunTerminated", (ls) => recount(ls.map((l, i) => i === 11 ? l.replace(`"status":"running"`, `"status":"completed"`) : l)), "header_invalid", 12, /no RunTerminated/],
    ["a claim naming a source run with no events", (ls) => recount(ls.map((l, i) => i === 12 ? l.replace(`"sourceRunId":"run-src"`, `"sourceRunId":"run-nowhere"`) : l)), "claim_invalid", 13, /run-nowhere/],
    ["a claim naming a continuation with no header", (ls) => recount([...ls.slice(0, 14), ls[13]!.replace(`"claimId":"claim-2"`, `"claimId":"claim-3"`).replace(`"continuationRunId":"run-c2"`, `"continuationRunId":"run-c9"`)]), "claim_invalid", 15, /run-c9/],
    ["a header twice", (ls) => recount([...ls.slice(0, 12), ls[9]!, ...ls.slice(12)]), "duplicate_header", 13, /first is at line 10/],
    ["a claim twice", (ls) => recount([...ls.slice(0, 14), ls[13]!]), "duplicate_claim", 15, /first is at line 14/],
    ["a header whose claim the file does not hold", (ls) => recount(ls.filter((_, i) => i !== 13)), "header_invalid", 12, /names claim claim-2, which the file does not hold/],
    ["an event line after the headers", (ls) => recount([...ls.slice(0, 10), ls[1]!.replace("run-src:1", "run-src:x"), ...ls.slice(10)]), "record_invalid", 11, /after the run header records/],
    ["a newer version", (ls) => [ls[0]!.replace(`"version":2`, `"version":3`), ...ls.slice(1)].join("\n") + "\n", "version_unsupported", 1, /version 3 export/]
  ]

  for (const [what, edit, reason, line, message] of refusals) {
    it.scoped(`refused, nothing written: ${what} (${reason})`, () =>
      Effect.gen(function*() {
        const dir = tmp()
        yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
        const file = writeFile(dir, "bad.jsonl", edit(lines(yield* sourceText)))
        const stores = yield* Layer.build(memory())
        const result = yield* Effect.either(Effect.provide(importInto(file), stores))
        assert.isTrue(Either.isLeft(result), `imported: ${readFileSync(file, "utf8")}`)
        const error = (result as Either.Left<any, unknown>).left
        assert.strictEqual(error._tag, "ImportInvalid", String(error))
        assert.strictEqual(error.reason, reason, error.message)
        assert.strictEqual(error.line, line, error.message)
        assert.match(error.message, message)
        assert.include(error.message, "nothing was imported")
        assert.deepStrictEqual(yield* Effect.provide(Effect.flatMap(RuntimeEventStore, (s) => s.listRuns()), stores), [])
        assert.deepStrictEqual((yield* Effect.provide(headerState, stores)).headers, [])
      }).pipe(Effect.provide(NodeContext.layer)))
  }

  it.scoped("a header the workspace holds differently is header_conflict, before any event is written", () =>
    Effect.gen(function*() {
      const dir = tmp()
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const file = writeFile(dir, "export.jsonl", yield* sourceText)
      const stores = yield* Layer.build(memory())
      const src = EventBuilder.make({ sessionId: "sess", invocationId: "inv-src", runId: "run-src", turnId: "turn-src" })
      yield* Effect.provide(Effect.flatMap(RunHeaderStore, (h) => h.create(header(src, "running", { createdAt: 99 }))), stores)
      const result = yield* Effect.either(Effect.provide(importInto(file), stores))
      const error = Either.getLeft(result).pipe(Option.getOrThrow) as any
      assert.deepStrictEqual([error._tag, error.reason, error.line, error.runId], ["ImportInvalid", "header_conflict", 10, "run-src"])
      assert.deepStrictEqual(yield* Effect.provide(Effect.flatMap(RuntimeEventStore, (s) => s.listRuns()), stores), [])
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a version 1 file (rows only, no marker) still imports: its runs stay unmanaged", () =>
    Effect.gen(function*() {
      const dir = tmp()
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const rows = lines(yield* sourceText).filter((l) => l.startsWith(`{"digest"`))
      const file = writeFile(dir, "v1.jsonl", rows.join("\n") + "\n")
      const stores = yield* Layer.build(memory())
      const result = yield* Effect.provide(importInto(file), stores)
      assert.deepStrictEqual([result.added, result.runHeaders.restored], [8, 0])
      assert.deepStrictEqual((yield* Effect.provide(headerState, stores)).headers, [])
    }).pipe(Effect.provide(NodeContext.layer)))
})

// Through the real executable: a refused file into a folder that does not exist leaves no folder, no ledger, no header.
const BIN = fileURLToPath(new URL("../bin/runtime-resume", import.meta.url))
describe("import through the CLI", () => {
  it.scoped("a refused export creates nothing (exit 2, ImportInvalid naming the line)", () =>
    Effect.gen(function*() {
      const dir = tmp()
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const ls = lines(yield* sourceText)
      const file = writeFile(dir, "bad.jsonl", recount([...ls.slice(0, 12), ls[9]!.replaceAll("run-src", "run-ghost"), ...ls.slice(12)]))
      for (const store of ["sqlite", "jsonl"]) {
        const ws = join(dir, `ws-${store}`)
        const ran = yield* Effect.async<{ code: number; stdout: string }>((resume) => {
          execFile(process.execPath, [BIN, "import", "--json", "--store", store, ws, file], (error, stdout) =>
            resume(Effect.succeed({ code: error === null ? 0 : Number(error.code), stdout })))
        })
        assert.strictEqual(ran.code, 2, ran.stdout)
        const doc = JSON.parse(ran.stdout)
        assert.deepStrictEqual([doc.error._tag, doc.error.reason, doc.error.line, doc.error.runId], ["ImportInvalid", "header_invalid", 13, "run-ghost"])
        assert.isFalse(existsSync(ws), `${ws} was created`)
      }
    }), { timeout: 60_000 })
})
