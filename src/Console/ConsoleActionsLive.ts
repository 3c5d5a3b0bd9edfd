// The console's actions over a workspace: THE one place where the console connects to the reconcile and resolve
// programs (docs/spec/05-reconciliation.md), the same ones the CLI's `reconcile` and `resolve` verbs run (`Workspace/ResolveWorkspace.ts`).
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as NodeOperator from "../Layers/NodeOperator.js"
import type { PersistentStore } from "../Layers/NodeRuntimeEventStore.js"
import { reconcileWorkspace, resolveWorkspace } from "../Workspace/ResolveWorkspace.js"
import type { NoFollowFileSystem } from "../Services/NoFollowFileSystem.js"
import type { WorkspaceLock } from "../Services/WorkspaceLock.js"
import type { WorkspaceOwner } from "../Services/WorkspaceOwner.js"
import type { ConsoleChoice } from "./ConsoleActions.js"
import { ConsoleActionFailed, ConsoleActions } from "./ConsoleActions.js"
import { reconcileNotice, resolveNotice } from "./internal/notices.js"

/**
 * Whether the actions are connected to the programs in this build (the browser test of the buttons needs it).
 *
 * @since 0.1.0
 * @category constants
 */
export const WIRED = true

const failed = (action: string) => (error: { readonly _tag: string; readonly message: string; readonly reason?: unknown }) =>
  new ConsoleActionFailed({
    action,
    reason: typeof error.reason === "string" ? `${error._tag}(${error.reason})` : error._tag,
    message: error.message
  })

const choiceOf = (choice: ConsoleChoice) =>
  choice._tag === "edit" ? { _tag: "edit" as const, result: choice.result, isError: choice.isError } : choice

/**
 * The actions over `options.workspace`: `reconcile` is `reconcileWorkspace` (the built-in file-write observation,
 * under the exclusive owner lock), `resolve` is `resolveWorkspace` with the person's name as the actor. Each says
 * what happened (`internal/notices.ts`: settled, parked, left for a person); a typed error becomes
 * `ConsoleActionFailed` (its tag and reason, its message); nothing else is done here.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: { readonly workspace: string; readonly store?: PersistentStore }): Layer.Layer<
  ConsoleActions,
  never,
  FileSystem.FileSystem | Path.Path | NoFollowFileSystem | WorkspaceLock | WorkspaceOwner
> =>
  Layer.effect(
    ConsoleActions,
    Effect.gen(function*() {
      const context = yield* Effect.context<FileSystem.FileSystem | Path.Path | NoFollowFileSystem | WorkspaceLock | WorkspaceOwner>()
      const store = options.store !== undefined ? { store: options.store } : {}
      return {
        reconcile: (runId) =>
          reconcileWorkspace({ workspace: options.workspace, runId, ...store }).pipe(
            Effect.map(({ report }) => ({ ...reconcileNotice(runId, report), report })),
            Effect.mapError(failed("reconcile")),
            Effect.provide(context)
          ),
        resolve: (runId, callId, choice, actor) =>
          resolveWorkspace({ workspace: options.workspace, runId, callId, choice: choiceOf(choice), actor, ...store }).pipe(
            Effect.map((outcome) => ({ ...resolveNotice(outcome), report: outcome })),
            Effect.mapError(failed("resolve")),
            Effect.provide(context),
            Effect.provide(NodeOperator.layer)
          )
      }
    })
  )
