// The Node platform the `runtime-resume` CLI runs on: Node's context with the ledger FileSystem (synchronous file
// writes and fsync) in place of NodeFileSystem, the workspace lock, and the workspace owner lock over it (docs/spec/04-continuation.md:
// repair and execution take it exclusively). bin/cli.ts provides it; so do the harness and bench children that run
// the CLI's verbs in process, so they run what the CLI runs.
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Layer from "effect/Layer"
import * as NodeLedgerFileSystem from "./NodeLedgerFileSystem.js"
import * as NodeWorkspaceLock from "./NodeWorkspaceLock.js"
import * as NodeWorkspaceOwner from "./NodeWorkspaceOwner.js"

/**
 * Node's platform services, the ledger FileSystem, the workspace lock and the workspace owner lock: the CLI's layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = Layer.mergeAll(
  NodeContext.layer,
  NodeLedgerFileSystem.layer,
  NodeWorkspaceLock.layerNode,
  NodeWorkspaceOwner.layer.pipe(Layer.provide(NodeWorkspaceLock.layerNode), Layer.provide(NodeLedgerFileSystem.layer))
)
