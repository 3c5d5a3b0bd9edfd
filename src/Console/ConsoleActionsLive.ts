// The console's actions over a workspace: THE one place where the console connects to the reconcile and resolve
// programs (spec 05, the same ones the CLI verbs run). Until they are in this build, the actions are `not_wired`.
import * as Layer from "effect/Layer"
import type { PersistentStore } from "../Layers/NodeRuntimeEventStore.js"
import type { ConsoleActions } from "./ConsoleActions.js"
import { layerUnwired } from "./ConsoleActions.js"

/** Whether the actions are connected to the programs in this build (the browser test of the buttons needs it). */
export const WIRED = false

/**
 * The actions over `options.workspace`. CONNECT HERE once `Programs/ResolveWorkspace.ts` (reconcileWorkspace,
 * resolveWorkspace) is merged: `reconcile(runId)` = `reconcileWorkspace({ workspace, store, runId })`,
 * `resolve(runId, callId, choice, actor)` = `resolveWorkspace({ workspace, store, runId, callId, choice, actor })`,
 * each typed error mapped to `ConsoleActionFailed` (its `_tag` as `reason`, its message), then set `WIRED`.
 */
export const layer = (_options: { readonly workspace: string; readonly store?: PersistentStore }): Layer.Layer<ConsoleActions> =>
  layerUnwired
