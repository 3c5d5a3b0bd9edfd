// Tests of the built-in file-write tool (docs/spec/05-reconciliation.md): preflight path rules, evidence, the write through ToolRuntime on
// memory and SQLite, the temp file and mode, every observation and diverged cause, observe_failed, and real SIGKILLs.
import * as Command from "@effect/platform/Command"
import * as PlatformError from "@effect/platform/Error"
import { FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Either, Layer, Option, Stream } from "effect"
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import { join, resolve } from "node:path"
import { FILE_WRITE_EVIDENCE_TOOL, tempFileName } from "../src/Domain/FileWriteEvidence.js"
import { deriveOperationId } from "../src/Domain/Ids.js"
import type { FunctionResponse, ToolDispatched } from "../src/Domain/RuntimeEvent.js"
import * as MemoryRuntimeEventStore from "../src/Layers/MemoryRuntimeEventStore.js"
import * as NodeNoFollowFileSystem from "../src/Layers/NodeNoFollowFileSystem.js"
import * as SqliteRuntimeEventStore from "../src/Layers/SqliteRuntimeEventStore.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as FileWriteTool from "../src/Programs/FileWriteTool.js"
import * as RecoveryResolver from "../src/Domain/Rules/RecoveryResolver.js"
import * as ToolRuntime from "../src/Programs/ToolRuntime.js"
import * as Failpoints from "../src/Services/Failpoints.js"
import { NoFollowFileSystem } from "../src/Services/NoFollowFileSystem.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { storeLayer } from "../harness/Child.js"
import { CHILD_PATH, CHILD_RUN } from "../harness/FileWriteChild.js"

const sha = (text: string | Uint8Array) => "sha256:" + createHash("sha256").update(text).digest("hex")
const files = Layer.merge(NodeContext.layer, NodeNoFollowFileSystem.layer)

// A workspace with a `root` folder inside it (and room for things outside the root).
const workspace = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-fw-" })
  const root = join(ws, "root")
  yield* fs.makeDirectory(join(root, "sub"), { recursive: true })
  return { fs, ws, root, realRoot: yield* fs.realPath(root) }
})

// Runs one write_file call through ToolRuntime in a fresh run of the current store.
const runWrite = (root: string, args: unknown, name = "run-fw", callId = "c1") =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const b = EventBuilder.make(name, 1000)
    yield* store.append(b.runId, [b.opened("t1_after_preflight_v1"), b.user("write")])
    const outcome = yield* ToolRuntime.run(b.runId, b.call(callId, "write_file", args), { tools: [FileWriteTool.fileWriteTool({ root })] })
    const rows = yield* store.readRun(b.runId)
    const dispatch = rows.find((r) => r.event.body._tag === "ToolDispatched")?.event.body as ToolDispatched | undefined
    return { outcome, rows, dispatch, operationId: deriveOperationId(`inv-${name}`, callId), b }
  })

const refusalOf = (root: string, args: unknown) =>
  Effect.gen(function*() {
    const { dispatch, outcome } = yield* runWrite(root, args)
    assert.isUndefined(dispatch, "nothing was dispatched")
    assert.strictEqual(outcome._tag, "Refused")
    return outcome._tag === "Refused" ? { reason: outcome.reason, message: (outcome.response.body as FunctionResponse).result as any } : undefined
  }).pipe(Effect.provide(MemoryRuntimeEventStore.layer))

const evidence = (realRoot: string, path: string, before: string | null, after: string) => ({
  tool: FILE_WRITE_EVIDENCE_TOOL,
  root: realRoot,
  path,
  before,
  after
})

