// The workspace identity marker (create once, never rebind, malformed refused) and the Node ContinuationSafetyInspector,
// on real files in temporary folders; the inspector's facts then drive the planner's workspace gate.
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Equal, Option, Ref } from "effect"
import * as NodePath from "node:path"
import * as ContinuationPlan from "../src/Domain/ContinuationPlan.js"
import { RunId } from "../src/Domain/Ids.js"
import { RunHeader } from "../src/Domain/RunHeader.js"
import * as NodeContinuationSafetyInspector from "../src/Layers/NodeContinuationSafetyInspector.js"
import { plan } from "../src/Domain/Rules/ContinuationPlanner.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as WorkspaceIdentity from "../src/Services/WorkspaceIdentity.js"
import { ContinuationSafetyInspector } from "../src/Services/ContinuationSafetyInspector.js"
import { commit } from "./support/toolLedgers.js"

const UUID_A = "11111111-2222-4333-8444-555555555555"
const UUID_B = "aaaaaaaa-bbbb-4ccc-9ddd-eeeeeeeeeeee"

const uuids = (...values: ReadonlyArray<string>) => {
  let i = 0
  return { next: Effect.sync(() => values[Math.min(i++, values.length - 1)]!) }
}

const withUuids = (...values: ReadonlyArray<string>) => Effect.provideService(WorkspaceIdentity.UuidSource, uuids(...values))

const tempWorkspace = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "workspace-id-" }))

const leftTag = <A, E extends { readonly _tag: string }>(e: Either.Either<A, E>) =>
  Either.isLeft(e) ? e.left._tag : "Right"

describe("WorkspaceIdentity: the marker file", () => {
  it.scopedLive("ensure creates the marker once: 0600, the UUID and a newline, no temporary file left", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* tempWorkspace
      assert.isTrue(Option.isNone(yield* WorkspaceIdentity.read(ws)))
      const id = yield* WorkspaceIdentity.ensure(ws).pipe(withUuids(UUID_A))
      assert.strictEqual(id, UUID_A)
      const path = WorkspaceIdentity.markerPath(ws)
      assert.strictEqual(path, NodePath.join(ws, "workspace-id"))
      assert.strictEqual(yield* fs.readFileString(path), `${UUID_A}\n`)
      assert.strictEqual(Number((yield* fs.stat(path)).mode) & 0o777, 0o600)
      assert.deepStrictEqual(yield* fs.readDirectory(ws), ["workspace-id"])
      assert.deepStrictEqual(yield* WorkspaceIdentity.read(ws), Option.some(UUID_A))
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.scopedLive("never rebinds: a second ensure with another UUID returns the first, bytes unchanged", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* tempWorkspace
      yield* WorkspaceIdentity.ensure(ws).pipe(withUuids(UUID_A))
      const again = yield* WorkspaceIdentity.ensure(ws).pipe(withUuids(UUID_B))
      assert.strictEqual(again, UUID_A)
      assert.strictEqual(yield* fs.readFileString(WorkspaceIdentity.markerPath(ws)), `${UUID_A}\n`)
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.scopedLive("two concurrent creators agree on one identity (the first link wins)", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* tempWorkspace
      const [a, b] = yield* Effect.all([
        WorkspaceIdentity.ensure(ws).pipe(withUuids(UUID_A)),
        WorkspaceIdentity.ensure(ws).pipe(withUuids(UUID_B))
      ], { concurrency: 2 })
      assert.strictEqual(a, b)
      assert.include([UUID_A, UUID_B], a)
      assert.strictEqual(yield* fs.readFileString(WorkspaceIdentity.markerPath(ws)), `${a}\n`)
      assert.deepStrictEqual(yield* fs.readDirectory(ws), ["workspace-id"])
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  for (
    const [label, text] of [
      ["garbage", "not a uuid\n"],
      ["no newline", UUID_A],
      ["uppercase", `${UUID_B.toUpperCase()}\n`],
      ["two lines", `${UUID_A}\n${UUID_B}\n`],
      ["empty", ""],
      ["not version 4", "11111111-2222-1333-8444-555555555555\n"]
    ] as const
  ) {
    it.scopedLive(`a malformed marker (${label}) is refused, never rewritten`, () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const ws = yield* tempWorkspace
        const path = WorkspaceIdentity.markerPath(ws)
        yield* fs.writeFileString(path, text)
        const read = yield* Effect.either(WorkspaceIdentity.read(ws))
        assert.strictEqual(leftTag(read), "WorkspaceIdentityInvalid")
        const ensured = yield* Effect.either(WorkspaceIdentity.ensure(ws).pipe(withUuids(UUID_B)))
        assert.strictEqual(leftTag(ensured), "WorkspaceIdentityInvalid")
        if (Either.isLeft(ensured) && ensured.left._tag === "WorkspaceIdentityInvalid") {
          assert.strictEqual(ensured.left.reason, "malformed")
          assert.include(ensured.left.message, path)
        }
        assert.strictEqual(yield* fs.readFileString(path), text)
      }).pipe(Effect.provide(NodeFileSystem.layer)))
  }

  it.scopedLive("a marker that is a folder or a symlink is not_a_file", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* tempWorkspace
      const path = WorkspaceIdentity.markerPath(ws)
      yield* fs.makeDirectory(path)
      const dir = yield* Effect.either(WorkspaceIdentity.ensure(ws).pipe(withUuids(UUID_A)))
      assert.isTrue(Either.isLeft(dir) && dir.left._tag === "WorkspaceIdentityInvalid" && dir.left.reason === "not_a_file")
      const other = yield* tempWorkspace
      const real = NodePath.join(other, "real")
      yield* fs.writeFileString(real, `${UUID_A}\n`)
      yield* fs.symlink(real, WorkspaceIdentity.markerPath(other))
      const link = yield* Effect.either(WorkspaceIdentity.read(other))
      assert.isTrue(Either.isLeft(link) && link.left._tag === "WorkspaceIdentityInvalid" && link.left.reason === "not_a_file")
      yield* fs.remove(real)
      const dangling = yield* Effect.either(WorkspaceIdentity.ensure(other).pipe(withUuids(UUID_B)))
      assert.strictEqual(leftTag(dangling), "WorkspaceIdentityInvalid")
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.scopedLive("a UUID source that gives no UUID v4 creates nothing", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* tempWorkspace
      const r = yield* Effect.either(WorkspaceIdentity.ensure(ws).pipe(withUuids("not-a-uuid")))
      assert.strictEqual(leftTag(r), "WorkspaceIdentityFailed")
      assert.deepStrictEqual(yield* fs.readDirectory(ws), [])
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.scopedLive("the default UUID source gives a fresh UUID v4", () =>
    Effect.gen(function*() {
      const ws = yield* tempWorkspace
      const id = yield* WorkspaceIdentity.ensure(ws)
      assert.isTrue(WorkspaceIdentity.isUuidV4(id))
    }).pipe(Effect.provide(NodeFileSystem.layer)))
})

describe("ContinuationSafetyInspector (Node layer)", () => {
  it.scopedLive("reports the marker's UUID, the host's catalog and background state, and writes nothing", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* tempWorkspace
      const settled = yield* Ref.make(false)
      const layer = NodeContinuationSafetyInspector.layerNode({
        toolCatalog: Effect.succeed(["read", "write"]),
        backgroundSettled: Ref.get(settled)
      })
      const inspect = Effect.flatMap(ContinuationSafetyInspector, (i) => i.inspect(ws)).pipe(Effect.provide(layer))

      const before = yield* inspect
      assert.isUndefined(before.workspaceId)
      assert.deepStrictEqual([...before.toolCatalog], ["read", "write"])
      assert.isFalse(before.backgroundSettled)
      assert.deepStrictEqual(yield* fs.readDirectory(ws), [], "inspect must not create the marker")

      yield* WorkspaceIdentity.ensure(ws).pipe(withUuids(UUID_A))
      yield* Ref.set(settled, true)
      const after = yield* inspect
      assert.strictEqual(after.workspaceId, UUID_A)
      assert.isTrue(after.backgroundSettled)
      assert.isTrue(Equal.equals(after, yield* inspect), "two inspections of the same state are Equal")
    }).pipe(Effect.provide(NodeFileSystem.layer)))

  it.scopedLive("a malformed marker fails the inspection with WorkspaceIdentityInvalid", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const ws = yield* tempWorkspace
      yield* fs.writeFileString(WorkspaceIdentity.markerPath(ws), "garbage\n")
      const r = yield* Effect.either(
        Effect.flatMap(ContinuationSafetyInspector, (i) => i.inspect(ws)).pipe(
          Effect.provide(NodeContinuationSafetyInspector.layer(NodeContinuationSafetyInspector.fixed([], true)))
        )
      )
      assert.strictEqual(leftTag(r), "WorkspaceIdentityInvalid")
    }).pipe(Effect.provide(NodeFileSystem.layer)))
})

