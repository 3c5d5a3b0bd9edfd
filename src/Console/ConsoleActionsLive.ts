// The console's actions over a workspace: THE one place where the console connects to the reconcile and resolve
// programs (spec 05), the same ones the CLI's `reconcile` and `resolve` verbs run (`Programs/ResolveWorkspace.ts`).
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import type * as Layer from "effect/Layer"
import type { PersistentStore } from "../Layers/NodeRuntimeEventStore.js"
import type { NoFollowFileSystem } from "../Services/NoFollowFileSystem.js"
import type { WorkspaceLock } from "../Services/WorkspaceLock.js"
import type { WorkspaceOwner } from "../Services/WorkspaceOwner.js"
import type { ConsoleActions } from "./ConsoleActions.js"
import { layerUnwired } from "./ConsoleActions.js"

/** Whether the actions are connected to the programs in this build (the browser tests of the buttons need it). */
export const WIRED: boolean = false

/**
 * The actions over `options.workspace`. NOT CONNECTED YET: the reconcile/resolve programs (branch i-settle) are not in
 * this build, so every action fails with `not_wired` and writes nothing. CONNECT HERE: docs/console-actions-wiring.patch
 * replaces this file with `reconcile` = `reconcileWorkspace`, `resolve` = `resolveWorkspace` (checked against i-settle
 * 2909a40: the three browser tests pass with it). It already asks for what those programs need.
 */
export const layer = (_options: { readonly workspace: string; readonly store?: PersistentStore }): Layer.Layer<
  ConsoleActions,
  never,
  FileSystem.FileSystem | Path.Path | NoFollowFileSystem | WorkspaceLock | WorkspaceOwner
> => layerUnwired