describe("fileWriteTool preflight", () => {
  it.scoped("refuses every path the rules forbid with invalid_args, dispatching nothing and creating nothing", () =>
    Effect.gen(function*() {
      const { fs, root, ws } = yield* workspace
      yield* fs.makeDirectory(join(ws, "outside"))
      yield* fs.symlink(join(ws, "outside"), join(root, "out"))
      yield* fs.writeFileString(join(ws, "outside", "t.txt"), "x")
      yield* fs.symlink(join(ws, "outside", "t.txt"), join(root, "link.txt"))
      yield* fs.makeDirectory(join(root, "folder"))
      execFileSync("mkfifo", [join(root, "pipe")])
      const cases: ReadonlyArray<[string, unknown, string]> = [
        ["absolute", { path: join(root, "a.txt"), content: "x" }, "must be relative"],
        ["empty", { path: "", content: "x" }, "Expected a string at least 1 character"],
        ["trailing slash", { path: "sub/", content: "x" }, "last component"],
        ["dot", { path: "sub/.", content: "x" }, "last component"],
        ["dot dot", { path: "sub/..", content: "x" }, "last component"],
        ["missing folder", { path: "new/deeper/a.txt", content: "x" }, "does not exist (folders are not created)"],
        ["parent outside", { path: "../a.txt", content: "x" }, "outside the root"],
        ["folder link outside", { path: "out/a.txt", content: "x" }, "outside the root"],
        ["target link", { path: "link.txt", content: "x" }, "a symbolic link"],
        ["target folder", { path: "folder", content: "x" }, "a folder"],
        ["target fifo", { path: "pipe", content: "x" }, "a pipe"],
        ["parent a file", { path: "sub/f.txt/a", content: "x" }, "path"],
        ["nul", { path: "a\u0000.txt", content: "x" }, "NUL"],
        ["lone surrogate", { path: "a.txt", content: "bad \ud800 half" }, "lone surrogate"],
        ["lone surrogate in path", { path: "a\udc00.txt", content: "x" }, "lone surrogate"]
      ]
      yield* fs.writeFileString(join(root, "sub", "f.txt"), "file")
      for (const [what, args, text] of cases) {
        const refusal = yield* refusalOf(root, args)
        assert.strictEqual(refusal?.reason, "invalid_args", what)
        assert.include(refusal?.message.message, text, what)
      }
      assert.isFalse(yield* fs.exists(join(root, "new")), "missing folders are never created")
      assert.isFalse(yield* fs.exists(join(ws, "a.txt")))
      assert.isFalse(yield* fs.exists(join(ws, "outside", "a.txt")))
      assert.strictEqual(yield* fs.readFileString(join(ws, "outside", "t.txt")), "x")
    }).pipe(Effect.provide(files)))

  it.scoped("records evidence: the root's real path, the normalized path through real folders, before and after", () =>
    Effect.gen(function*() {
      const { fs, realRoot, root, ws } = yield* workspace
      // The root reached through a link, a path with `.`, `..` and a link to a folder inside the root.
      yield* fs.symlink(root, join(ws, "root-link"))
      yield* fs.symlink(join(root, "sub"), join(root, "alias"))
      yield* fs.writeFileString(join(root, "sub", "old.txt"), "old bytes")
      const { dispatch, operationId, outcome } = yield* runWrite(join(ws, "root-link"), { path: "./alias/../alias/old.txt", content: "néw" }).pipe(
        Effect.provide(MemoryRuntimeEventStore.layer)
      )
      assert.strictEqual(outcome._tag, "Completed")
      assert.deepStrictEqual(dispatch?.evidence, evidence(realRoot, "sub/old.txt", sha("old bytes"), sha(Buffer.from("néw", "utf8"))))
      assert.strictEqual(dispatch?.recoveryMode, "reconcilable")
      assert.deepStrictEqual((outcome.response.body as FunctionResponse).result, {
        path: "sub/old.txt",
        bytes: Buffer.byteLength("néw"),
        sha256: sha("néw")
      })
      assert.strictEqual(yield* fs.readFileString(join(root, "sub", "old.txt")), "néw")
      assert.isTrue(operationId.startsWith("op_"))
      // A new file at the root itself: before is null.
      const second = yield* runWrite(root, { path: "top.txt", content: "" }, "run-fw2").pipe(Effect.provide(MemoryRuntimeEventStore.layer))
      assert.deepStrictEqual(second.dispatch?.evidence, evidence(realRoot, "top.txt", null, sha("")))
    }).pipe(Effect.provide(files)))
})

