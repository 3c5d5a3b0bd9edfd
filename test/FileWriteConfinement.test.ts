// The file-write reconciler confined to its root (docs/spec/05-reconciliation.md, "Built-in file-write tool"): evidence root and path checked
// normal at T1, import and read; observe and temp-file removal never follow a link, generated layouts and a real race.
import * as FileSystem from "@effect/platform/FileSystem"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, FastCheck as fc, Layer } from "effect"
import { spawn } from "node:child_process"
import { createHash } from "node:crypto"
import * as nodeFs from "node:fs"
import { join, posix } from "node:path"
import {
  absoluteRootProblem,
  FILE_WRITE_EVIDENCE_TOOL,
  fileWriteEvidenceProblem,
  relativePathProblem,
  tempFileName
} from "../src/Domain/FileWriteEvidence.js"
import { canonicalText, type RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import * as MemoryRunHeaderStore from "../src/Layers/MemoryRunHeaderStore.js"
import * as MemoryRuntimeEventStore from "../src/Layers/MemoryRuntimeEventStore.js"
import * as NodeNoFollowFileSystem from "../src/Layers/NodeNoFollowFileSystem.js"
import * as NodeOperator from "../src/Layers/NodeOperator.js"
import { layerStore } from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as FileWriteTool from "../src/Programs/FileWriteTool.js"
import { importLedger } from "../src/Programs/ImportLedger.js"
import * as Reconcile from "../src/Programs/Reconcile.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { headerOf } from "./support/runHeaders.js"

const sha = (text: string | Uint8Array) => "sha256:" + createHash("sha256").update(text).digest("hex")
const files = Layer.merge(NodeContext.layer, NodeNoFollowFileSystem.layer)
const memory = Layer.mergeAll(MemoryRuntimeEventStore.layer, MemoryRunHeaderStore.layer, NodeOperator.layerFixed("alice"))
const nofollow = NodeNoFollowFileSystem.make

const evidence = (root: string, path: string, before: string | null, after: string) => ({
  tool: FILE_WRITE_EVIDENCE_TOOL,
  root,
  path,
  before,
  after
})

// Recorded paths that are not normal and relative, each of which leaves (or could leave) the root.
const UNSOUND_PATHS = ["../outside/out.txt", "/etc/passwd", "sub/../../outside/out.txt", "./sub/out.txt", "sub//out.txt", "sub/", "sub\\..\\out.txt", "..", "a/\u0000b"]

// A workspace: `root` (with `sub`), and `outside` beside it holding what an escape would find: the expected bytes and a
// temp file of the operation (which must never be removed).
const layout = (operationId: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const ws = yield* fs.realPath(yield* fs.makeTempDirectoryScoped({ prefix: "rr-confine-" }))
    const root = join(ws, "root")
    const outside = join(ws, "outside")
    yield* fs.makeDirectory(join(root, "sub"), { recursive: true })
    yield* fs.makeDirectory(join(outside, "sub"), { recursive: true })
    for (const dir of [outside, join(outside, "sub")]) {
      yield* fs.writeFileString(join(dir, "out.txt"), "new")
      yield* fs.writeFileString(join(dir, tempFileName("out.txt", operationId)), "outside temp")
    }
    return { fs, ws, root, outside }
  })

// Every regular file under `dir` with its content (links not followed).
const snapshot = (dir: string): Record<string, string> => {
  const out: Record<string, string> = {}
  const walk = (d: string) => {
    for (const name of nodeFs.readdirSync(d)) {
      const p = join(d, name)
      const s = nodeFs.lstatSync(p)
      if (s.isDirectory()) walk(p)
      else if (s.isFile()) out[p] = nodeFs.readFileSync(p, "utf8")
    }
  }
  walk(dir)
  return out
}

