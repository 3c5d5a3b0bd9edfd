// The workspace backend of a workspace inside PostgreSQL (docs/stores.md): WorkspaceBackend.ts loads this module
// only when one is opened, so the verbs on a folder never load the PostgreSQL client.
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as PgContinuationSafetyInspector from "../../Layers/PgContinuationSafetyInspector.js"
import * as PgWorkspace from "../../Layers/PgWorkspace.js"
import { RunHeaderStore } from "../../Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../../Services/RuntimeEventStore.js"
import type { BackendError, WorkspaceBackendOptions, WorkspaceBackendService } from "../WorkspaceBackend.js"
import { pgServerUrl } from "../WorkspaceBackend.js"
import { lockedBySomeone } from "./ownerProbe.js"

/**
 * A workspace inside PostgreSQL over one pool, closed with the scope. A writer that may not create it first checks,
 * read-only, that it exists: a missing one is `WorkspaceNotFound` and nothing is created.
 *
 * @since 0.1.0
 * @category workspace
 */
export const makePg = (options: WorkspaceBackendOptions): Effect.Effect<WorkspaceBackendService, BackendError, Scope.Scope> =>
  Effect.gen(function*() {
    const url = yield* pgServerUrl(options.pgUrl)
    const workspace = options.workspace
    if (!options.readOnly && options.create !== true) yield* Effect.scoped(PgWorkspace.make({ url, workspace, readOnly: true }))
    const ws = yield* PgWorkspace.make({ url, workspace, readOnly: options.readOnly })
    const both = Context.make(RuntimeEventStore, ws.store).pipe(Context.add(RunHeaderStore, ws.headers))
    return {
      workspace,
      store: "postgres",
      owner: ws.owner,
      ledger: (effect) => Effect.provideService(effect, RuntimeEventStore, ws.store),
      storesLayer: () => Layer.succeedContext(both),
      stores: (effect) => Effect.provide(effect, both),
      headers: (effect) => Effect.provideService(effect, RunHeaderStore, ws.headers),
      workspaceId: ws.readWorkspaceId,
      inspector: (host) => PgContinuationSafetyInspector.layer(ws, host),
      ownerLive: Effect.orElseSucceed(lockedBySomeone(ws.owner, workspace), () => false)
    } satisfies WorkspaceBackendService
  })