describe("fileWriteTool through ToolRuntime", () => {
  for (const store of ["memory", "sqlite"] as const) {
    it.scoped(`${store}: T1 carries the evidence, the file is written 0644, T2 the result; no temp file is left`, () =>
      Effect.gen(function*() {
        const { fs, realRoot, root, ws } = yield* workspace
        const layer = store === "memory" ? MemoryRuntimeEventStore.layer : SqliteRuntimeEventStore.layer({ workspace: ws })
        const { dispatch, operationId, outcome, rows } = yield* runWrite(root, { path: "sub/new.txt", content: "hello" }).pipe(
          Effect.provide(layer)
        )
        assert.deepStrictEqual(rows.map((r) => r.event.body._tag), ["RunOpened", "UserMessage", "FunctionCall", "ToolDispatched", "FunctionResponse"])
        assert.deepStrictEqual(dispatch?.evidence, evidence(realRoot, "sub/new.txt", null, sha("hello")))
        const body = outcome.response.body as FunctionResponse
        assert.isFalse(body.isError)
        assert.strictEqual(body.operationId, operationId)
        assert.deepStrictEqual(body.result, { path: "sub/new.txt", bytes: 5, sha256: sha("hello") })
        assert.strictEqual(yield* fs.readFileString(join(root, "sub", "new.txt")), "hello")
        assert.strictEqual((yield* fs.stat(join(root, "sub", "new.txt"))).mode & 0o777, 0o644)
        assert.deepStrictEqual(yield* fs.readDirectory(join(root, "sub")), ["new.txt"])
        const resolved = Either.getOrThrow(RecoveryResolver.resolve(rows))
        assert.deepStrictEqual(resolved.operations.map((o) => o.decision), ["completed"])
      }).pipe(Effect.provide(files)))
  }

  it.scoped("writes .<name>.<operationId>.tmp in the real folder with the existing target's mode, then renames it", () =>
    Effect.gen(function*() {
      const { fs, root } = yield* workspace
      const target = join(root, "sub", "keep.txt")
      yield* fs.writeFileString(target, "before")
      yield* fs.chmod(target, 0o600)
      const seen: Array<{ label: string | undefined; entries: Array<string>; mode: number | undefined }> = []
      const probe = Failpoints.layerAt("in_implementation", (site) =>
        Effect.gen(function*() {
          const entries = (yield* fs.readDirectory(join(root, "sub"))).sort()
          const temp = entries.find((e) => e.endsWith(".tmp"))
          const mode = temp === undefined ? undefined : (yield* fs.stat(join(root, "sub", temp))).mode & 0o7777
          seen.push({ label: site.label, entries, mode })
        }).pipe(Effect.orDie))
      const { operationId } = yield* runWrite(root, { path: "sub/keep.txt", content: "after" }).pipe(
        Effect.provide(Layer.merge(MemoryRuntimeEventStore.layer, probe))
      )
      const temp = tempFileName("keep.txt", operationId)
      assert.strictEqual(temp, `.keep.txt.${operationId}.tmp`)
      assert.deepStrictEqual(seen, [
        { label: FileWriteTool.FAILPOINT_BEFORE_RENAME, entries: [temp, "keep.txt"].sort(), mode: 0o600 },
        { label: FileWriteTool.FAILPOINT_AFTER_RENAME, entries: ["keep.txt"], mode: undefined }
      ])
      assert.strictEqual(yield* fs.readFileString(target), "after")
      assert.strictEqual((yield* fs.stat(target)).mode & 0o7777, 0o600)
    }).pipe(Effect.provide(files)))

  it.scoped("creates the temp file exclusively: one already there fails the write and is left alone", () =>
    Effect.gen(function*() {
      const { fs, root } = yield* workspace
      const temp = join(root, "sub", tempFileName("a.txt", deriveOperationId("inv-run-fw", "c1")))
      yield* fs.writeFileString(temp, "not ours")
      const { outcome } = yield* runWrite(root, { path: "sub/a.txt", content: "x" }).pipe(Effect.provide(MemoryRuntimeEventStore.layer))
      const body = outcome.response.body as FunctionResponse
      assert.isTrue(body.isError)
      assert.strictEqual((body.result as any).error, "FileWriteFailed")
      assert.strictEqual(yield* fs.readFileString(temp), "not ours")
      assert.isFalse(yield* fs.exists(join(root, "sub", "a.txt")))
    }).pipe(Effect.provide(files)))

  it.scoped("refuses to write when the parent folder resolves elsewhere since preflight (an error result, nothing written)", () =>
    Effect.gen(function*() {
      const { fs, root } = yield* workspace
      yield* fs.makeDirectory(join(root, "other"))
      // After T1: `sub` is replaced by a link to `other` (inside the root, so only the re-check catches it).
      const swap = Failpoints.layerAt("after_t1", () =>
        Effect.zipRight(fs.rename(join(root, "sub"), join(root, "sub-old")), fs.symlink(join(root, "other"), join(root, "sub"))).pipe(Effect.orDie))
      const { outcome } = yield* runWrite(root, { path: "sub/a.txt", content: "x" }).pipe(
        Effect.provide(Layer.merge(MemoryRuntimeEventStore.layer, swap))
      )
      const body = outcome.response.body as FunctionResponse
      assert.isTrue(body.isError)
      assert.strictEqual((body.result as any).error, "FileWriteFailed")
      assert.include((body.result as any).message, "not")
      assert.deepStrictEqual(yield* fs.readDirectory(join(root, "other")), [])
      assert.deepStrictEqual(yield* fs.readDirectory(join(root, "sub-old")), [])
    }).pipe(Effect.provide(files)))
})