describe("file-write evidence paths (docs/spec/05-reconciliation.md): normal and relative, or refused", () => {
  it("relativePathProblem accepts exactly the paths that normalize to themselves, stay relative and never climb", () =>
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom("a", "b.txt", ".", "..", "", "/", "\\", "\u0000", ".x", "..y", "c d"), { maxLength: 6 }),
        (tokens) => {
          const path = tokens.join("")
          const problem = relativePathProblem(path)
          const normal = path.length > 0 && !path.includes("\u0000") && !path.includes("\\") &&
            posix.normalize(path) === path && !posix.isAbsolute(path) && path !== "." &&
            !path.split("/").some((p) => p === ".." || p === "." || p === "")
          assert.strictEqual(problem === undefined, normal, `${JSON.stringify(path)}: ${problem}`)
          if (problem === undefined) {
            const back = posix.relative("/r", posix.join("/r", path))
            assert.isTrue(back === path && back !== ".." && !back.startsWith("../"), path)
          }
        }
      ),
      { numRuns: 2000 }
    ))

  it("absoluteRootProblem: only a normal absolute root; fileWriteEvidenceProblem names the field", () => {
    assert.isUndefined(absoluteRootProblem("/"))
    assert.isUndefined(absoluteRootProblem("/tmp/x"))
    for (const root of ["tmp/x", "/tmp/../etc", "/tmp//x", "/tmp/x/", "/tmp/./x", ""]) assert.isString(absoluteRootProblem(root), root)
    for (const path of UNSOUND_PATHS) {
      assert.include(fileWriteEvidenceProblem(evidence("/r", path, null, sha("x"))) ?? "", "path", path)
    }
    assert.include(fileWriteEvidenceProblem(evidence("relative/root", "a", null, sha("x"))) ?? "", "root")
    assert.isUndefined(fileWriteEvidenceProblem({ tool: "someone-else", path: "../x" }), "other tools' evidence is theirs")
  })

  for (const store of ["memory", "sqlite", "jsonl"] as const) {
    it.scoped(`${store}: T1 refuses a dispatch whose file-write evidence path or root is not normal (schema_invalid, nothing written)`, () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-confine-t1-" })
        const layer = store === "memory"
          ? MemoryRuntimeEventStore.layer
          : layerStore(store, { workspace: join(ws, "ws"), readOnly: false }).pipe(Layer.provide(NodeWorkspaceLock.layer))
        yield* Effect.gen(function*() {
          const ledger = yield* RuntimeEventStore
          const b = EventBuilder.make("t1-forged", 1000)
          yield* ledger.append(b.runId, [b.opened("t1_after_preflight_v1"), b.user("go")])
          const forged = [...UNSOUND_PATHS.map((p) => evidence("/r", p, null, sha("x"))), evidence("r", "a.txt", null, sha("x"))]
          for (const [i, ev] of forged.entries()) {
            const args = { path: "a.txt", content: "x" }
            const call = b.call(`c${i}`, "write_file", args)
            const refused = yield* Effect.flip(
              ledger.appendDispatch(b.runId, { call, dispatch: b.dispatched(`c${i}`, "write_file", args, "reconcilable", { evidence: ev }) })
            )
            assert.strictEqual(refused._tag, "AppendRejected", JSON.stringify(ev))
            assert.strictEqual((refused as { reason?: string }).reason, "schema_invalid")
            assert.include(refused.message, FILE_WRITE_EVIDENCE_TOOL)
          }
          assert.strictEqual((yield* ledger.readRun(b.runId)).length, 2, "nothing was written")
        }).pipe(Effect.provide(layer))
      }).pipe(Effect.provide(NodeContext.layer)))
  }

  it.scoped("import refuses a dispatch whose file-write evidence leaves the root (finding: import restored it)", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-confine-import-" })
      for (const [i, path] of ["../outside/out.txt", "/etc/passwd"].entries()) {
        const b = EventBuilder.make(`import-forged-${i}`, 1000)
        const args = { path: "out.txt", content: "new" }
        const events: Array<RuntimeEvent> = [
          b.opened("t1_after_preflight_v1"),
          b.user("go"),
          b.call("c1", "write_file", args),
          b.dispatched("c1", "write_file", args, "reconcilable", { evidence: evidence("/tmp/root", path, null, sha("new")) }),
          b.terminated("failed", "process_interrupted")
        ]
        const file = join(dir, `forged-${i}.jsonl`)
        yield* fs.writeFileString(file, events.map((e) => `${Either.getOrThrow(canonicalText(e))}\n`).join(""))
        const refused = yield* Effect.flip(importLedger(file))
        assert.strictEqual(refused._tag, "ImportInvalid", String(refused))
        assert.include(refused.message, "not a normal relative path")
        const store = yield* RuntimeEventStore
        assert.deepStrictEqual(yield* store.listRuns(), [], "nothing was imported")
      }
    }).pipe(Effect.provide(Layer.merge(MemoryRuntimeEventStore.layer, NodeContext.layer))))
})

