// The file-write crash child (docs/spec/05-reconciliation.md): runs one write_file call through ToolRuntime on a real store and, at the
// implementation's labelled failpoint (before or after the rename), prints "at <point>" and waits to be SIGKILLed.
// Usage: node --import tsx harness/FileWriteChild.ts <sqlite|jsonl> <workspace> <root> <before_rename|after_rename> [managed]
// With `managed`, the run gets a run header (as a host creates one) in the workspace, with its identity marker.
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { resolve } from "node:path"
import { fileURLToPath } from "node:url"
import * as NodeNoFollowFileSystem from "../src/Layers/NodeNoFollowFileSystem.js"
import { RunHeader } from "../src/Domain/RunHeader.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { layerHeaders } from "../src/Workspace/RepairWorkspace.js"
import * as WorkspaceIdentity from "../src/Services/WorkspaceIdentity.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import * as FileWriteTool from "../src/Programs/FileWriteTool.js"
import * as ToolRuntime from "../src/Programs/ToolRuntime.js"
import * as Failpoints from "../src/Services/Failpoints.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { HarnessStore, storeLayer } from "./Child.js"

/** This script's path, for the parent to spawn. */
export const CHILD_PATH = fileURLToPath(import.meta.url)
/** The run the child writes. */
export const CHILD_RUN = "file-write-run"
/** Where the child stops: the implementation's failpoint before or after its rename. */
export const KillPoint = Schema.Literal("before_rename", "after_rename")

const child = (store: HarnessStore, workspace: string, root: string, point: typeof KillPoint.Type, managed: boolean) =>
  Effect.gen(function*() {
    const ledger = yield* storeLayer(store, { workspace, readOnly: false }).pipe(Layer.build, Effect.map(Context.get(RuntimeEventStore)))
    const b = EventBuilder.make(CHILD_RUN, 0)
    if (managed) {
      const workspaceId = yield* WorkspaceIdentity.ensure(workspace)
      const headers = yield* layerHeaders(store, { workspace, readOnly: false }).pipe(Layer.build, Effect.map(Context.get(RunHeaderStore)))
      yield* headers.create(new RunHeader({
        runId: b.runId,
        sessionId: b.ids.sessionId as RunHeader["sessionId"],
        invocationId: b.ids.invocationId as RunHeader["invocationId"],
        turnId: b.ids.turnId as RunHeader["turnId"],
        status: "running",
        workspaceId,
        createdAt: 0,
        updatedAt: 0
      }))
    }
    yield* ledger.append(b.runId, [b.opened("t1_after_preflight_v1"), b.user("write the notes")])
    const label = point === "before_rename" ? FileWriteTool.FAILPOINT_BEFORE_RENAME : FileWriteTool.FAILPOINT_AFTER_RENAME
    const failpoints = Failpoints.layerAt("in_implementation", (site) =>
      site.label === label ? Effect.zipRight(Effect.sync(() => process.stdout.write(`at ${point}\n`)), Effect.never) : Effect.void)
    yield* ToolRuntime.run(b.runId, b.call("call-1", "write_file", { path: "notes.txt", content: "after" }), {
      tools: [FileWriteTool.fileWriteTool({ root })]
    }).pipe(Effect.provide(failpoints), Effect.provideService(RuntimeEventStore, ledger))
    process.stdout.write("finished without stopping\n")
  }).pipe(Effect.scoped)

if (process.argv[1] !== undefined && resolve(process.argv[1]) === CHILD_PATH) {
  const args = Schema.Tuple([HarnessStore, Schema.String, Schema.String, KillPoint], Schema.Literal("managed"))
  const main = Schema.decodeUnknown(args)(process.argv.slice(2)).pipe(
    Effect.flatMap(([store, workspace, root, point, ...rest]) => child(store, workspace, root, point, rest.length > 0)),
    Effect.provide(Layer.merge(NodeContext.layer, NodeNoFollowFileSystem.layer)),
    Effect.tapErrorCause((cause) => Effect.sync(() => process.stderr.write(`${Cause.pretty(cause)}\n`)))
  )
  NodeRuntime.runMain(main, { disableErrorReporting: true })
}
