// WorkspaceBackend (src/Workspace/WorkspaceBackend.ts): one backend for every verb. A folder's store is found as a
// reader finds it and nothing is created on the way; its ledger, run headers, owner and inspector come from one place;
// PostgreSQL is named without any IO and needs its server.
import { FileSystem } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either } from "effect"
import { join } from "node:path"
import * as NodeCliPlatform from "../src/Layers/NodeCliPlatform.js"
import * as NodeContinuationSafetyInspector from "../src/Layers/NodeContinuationSafetyInspector.js"
import { ContinuationSafetyInspector } from "../src/Services/ContinuationSafetyInspector.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import * as WorkspaceBackend from "../src/Workspace/WorkspaceBackend.js"

const host = NodeContinuationSafetyInspector.fixed(["read"], true)

// The sorted names in a folder: what "nothing was created" compares.
const names = (dir: string) => Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readDirectory(dir)).pipe(Effect.map((n) => [...n].sort()))

const tempDir = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "rr-backend-" }))

describe("WorkspaceBackend", () => {
  it.scoped("a folder without a ledger: WorkspaceNotFound for a reader and for a writer that may not create it; nothing created", () =>
    Effect.gen(function*() {
      const ws = yield* tempDir
      for (const readOnly of [true, false]) {
        const opened = yield* Effect.either(Effect.scoped(WorkspaceBackend.make({ workspace: ws, readOnly })))
        assert.isTrue(Either.isLeft(opened) && opened.left._tag === "WorkspaceNotFound", `readOnly ${readOnly}`)
      }
      assert.deepStrictEqual(yield* names(ws), [])
    }).pipe(Effect.provide(NodeCliPlatform.layer)))

  for (const store of ["sqlite", "jsonl"] as const) {
    it.scoped(`${store}: a writer that may create it opens the named store; then a reader finds it; ledger, headers, owner and inspector from one layer`, () =>
      Effect.gen(function*() {
        const ws = join(yield* tempDir, "ws")
        const created = yield* Effect.scoped(Effect.flatMap(
          WorkspaceBackend.make({ workspace: ws, store, readOnly: false, create: true }),
          (backend) =>
            backend.stores(Effect.gen(function*() {
              const runs = yield* Effect.flatMap(RuntimeEventStore, (ledger) => ledger.listRuns())
              const headers = yield* Effect.flatMap(RunHeaderStore, (h) => h.list())
              return { store: backend.store, runs, headers }
            }))
        ))
        assert.deepStrictEqual(created, { store, runs: [], headers: [] })
        const before = yield* names(ws)
        // A reader finds the store without being told, and its probe of the owner lock creates nothing.
        const found = yield* Effect.scoped(Effect.flatMap(
          WorkspaceBackend.make({ workspace: ws, readOnly: true }),
          (backend) => Effect.map(backend.ownerLive, (live) => ({ store: backend.store, live }))
        ))
        assert.deepStrictEqual(found, { store, live: false })
        assert.deepStrictEqual(yield* WorkspaceBackend.storeOf({ workspace: ws, readOnly: true }), store)
        // The layer: every service of the workspace at once.
        const services = yield* Effect.gen(function*() {
          const backend = yield* WorkspaceBackend.WorkspaceBackend
          const runs = yield* Effect.flatMap(RuntimeEventStore, (ledger) => ledger.listRuns())
          const headers = yield* Effect.flatMap(RunHeaderStore, (h) => h.list())
          const facts = yield* Effect.flatMap(ContinuationSafetyInspector, (inspector) => inspector.inspect(ws))
          return { store: backend.store, runs: runs.length, headers: headers.length, catalog: [...facts.toolCatalog] }
        }).pipe(Effect.provide(WorkspaceBackend.layer({ workspace: ws, readOnly: true, host })))
        assert.deepStrictEqual(services, { store, runs: 0, headers: 0, catalog: ["read"] })
        // SQLite may leave its own -wal and -shm (ResumeWorkspace.planWorkspace); nothing of ours is created.
        const ours = (files: ReadonlyArray<string>) => files.filter((f) => !/-(wal|shm)$/.test(f))
        assert.deepStrictEqual(ours(yield* names(ws)), ours(before), "read-only openings create nothing")
      }).pipe(Effect.provide(NodeCliPlatform.layer)))
  }

  it.scoped("postgres is named without any IO; without --pg-url or RUNTIME_RESUME_PG_URL it is StoreReadFailed naming both", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* WorkspaceBackend.storeOf({ workspace: "nowhere", store: "postgres", readOnly: true }), "postgres")
      const opened = yield* Effect.either(Effect.scoped(WorkspaceBackend.make({ workspace: "nowhere", store: "postgres", readOnly: true })))
      assert.isTrue(Either.isLeft(opened))
      if (Either.isLeft(opened)) {
        assert.strictEqual(opened.left._tag, "StoreReadFailed")
        assert.include(opened.left.message, "--pg-url")
        assert.include(opened.left.message, "RUNTIME_RESUME_PG_URL")
      }
    }).pipe(
      Effect.provide(NodeCliPlatform.layer),
      Effect.withConfigProvider(ConfigProvider.fromMap(new Map()))
    ))
})