describe("reconcile never reads or removes outside its root (docs/spec/05-reconciliation.md)", () => {
  // A sealed managed run with one file-write dispatch of `sub/out.txt` under `root`, its evidence taken at T1.
  const fileRun = (root: string, name: string) =>
    Effect.gen(function*() {
      const store = yield* RuntimeEventStore
      const headers = yield* RunHeaderStore
      const b = EventBuilder.make(name, 1000)
      yield* headers.create(headerOf(b))
      yield* store.append(b.runId, [b.opened("t1_after_preflight_v1"), b.user("go")])
      const args = { path: "sub/out.txt", content: "new" }
      const ev = yield* FileWriteTool.evidenceOf(root, args)
      const call = b.call("c1", "write_file", args)
      yield* store.appendDispatch(b.runId, { call, dispatch: b.dispatched("c1", "write_file", args, "reconcilable", { evidence: ev }) })
      yield* store.append(b.runId, [b.terminated("failed", "process_interrupted")])
      const operationId = (yield* store.toolCallState(b.runId, "c1")).call!.operationId!
      return { runId: b.runId, operationId, ev }
    })

  const outcomes = (report: { readonly operations: ReadonlyArray<{ readonly outcome: string; readonly reason: string }> }) =>
    report.operations.map((o) => [o.outcome, o.reason])

  it.scoped("the project root replaced by a link to a folder holding the written bytes and the temp file: diverged, nothing outside removed", () =>
    Effect.gen(function*() {
      const { fs, outside, root, ws } = yield* layout("unused")
      const { operationId } = yield* fileRun(root, "root-swapped")
      yield* fs.writeFileString(join(outside, "sub", tempFileName("out.txt", operationId)), "outside temp")
      const before = snapshot(outside)
      yield* fs.rename(root, join(ws, "root-away"))
      yield* fs.symlink(outside, root)
      const report = yield* Reconcile.reconcile({ fileWrite: yield* Reconcile.builtinFileWrite() })
      assert.deepStrictEqual(outcomes(report), [["parked", "reconcile_diverged"]])
      assert.deepStrictEqual(snapshot(outside), before, "nothing outside the root was removed")
    }).pipe(Effect.provide(Layer.merge(memory, files))))

  it.scoped("a folder on the recorded path replaced by a link (and --root naming a tree with one): diverged, never completed from outside", () =>
    Effect.gen(function*() {
      const { fs, outside, root, ws } = yield* layout("unused")
      const { operationId } = yield* fileRun(root, "folder-swapped")
      yield* fs.writeFileString(join(outside, "sub", tempFileName("out.txt", operationId)), "outside temp")
      const before = snapshot(outside)
      yield* fs.rename(join(root, "sub"), join(root, "sub-away"))
      yield* fs.symlink(join(outside, "sub"), join(root, "sub"))
      // --root: a moved project whose sub is a link out of it.
      const moved = join(ws, "moved")
      yield* fs.makeDirectory(moved)
      yield* fs.symlink(join(outside, "sub"), join(moved, "sub"))
      const viaRoot = yield* Reconcile.reconcile({ fileWrite: yield* Reconcile.builtinFileWrite({ root: moved }) })
      assert.deepStrictEqual(outcomes(viaRoot), [["parked", "reconcile_diverged"]])
      assert.include(viaRoot.operations[0]!.message, "symbolic link")
      assert.deepStrictEqual(snapshot(outside), before, "nothing outside the root was removed")
    }).pipe(Effect.provide(Layer.merge(memory, files))))

  it.scoped("the recorded folder as a link: diverged through the recorded root too, the temp file outside left", () =>
    Effect.gen(function*() {
      const { fs, outside, root } = yield* layout("unused")
      const { operationId } = yield* fileRun(root, "folder-swapped-2")
      yield* fs.writeFileString(join(outside, "sub", tempFileName("out.txt", operationId)), "outside temp")
      const before = snapshot(outside)
      yield* fs.remove(join(root, "sub"), { recursive: true })
      yield* fs.symlink(join(outside, "sub"), join(root, "sub"))
      const report = yield* Reconcile.reconcile({ fileWrite: yield* Reconcile.builtinFileWrite() })
      assert.deepStrictEqual(outcomes(report), [["parked", "reconcile_diverged"]])
      assert.deepStrictEqual(snapshot(outside), before)
    }).pipe(Effect.provide(Layer.merge(memory, files))))

  it.scoped("forged evidence (.., absolute) is never walked: observe and removal fail typed, nothing outside read or removed", () =>
    Effect.gen(function*() {
      const op = "op-forged"
      const { outside, root } = yield* layout(op)
      const before = snapshot(outside)
      for (const path of UNSOUND_PATHS) {
        const ev = evidence(root, path, null, sha("new"))
        const observed = yield* Effect.either(FileWriteTool.observe(ev, { root }))
        assert.isTrue(Either.isLeft(observed), path)
        if (Either.isLeft(observed)) assert.strictEqual(observed.left._tag, "ObserveFailed")
        assert.isTrue(Either.isLeft(yield* Effect.either(FileWriteTool.removeTempFile(ev, op, { root }))), path)
        // The layer refuses them too, whoever calls it.
        assert.isTrue(Either.isLeft(yield* Effect.either(nofollow.readUnder(root, path))), path)
        assert.isTrue(Either.isLeft(yield* Effect.either(nofollow.removeUnder(root, path))), path)
      }
      assert.deepStrictEqual(snapshot(outside), before)
    }).pipe(Effect.provide(files)))
})

