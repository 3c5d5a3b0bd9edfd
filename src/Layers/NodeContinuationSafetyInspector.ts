// The Node implementation of ContinuationSafetyInspector: the workspace identity from the marker file, through
// @effect/platform FileSystem, and the tool catalog and background state the host supplies as layer parameters.
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { HostFacts } from "../Domain/ContinuationPlan.js"
import * as WorkspaceIdentity from "../Services/WorkspaceIdentity.js"
import {
  ContinuationSafetyInspector,
  type ContinuationSafetyInspectorService
} from "../Services/ContinuationSafetyInspector.js"

/**
 * What the host supplies: its tool catalog and whether its background work is settled, read at each inspection.
 *
 * @since 0.1.0
 * @category models
 */
export interface HostSupplied {
  readonly toolCatalog: Effect.Effect<ReadonlyArray<string>>
  /** The tools' fingerprints now (MCP tools: `McpToolset.catalog`), checked against those T1 recorded; optional. */
  readonly toolFingerprints?: Effect.Effect<Readonly<Record<string, string>>>
  readonly backgroundSettled: Effect.Effect<boolean>
}

/**
 * Builds the inspector over the current FileSystem and the host's facts.
 *
 * @since 0.1.0
 * @category layers
 */
export const make = (host: HostSupplied): Effect.Effect<ContinuationSafetyInspectorService, never, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const inspect = Effect.fn("ContinuationSafetyInspector.inspect")(function*(workspace: string) {
      const workspaceId = yield* WorkspaceIdentity.read(workspace).pipe(
        Effect.provideService(FileSystem.FileSystem, fs)
      )
      const toolCatalog = yield* host.toolCatalog
      const backgroundSettled = yield* host.backgroundSettled
      const toolFingerprints = host.toolFingerprints !== undefined ? yield* host.toolFingerprints : undefined
      return new HostFacts({
        ...(Option.isSome(workspaceId) ? { workspaceId: workspaceId.value } : {}),
        toolCatalog: Data.array([...toolCatalog]),
        ...(toolFingerprints !== undefined ? { toolFingerprints: Data.struct({ ...toolFingerprints }) } : {}),
        backgroundSettled
      })
    })
    return { inspect }
  })

/**
 * The inspector over the FileSystem of the context.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (host: HostSupplied): Layer.Layer<ContinuationSafetyInspector, never, FileSystem.FileSystem> =>
  Layer.effect(ContinuationSafetyInspector, make(host))

/**
 * The inspector over Node's filesystem.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerNode = (host: HostSupplied): Layer.Layer<ContinuationSafetyInspector> =>
  layer(host).pipe(Layer.provide(NodeFileSystem.layer))

/**
 * A fixed catalog and background state, for hosts whose facts do not change while they run (and for tests).
 *
 * @since 0.1.0
 * @category layers
 */
export const fixed = (toolCatalog: ReadonlyArray<string>, backgroundSettled: boolean): HostSupplied => ({
  toolCatalog: Effect.succeed(toolCatalog),
  backgroundSettled: Effect.succeed(backgroundSettled)
})
