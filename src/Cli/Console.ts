// The `console` verb (docs/spec/06-cli.md, "The recovery console"): serves the recovery console of a workspace on 127.0.0.1 and prints its URL (with a
// fresh token) on stdout. It runs until Ctrl-C (then exit 2, as every interrupted verb); no ledger in the folder: exit 2.
import * as Command from "@effect/cli/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Actions from "../Console/ConsoleActionsLive.js"
import * as Server from "../Console/ConsoleServer.js"
import * as NoFollow from "../Layers/NodeNoFollowFileSystem.js"
import * as Stores from "../Layers/NodeRuntimeEventStore.js"
import type { PersistentStore } from "../Layers/NodeRuntimeEventStore.js"
import { printErr, printOut, setExitCode } from "./internal/common.js"
import { currentInvocation } from "./internal/nextCommand.js"
import { consoleOptions, CONSOLE_HELP } from "./internal/verbOptions.js"

/**
 * `console [--store S] [--port N] [WS]`.
 *
 * @since 0.1.0
 * @category cli
 */
export const consoleCommand = Command.make("console", consoleOptions, (args) =>
  Effect.gen(function*() {
    // Fail early (exit 2) when the workspace holds no ledger, or two. A folder that holds no ledger but workspaces
    // (what `demo --keep DIR` leaves: story-C, story-D) gets one console per workspace, each its own URL.
    const found = yield* Effect.either(Stores.detectStore(args.workspace, Option.getOrUndefined(args.store)))
    let targets: ReadonlyArray<{ readonly name: string; readonly workspace: string; readonly store: PersistentStore }>
    if (found._tag === "Right") {
      targets = [{ name: "", workspace: args.workspace, store: found.right }]
    } else {
      const fs = yield* FileSystem.FileSystem
      const entries = found.left._tag === "WorkspaceNotFound"
        ? yield* fs.readDirectory(args.workspace).pipe(Effect.orElseSucceed(() => [] as Array<string>))
        : []
      const inner: Array<{ name: string; workspace: string; store: PersistentStore }> = []
      for (const name of [...entries].sort()) {
        const workspace = `${args.workspace.replace(/\/+$/, "")}/${name}`
        const info = yield* fs.stat(workspace).pipe(Effect.option)
        if (Option.isNone(info) || info.value.type !== "Directory") continue
        const store = yield* Effect.either(Stores.detectStore(workspace, Option.getOrUndefined(args.store)))
        if (store._tag === "Right") inner.push({ name, workspace, store: store.right })
      }
      if (inner.length === 0) {
        yield* setExitCode(2)
        return yield* printErr(`${found.left._tag}: ${found.left.message}`)
      }
      if (Option.isSome(args.port) && inner.length > 1) {
        yield* setExitCode(2)
        return yield* printErr(
          `${args.workspace} holds ${inner.length} workspaces (${inner.map((t) => t.name).join(", ")}): --port serves one; ` +
            `run runtime-resume console ${inner[0]!.workspace} (and the others) instead`
        )
      }
      targets = inner
    }
    // The pages print each next command as this person invoked the tool (npx or not), with the --store given.
    const prefix = yield* currentInvocation
    const storeArgs = Option.isSome(args.store) ? ["--store", args.store.value] : []
    yield* Effect.scoped(Effect.gen(function*() {
      for (const target of targets) {
        const layer = Server.layerNode({
          workspace: target.workspace,
          store: target.store,
          invocation: { prefix, storeArgs },
          ...(Option.isSome(args.port) ? { port: args.port.value } : {})
        }).pipe(Layer.provide(Actions.layer({ workspace: target.workspace, store: target.store }).pipe(Layer.provide(NoFollow.layer))))
        const context = yield* Layer.build(layer)
        const info = yield* Effect.provide(Server.Console, context)
        // One workspace: its URL alone (scripts read the first line); several: "<url> <folder>" per workspace.
        yield* printOut(target.name === "" ? `${info.url}\n` : `${info.url} ${target.name}\n`)
      }
      yield* printErr(
        targets.length === 1
          ? "runtime-resume console: serving on 127.0.0.1 only; Ctrl-C stops it"
          : `runtime-resume console: ${targets.length} workspaces of ${args.workspace}, each at its URL above, on 127.0.0.1 only; Ctrl-C stops them`
      )
      return yield* Effect.never
    }))
  })).pipe(Command.withDescription(CONSOLE_HELP))