describe("ContinuationSafetyInspector feeds the planner", () => {
  const b = EventBuilder.make("run-1")
  const rows = commit("run-1", [
    b.opened("t1_after_preflight_v1"),
    b.user("u"),
    b.call("c1", "read", {}),
    b.dispatched("c1", "read", {}, "read_only"),
    b.response("c1", "read", 1, { operationBound: true }),
    b.terminated("failed", "process_interrupted")
  ])
  const header = RunHeader.make({
    runId: RunId.make("run-1"),
    sessionId: rows[0]!.event.sessionId,
    invocationId: rows[0]!.event.invocationId,
    turnId: rows[0]!.event.turnId,
    status: "failed",
    workspaceId: UUID_A,
    createdAt: 0,
    updatedAt: 0
  })
  const planIn = (ws: string) =>
    Effect.gen(function*() {
      const facts = yield* Effect.flatMap(ContinuationSafetyInspector, (i) => i.inspect(ws)).pipe(
        Effect.provide(NodeContinuationSafetyInspector.layerNode(NodeContinuationSafetyInspector.fixed(["read"], true)))
      )
      return plan({
        runId: "run-1",
        source: { header, rows: ContinuationPlan.committed(rows) },
        ancestors: [],
        claims: [],
        host: facts,
        enabled: false,
        confirmed: true
      })
    })

  it.scopedLive("the run's own workspace continues; another workspace parks with workspace_identity_mismatch", () =>
    Effect.gen(function*() {
      const own = yield* tempWorkspace
      yield* WorkspaceIdentity.ensure(own).pipe(withUuids(UUID_A))
      assert.strictEqual((yield* planIn(own))._tag, "Continue")
      const other = yield* tempWorkspace
      yield* WorkspaceIdentity.ensure(other).pipe(withUuids(UUID_B))
      assert.deepStrictEqual([...ContinuationPlan.reasonsOf(yield* planIn(other))], ["workspace_identity_mismatch"])
      const unmarked = yield* tempWorkspace
      assert.deepStrictEqual([...ContinuationPlan.reasonsOf(yield* planIn(unmarked))], ["workspace_identity_mismatch"])
    }).pipe(Effect.provide(NodeFileSystem.layer)))
})