describe("fileWriteTool observe", () => {
  const observe = (ev: unknown, options?: FileWriteTool.ObserveOptions) => Effect.either(FileWriteTool.observe(ev, options))
  const kindOf = (e: Either.Either<{ observation: string }, unknown>) => Either.isRight(e) ? e.right.observation : "failed"

  it.scoped("matches_expected_state with the synthesized result; matches_prior_state; before = after", () =>
    Effect.gen(function*() {
      const { fs, realRoot, root } = yield* workspace
      const target = join(root, "sub", "a.txt")
      const ev = evidence(realRoot, "sub/a.txt", null, sha("new"))
      // Absent while before is null.
      assert.strictEqual(kindOf(yield* observe(ev)), "matches_prior_state")
      yield* fs.writeFileString(target, "new")
      const expected = yield* observe(ev)
      assert.deepStrictEqual(Either.getOrThrow(expected), {
        observation: "matches_expected_state",
        result: { path: "sub/a.txt", bytes: 3, sha256: sha("new") },
        detail: `sub/a.txt holds the written bytes (${sha("new")})`
      })
      // Digest = before.
      const ev2 = evidence(realRoot, "sub/a.txt", sha("new"), sha("newer"))
      assert.strictEqual(kindOf(yield* observe(ev2)), "matches_prior_state")
      // before = after: matches_expected_state wins.
      const ev3 = evidence(realRoot, "sub/a.txt", sha("new"), sha("new"))
      assert.strictEqual(kindOf(yield* observe(ev3)), "matches_expected_state")
      // The same result the implementation gives for those bytes.
      const ran = yield* runWrite(root, { path: "sub/b.txt", content: "new" }).pipe(Effect.provide(MemoryRuntimeEventStore.layer))
      const observed = Either.getOrThrow(yield* observe(ran.dispatch?.evidence))
      assert.deepStrictEqual(observed.observation === "matches_expected_state" ? observed.result : null, (ran.outcome.response.body as FunctionResponse).result)
    }).pipe(Effect.provide(files)))

  it.scoped("diverged: another digest, absent while before was a digest, a symlink, a folder, a FIFO, a moved folder", () =>
    Effect.gen(function*() {
      const { fs, realRoot, root, ws } = yield* workspace
      const target = join(root, "sub", "a.txt")
      const ev = evidence(realRoot, "sub/a.txt", sha("old"), sha("new"))
      const diverged = (text: string) =>
        Effect.gen(function*() {
          const result = Either.getOrThrow(yield* observe(ev))
          assert.strictEqual(result.observation, "diverged", text)
          assert.include(result.detail, text)
        })
      yield* fs.writeFileString(target, "someone else's")
      yield* diverged("holds other bytes")
      yield* fs.remove(target)
      yield* diverged("is absent; it held")
      yield* fs.writeFileString(join(ws, "elsewhere.txt"), "new")
      yield* fs.symlink(join(ws, "elsewhere.txt"), target)
      yield* diverged("a symbolic link")
      yield* fs.remove(target)
      yield* fs.makeDirectory(target)
      yield* diverged("a folder")
      yield* fs.remove(target, { recursive: true })
      execFileSync("mkfifo", [target])
      yield* diverged("a pipe (FIFO)")
      yield* fs.remove(target)
      // The folder itself now leads elsewhere (a link to a folder holding the expected bytes).
      yield* fs.makeDirectory(join(ws, "decoy"))
      yield* fs.writeFileString(join(ws, "decoy", "a.txt"), "new")
      yield* fs.rename(join(root, "sub"), join(root, "sub-old"))
      yield* fs.symlink(join(ws, "decoy"), join(root, "sub"))
      yield* diverged("the folder sub of sub/a.txt is now a symbolic link")
    }).pipe(Effect.provide(files)))

  it.scoped("fails (observe_failed) when the root is missing or a read fails; --root overrides the recorded root", () =>
    Effect.gen(function*() {
      const { fs, realRoot, root, ws } = yield* workspace
      yield* fs.writeFileString(join(root, "sub", "a.txt"), "new")
      const ev = evidence(realRoot, "sub/a.txt", null, sha("new"))
      yield* fs.rename(root, join(ws, "moved"))
      const missing = yield* observe(ev)
      assert.isTrue(Either.isLeft(missing))
      if (Either.isLeft(missing)) {
        assert.strictEqual(missing.left._tag, "ObserveFailed")
        assert.include(missing.left.message, "the root")
      }
      assert.strictEqual(kindOf(yield* observe(ev, { root: join(ws, "moved") })), "matches_expected_state")
      // The recorded root replaced by a link to the moved folder: never observed through it.
      yield* fs.symlink(join(ws, "moved"), root)
      const linked = Either.getOrThrow(yield* observe(ev))
      assert.strictEqual(linked.observation, "diverged")
      assert.include(linked.detail, "the recorded root")
      // A read error (here injected: EIO) fails too, never guessed.
      const failing = Layer.succeed(NoFollowFileSystem, {
        entry: NodeNoFollowFileSystem.make.entry,
        realPath: NodeNoFollowFileSystem.make.realPath,
        readRegular: (path) =>
          Effect.fail(new PlatformError.SystemError({ reason: "Unknown", module: "FileSystem", method: "readRegular", pathOrDescriptor: path, description: "EIO: i/o error" })),
        readUnder: (root, path) =>
          Effect.fail(new PlatformError.SystemError({ reason: "Unknown", module: "FileSystem", method: "readUnder", pathOrDescriptor: `${root}/${path}`, description: "EIO: i/o error" })),
        removeUnder: NodeNoFollowFileSystem.make.removeUnder
      })
      const io = yield* observe(ev, { root: join(ws, "moved") }).pipe(Effect.provide(failing))
      assert.strictEqual(kindOf(io), "failed")
      // Evidence that is not file-write evidence.
      assert.strictEqual(kindOf(yield* observe({ tool: "other" })), "failed")
    }).pipe(Effect.provide(files)))

  it.scoped("removeTempFile removes the operation's leftover temp file once, and never a link or folder", () =>
    Effect.gen(function*() {
      const { fs, realRoot, root, ws } = yield* workspace
      const ev = evidence(realRoot, "sub/a.txt", null, sha("new"))
      const op = deriveOperationId("inv", "c1")
      const temp = join(root, "sub", tempFileName("a.txt", op))
      yield* fs.writeFileString(temp, "partial")
      assert.isTrue(yield* FileWriteTool.removeTempFile(ev, op))
      assert.isFalse(yield* fs.exists(temp))
      assert.isFalse(yield* FileWriteTool.removeTempFile(ev, op))
      yield* fs.writeFileString(join(ws, "victim"), "v")
      yield* fs.symlink(join(ws, "victim"), temp)
      assert.isFalse(yield* FileWriteTool.removeTempFile(ev, op))
      assert.strictEqual(yield* fs.readFileString(join(ws, "victim")), "v")
    }).pipe(Effect.provide(files)))
})