// A component of a generated layout: what stands at `root/<name>` (or below it) when observe walks there.
type Component = "dir" | "link-out" | "link-in" | "file" | "missing"

describe("generated layouts: links, .., absolute paths and swapped roots never lead outside (docs/spec/05-reconciliation.md)", () => {
  it.scoped("observe settles completed only from a file reached through real folders under the root; removal never leaves it", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const base = yield* fs.realPath(yield* fs.makeTempDirectoryScoped({ prefix: "rr-confine-prop-" }))
      const op = "op-prop"
      let round = 0
      const property = fc.asyncProperty(
        fc.array(fc.constantFrom<Component>("dir", "link-out", "link-in", "file", "missing"), { minLength: 1, maxLength: 3 }),
        fc.constantFrom("plain", "dotdot", "absolute", "dot"),
        fc.constantFrom("recorded", "root-link", "override-link"),
        fc.constantFrom<"expected" | "link" | "none">("expected", "link", "none"),
        async (components, pathShape, rootShape, target) => {
          const ws = join(base, `r${round++}`)
          const root = join(ws, "root")
          const outside = join(ws, "outside")
          nodeFs.mkdirSync(root, { recursive: true })
          // Outside: every folder of the path mirrored, each with the expected bytes and the operation's temp file.
          let mirror = outside
          nodeFs.mkdirSync(mirror, { recursive: true })
          const names = components.map((_, i) => `d${i}`)
          const seed = (dir: string) => {
            nodeFs.writeFileSync(join(dir, "out.txt"), "new")
            nodeFs.writeFileSync(join(dir, tempFileName("out.txt", op)), "outside temp")
          }
          seed(mirror)
          for (const name of names) {
            mirror = join(mirror, name)
            nodeFs.mkdirSync(mirror)
            seed(mirror)
          }
          nodeFs.mkdirSync(join(root, "inner"))
          seed(join(root, "inner"))
          // Inside: the generated components.
          let here = root
          let mirrorHere = outside
          let clean = true
          for (const [i, kind] of components.entries()) {
            const at = join(here, names[i]!)
            mirrorHere = join(mirrorHere, names[i]!)
            if (kind === "dir") nodeFs.mkdirSync(at)
            else if (kind === "link-out") nodeFs.symlinkSync(mirrorHere, at)
            else if (kind === "link-in") nodeFs.symlinkSync(join(root, "inner"), at)
            else if (kind === "file") nodeFs.writeFileSync(at, "a file")
            if (kind !== "dir") {
              clean = false
              break
            }
            here = at
          }
          if (clean) {
            if (target === "expected") nodeFs.writeFileSync(join(here, "out.txt"), "new")
            if (target === "link") nodeFs.symlinkSync(join(mirrorHere, "out.txt"), join(here, "out.txt"))
            nodeFs.writeFileSync(join(here, tempFileName("out.txt", op)), "inside temp")
          }
          const relative = [...names, "out.txt"].join("/")
          const path = pathShape === "plain"
            ? relative
            : pathShape === "dotdot"
            ? `../outside/${relative}`
            : pathShape === "absolute"
            ? join(outside, relative)
            : `./${relative}`
          const recordedRoot = root
          let override: string | undefined
          if (rootShape === "root-link") {
            nodeFs.renameSync(root, join(ws, "root-away"))
            nodeFs.symlinkSync(outside, root)
          } else if (rootShape === "override-link") {
            // --root names a real folder whose first component is a link out of it.
            override = join(ws, "moved")
            nodeFs.mkdirSync(override)
            nodeFs.symlinkSync(join(outside, names[0]!), join(override, names[0]!))
          }
          const outsideBefore = snapshot(outside)
          const ev = evidence(recordedRoot, path, null, sha("new"))
          const options = override !== undefined ? { root: override } : {}
          const program = Effect.gen(function*() {
            const observed = yield* Effect.either(FileWriteTool.observe(ev, options))
            const removed = yield* Effect.either(FileWriteTool.removeTempFile(ev, op, options))
            return { observed, removed }
          })
          const { observed, removed } = await Effect.runPromise(Effect.provide(program, files))
          const label = JSON.stringify({ components, pathShape, rootShape, target })
          if (pathShape !== "plain") {
            assert.isTrue(Either.isLeft(observed), `unsound path observed: ${label}`)
            assert.isTrue(Either.isLeft(removed), `unsound path removed: ${label}`)
          }
          const reachedInside = pathShape === "plain" && rootShape === "recorded" && clean
          if (Either.isRight(observed) && observed.right.observation === "matches_expected_state") {
            assert.isTrue(reachedInside && target === "expected", `completed from outside: ${label}`)
          }
          if (reachedInside && target === "expected") {
            assert.strictEqual(Either.isRight(observed) && observed.right.observation, "matches_expected_state", label)
          }
          if (Either.isRight(removed) && removed.right) assert.isTrue(reachedInside, `removed outside: ${label}`)
          assert.deepStrictEqual(snapshot(outside), outsideBefore, `outside changed: ${label}`)
        }
      )
      yield* Effect.promise(() => fc.assert(property, { numRuns: 300 }))
    }).pipe(Effect.provide(NodeContext.layer)))

  it.live("a real race: a folder on the path swapped with a link to outside while reads and removals run never reads or removes outside", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* fs.realPath(yield* fs.makeTempDirectoryScoped({ prefix: "rr-confine-race-" }))
      const root = join(ws, "root")
      const outside = join(ws, "outside")
      const op = "op-race"
      const temp = tempFileName("out.txt", op)
      nodeFs.mkdirSync(join(root, "sub"), { recursive: true })
      nodeFs.mkdirSync(outside)
      nodeFs.writeFileSync(join(root, "sub", "out.txt"), "inside")
      nodeFs.writeFileSync(join(outside, "out.txt"), "OUTSIDE")
      nodeFs.writeFileSync(join(outside, temp), "outside temp")
      // A child process swaps root/sub between the real folder and a link to outside, as fast as it can.
      const swapper = spawn(process.execPath, [
        "-e",
        `const fs=require("fs");const s=${JSON.stringify(join(root, "sub"))};for(;;){fs.renameSync(s,s+".real");` +
        `fs.symlinkSync(${JSON.stringify(outside)},s);fs.unlinkSync(s);fs.renameSync(s+".real",s)}`
      ], { stdio: "ignore" })
      yield* Effect.addFinalizer(() => Effect.sync(() => swapper.kill("SIGKILL")))
      const seen = new Set<string>()
      for (let i = 0; i < 3000; i++) {
        const read = yield* Effect.either(nofollow.readUnder(root, "sub/out.txt"))
        if (Either.isRight(read)) {
          seen.add(read.right._tag)
          if (read.right._tag === "Regular") assert.strictEqual(Buffer.from(read.right.bytes).toString(), "inside", "read outside")
        }
        yield* Effect.either(nofollow.removeUnder(root, `sub/${temp}`))
        assert.isTrue(nodeFs.existsSync(join(outside, temp)), `removed outside at round ${i}`)
        assert.strictEqual(nodeFs.readFileSync(join(outside, "out.txt"), "utf8"), "OUTSIDE")
      }
      // The race really ran both ways.
      assert.isTrue(seen.has("Regular"), [...seen].join(","))
      assert.isTrue(seen.size > 1, [...seen].join(","))
    }).pipe(Effect.provide(NodeContext.layer), Effect.scoped))
})
