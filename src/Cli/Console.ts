// The `console` verb (issue 17): serves the recovery console of a workspace on 127.0.0.1 and prints its URL (with a
// fresh token) on stdout. It runs until Ctrl-C (then exit 2, as every interrupted verb); no ledger in the folder: exit 2.
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { optionalWorkspace, printErr, printOut, setExitCode, storeOption } from "./internal/common.js"

/** `console [--store S] [--port N] [WS]`. */
export const consoleCommand = Command.make("console", {
  store: storeOption,
  port: Options.integer("port").pipe(Options.withDescription("the port on 127.0.0.1 (default: a free one)"), Options.optional),
  workspace: optionalWorkspace
}, (args) =>
  Effect.gen(function*() {
    const Server = yield* Effect.promise(() => import("../Console/ConsoleServer.js"))
    const Actions = yield* Effect.promise(() => import("../Console/ConsoleActionsLive.js"))
    const Stores = yield* Effect.promise(() => import("../Layers/NodeRuntimeEventStore.js"))
    const NoFollow = yield* Effect.promise(() => import("../Layers/NodeNoFollowFileSystem.js"))
    // Fail early (exit 2) when the workspace holds no ledger, or two.
    const found = yield* Effect.either(Stores.detectStore(args.workspace, Option.getOrUndefined(args.store)))
    if (found._tag === "Left") {
      yield* setExitCode(2)
      return yield* printErr(`${found.left._tag}: ${found.left.message}`)
    }
    const layer = Server.layerNode({
      workspace: args.workspace,
      store: found.right,
      ...(Option.isSome(args.port) ? { port: args.port.value } : {})
    }).pipe(Layer.provide(Actions.layer({ workspace: args.workspace, store: found.right }).pipe(Layer.provide(NoFollow.layer))))
    yield* Effect.scoped(Effect.gen(function*() {
      const context = yield* Layer.build(layer)
      const info = yield* Effect.provide(Server.Console, context)
      yield* printOut(`${info.url}\n`)
      yield* printErr("runtime-resume console: serving on 127.0.0.1 only; Ctrl-C stops it")
      return yield* Effect.never
    }))
  })).pipe(Command.withDescription(
    "Serves the recovery console of a workspace in the browser (127.0.0.1 only): every run with its plan, a run's " +
      "timeline, and buttons to reconcile a run or resolve an operation. Prints one URL carrying a fresh token; " +
      "runs until Ctrl-C."
  ))