describe("fileWriteTool crash proof", () => {
  const runChild = (store: "sqlite" | "jsonl", point: "before_rename" | "after_rename") =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* fs.makeTempDirectoryScoped({ prefix: `rr-fw-crash-${store}-${point}-` })
      const root = join(ws, "project")
      yield* fs.makeDirectory(root)
      yield* fs.writeFileString(join(root, "notes.txt"), "before")
      const proc = yield* Command.make(process.execPath, "--import", "tsx", CHILD_PATH, store, ws, root, point).pipe(
        Command.workingDirectory(resolve(import.meta.dirname, "..")),
        Command.start
      )
      const reached = yield* proc.stdout.pipe(
        Stream.decodeText(),
        Stream.splitLines,
        Stream.filter((line) => line === `at ${point}`),
        Stream.runHead,
        Effect.timeout("60 seconds")
      )
      assert.isTrue(Option.isSome(reached), `the child reached ${point}`)
      yield* proc.kill("SIGKILL")
      const ledger = yield* Layer.build(storeLayer(store, { workspace: ws, readOnly: true })).pipe(Effect.map((ctx) => Context.get(ctx, RuntimeEventStore)))
      const rows = yield* ledger.readRun(CHILD_RUN as never)
      const dispatch = rows.find((r) => r.event.body._tag === "ToolDispatched")!.event.body as ToolDispatched
      assert.isUndefined(rows.find((r) => r.event.body._tag === "FunctionResponse"), "no T2")
      const decision = Either.getOrThrow(RecoveryResolver.resolve(rows)).operations[0]
      assert.strictEqual(decision?.decision, "indeterminate")
      const observed = Either.getOrThrow(yield* Effect.either(FileWriteTool.observe(dispatch.evidence)))
      const temp = join(root, tempFileName("notes.txt", dispatch.operationId))
      const content = yield* fs.readFileString(join(root, "notes.txt"))
      const tempLeft = yield* fs.exists(temp)
      // What reconcile does after observing: remove the operation's leftover temp file.
      const removed = yield* FileWriteTool.removeTempFile(dispatch.evidence, dispatch.operationId)
      return { observed, content, tempLeft, removed, tempAfter: yield* fs.exists(temp) }
    }).pipe(Effect.scoped)

  for (const store of ["sqlite", "jsonl"] as const) {
    it.live(`${store}: SIGKILL before the rename → matches_prior_state (temp file left, removable); after it → matches_expected_state`, () =>
      Effect.gen(function*() {
        const [before, after] = yield* Effect.all([runChild(store, "before_rename"), runChild(store, "after_rename")], { concurrency: 2 })
        assert.strictEqual(before.observed.observation, "matches_prior_state")
        assert.strictEqual(before.content, "before")
        assert.isTrue(before.tempLeft)
        assert.isTrue(before.removed)
        assert.isFalse(before.tempAfter)
        assert.deepStrictEqual(after.observed, {
          observation: "matches_expected_state",
          result: { path: "notes.txt", bytes: 5, sha256: sha("after") },
          detail: `notes.txt holds the written bytes (${sha("after")})`
        })
        assert.strictEqual(after.content, "after")
        assert.isFalse(after.tempLeft)
        assert.isFalse(after.removed)
      }).pipe(Effect.provide(files)), 180_000)
  }
})
