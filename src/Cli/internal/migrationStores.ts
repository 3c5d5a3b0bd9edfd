// The stores of `export` and `import` (docs/wire-format.md, "Export file"): the workspace's ledger AND its run header
// store, with the workspace's identity (what an imported header is restored in), on SQLite, JSONL or PostgreSQL.
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { RunHeaderStore } from "../../Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../../Services/RuntimeEventStore.js"
import { pgServerUrl, type StoreSlot } from "./common.js"

/**
 * Runs `use` over the workspace's ledger and run header store (as `withStore` resolves the ledger, recording it in
 * `slot`), handing it the effect that reads the workspace's identity: on PostgreSQL its identity row, on SQLite and
 * JSONL its `workspace-id` marker, created when missing (only a writer reads it, after its checks).
 */
export const withLedgerAndHeaders = <A, E, R>(
  slot: StoreSlot,
  options: { readonly workspace: string; readonly readOnly: boolean; readonly importing?: boolean },
  use: (workspaceId: Effect.Effect<string, { readonly _tag: string; readonly message: string }, FileSystem.FileSystem>) => Effect.Effect<A, E, R>
) =>
  Effect.gen(function*() {
    if (slot.store === "postgres") {
      const url = yield* pgServerUrl(slot)
      const Pg = yield* Effect.promise(() => import("../../Layers/PgWorkspace.js"))
      return yield* Effect.scoped(Effect.gen(function*() {
        const ws = yield* Pg.make({ url, workspace: options.workspace, readOnly: options.readOnly })
        return yield* use(ws.readWorkspaceId).pipe(
          Effect.provideService(RuntimeEventStore, ws.store),
          Effect.provideService(RunHeaderStore, ws.headers)
        )
      }))
    }
    const Stores = yield* Effect.promise(() => import("../../Layers/NodeRuntimeEventStore.js"))
    const store = yield* Stores.resolveStore({ ...options, ...(slot.store !== null ? { store: slot.store } : {}) })
    slot.store = store
    const headerLayer = store === "sqlite"
      ? (yield* Effect.promise(() => import("../../Layers/SqliteRunHeaderStore.js"))).layer({ workspace: options.workspace, readOnly: options.readOnly })
      : (yield* Effect.promise(() => import("../../Layers/JsonlRunHeaderStore.js"))).layer({ workspace: options.workspace, readOnly: options.readOnly })
    const Identity = yield* Effect.promise(() => import("../../Services/WorkspaceIdentity.js"))
    // The ledger first (a writer creates it), then the header store over the same folder.
    const layer = headerLayer.pipe(Layer.provideMerge(Stores.layerStore(store, options)))
    return yield* Effect.provide(use(Identity.ensure(options.workspace)), layer)
  })
