// The ContinuationSafetyInspector of a PostgreSQL workspace: the workspace identity from the workspace's own
// identity row (made by the server when the workspace was created), read again at each inspection, not from a folder
// marker; the tool catalog and background state from the host, as on Node.
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { HostFacts } from "../Domain/ContinuationPlan.js"
import {
  ContinuationSafetyInspector,
  type ContinuationSafetyInspectorService
} from "../Services/ContinuationSafetyInspector.js"
import { WorkspaceIdentityFailed } from "../Services/WorkspaceIdentity.js"
import type { HostSupplied } from "./NodeContinuationSafetyInspector.js"
import type { PgWorkspace } from "./PgWorkspace.js"

/**
 * The inspector over an opened PostgreSQL workspace: `inspect` reads the workspace's identity row (a read failure is
 * `WorkspaceIdentityFailed` naming the workspace, never the password), then the host's catalog and background state.
 *
 * @since 0.1.0
 * @category layers
 */
export const make = (ws: Pick<PgWorkspace, "readWorkspaceId" | "location">, host: HostSupplied): ContinuationSafetyInspectorService => ({
  inspect: Effect.fn("ContinuationSafetyInspector.inspect")(function*(_workspace: string) {
    const workspaceId = yield* ws.readWorkspaceId.pipe(
      Effect.mapError((error) =>
        new WorkspaceIdentityFailed({
          path: ws.location,
          cause: error.cause,
          message: `could not read the identity of PostgreSQL workspace ${ws.location}: ${error.message}`
        })
      )
    )
    const toolCatalog = yield* host.toolCatalog
    const backgroundSettled = yield* host.backgroundSettled
    const toolFingerprints = host.toolFingerprints !== undefined ? yield* host.toolFingerprints : undefined
    return new HostFacts({
      workspaceId,
      toolCatalog: Data.array([...toolCatalog]),
      ...(toolFingerprints !== undefined ? { toolFingerprints: Data.struct({ ...toolFingerprints }) } : {}),
      backgroundSettled
    })
  })
})

/**
 * The inspector over an opened PostgreSQL workspace and the host's facts.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  ws: Pick<PgWorkspace, "readWorkspaceId" | "location">,
  host: HostSupplied
): Layer.Layer<ContinuationSafetyInspector> => Layer.succeed(ContinuationSafetyInspector, make(ws, host))
