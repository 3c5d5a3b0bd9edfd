// A host process for the multi-host PostgreSQL tests: its own pool against the shared server. It appends, claims or
// dies inside a transaction as told (argv[2], JSON), and reports every outcome as one line on stdout.
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { existsSync, readdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { reasonsOf } from "../../src/Domain/ContinuationPlan.js"
import * as NodeContinuationSafetyInspector from "../../src/Layers/NodeContinuationSafetyInspector.js"
import * as PgContinuationSafetyInspector from "../../src/Layers/PgContinuationSafetyInspector.js"
import * as ContinuationExecutor from "../../src/Programs/ContinuationExecutor.js"
import { ModelProvider, ProviderReply } from "../../src/Services/ModelProvider.js"
import { RunHeaderStore } from "../../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../../src/Services/RuntimeEventStore.js"
import { WorkspaceOwner } from "../../src/Services/WorkspaceOwner.js"
import { ModelText } from "../../src/Domain/RuntimeEvent.js"
import { RunHeader } from "../../src/Domain/RunHeader.js"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeNoFollowFileSystem from "../../src/Layers/NodeNoFollowFileSystem.js"
import * as FileWriteTool from "../../src/Programs/FileWriteTool.js"
import * as ToolRuntime from "../../src/Programs/ToolRuntime.js"
import { RunId } from "../../src/Domain/Ids.js"
import { UserMessage } from "../../src/Domain/RuntimeEvent.js"
import * as EventBuilder from "../../src/Domain/Rules/EventBuilder.js"
import { PgWorkspace } from "../../src/Postgres.js"
import * as Failpoints from "../../src/Services/Failpoints.js"
import { claimFor } from "./pgClaims.js"

interface Order {
  readonly mode: "append" | "claim" | "resume" | "file-write" | "kill-inside" | "hold"
  readonly url: string
  readonly workspace: string
  readonly host: string
  readonly own?: ReadonlyArray<string>
  readonly shared?: string
  readonly count?: number
  readonly rounds?: number
  readonly go?: string
  readonly deadlineMs?: number
  /** resume: the folder of the round barrier, and how many hosts meet there. */
  readonly dir?: string
  readonly hosts?: number
  /** file-write: the root of the write_file tool; the run is `shared`, its call `call-1`, stopped after the rename. */
  readonly root?: string
}

const order = JSON.parse(process.argv[2]!) as Order
const say = (line: string) => Effect.sync(() => void process.stdout.write(`${line}\n`))

const program = Effect.gen(function*() {
  const ws = yield* PgWorkspace.make({
    url: Redacted.make(order.url),
    workspace: order.workspace,
    maxConnections: 2,
    connectTimeout: "3 seconds",
    operationTimeout: "5 seconds"
  })
  yield* say("ready")
  while (order.go !== undefined && !existsSync(order.go)) yield* Effect.sleep("5 millis")
  if (order.mode === "append") {
    const own = order.own ?? []
    for (const runId of own) {
      const b = EventBuilder.make(runId)
      yield* ws.store.append(RunId.make(runId), [b.opened()])
    }
    const started = Date.now()
    let acked = 0
    for (let i = 0; acked < (order.count ?? 0) && Date.now() - started < (order.deadlineMs ?? 60_000); i++) {
      const runId = i % 2 === 0 && order.shared !== undefined ? order.shared : own[i % Math.max(1, own.length)] ?? order.shared!
      const b = EventBuilder.make(runId)
      const id = `${order.host}:${i}`
      const result = yield* Effect.either(ws.store.append(RunId.make(runId), [b.custom(new UserMessage({ text: `${id} says hi` }), { id })]))
      if (Either.isRight(result)) {
        acked++
        yield* say(`ack ${runId} ${id} ${result.right[0]!.seq}`)
      } else {
        yield* say(`fail ${result.left._tag} ${runId} ${id}`)
        yield* Effect.sleep("100 millis")
      }
    }
    yield* say("done")
  } else if (order.mode === "claim") {
    for (let round = 1; round <= (order.rounds ?? 0); round++) {
      const { claim, header } = claimFor(`claim-${order.host}-${round}`, `run-${order.host}-${round}`, round)
      const result = yield* Effect.either(ws.headers.claim(claim, header))
      if (Either.isRight(result)) {
        // Only the winner of a round calls the provider (here: says so) and records its continuation.
        yield* say(`provider ${round}`)
        yield* ws.headers.setStatus(header.runId, "running", { at: 3000 })
      } else {
        yield* say(`lost ${round} ${result.left._tag}`)
      }
    }
    yield* say("done")
  } else if (order.mode === "resume") {
    // The continuation race through the real ContinuationExecutor: every round, all hosts meet at a barrier, then each
    // plans and executes a continuation of the same sealed run (src-<round>). Odd rounds take the exclusive owner lock
    // (`execute`); even rounds skip it (`executeHoldingLock`), so the claim's unique index alone decides. The provider
    // prints one line per call, before it answers.
    const provider = ModelProvider.of({
      respond: (request) =>
        Effect.as(say(`provider ${request.source.runId}`), new ProviderReply({ items: [new ModelText({ text: `from ${order.host}` })] }))
    })
    const inspector = PgContinuationSafetyInspector.layer(ws, NodeContinuationSafetyInspector.fixed(["read"], true))
    for (let round = 1; round <= (order.rounds ?? 0); round++) {
      writeFileSync(join(order.dir!, `ready-${round}-${order.host}`), "")
      while (readdirSync(order.dir!).filter((n) => n.startsWith(`ready-${round}-`)).length < order.hosts!) yield* Effect.sleep("2 millis")
      const runId = `src-${round}`
      const result = yield* Effect.either(Effect.gen(function*() {
        const prepared = yield* ContinuationExecutor.prepare(order.workspace, runId, { confirmed: true })
        if (prepared.plan._tag !== "Continue") return `parked ${reasonsOf(prepared.plan).join(",")}`
        const outcome = round % 2 === 1
          ? yield* ContinuationExecutor.execute(order.workspace, prepared, { confirmed: true })
          : yield* ContinuationExecutor.executeHoldingLock(order.workspace, prepared, { confirmed: true })
        return outcome._tag === "Continued" ? `won ${outcome.continuationRunId}` : `not ${outcome.reason}`
      }).pipe(
        Effect.provideService(RuntimeEventStore, ws.store),
        Effect.provideService(RunHeaderStore, ws.headers),
        Effect.provideService(WorkspaceOwner, ws.owner),
        Effect.provideService(ModelProvider, provider),
        Effect.provide(inspector)
      ))
      yield* say(`round ${round} ${Either.isRight(result) ? result.right : `lost ${result.left._tag}`}`)
    }
    yield* say("done")
  } else if (order.mode === "file-write") {
    // A managed run (its header names this workspace's identity) runs one write_file call through ToolRuntime and
    // stops after the rename (the file is written, its result is not): it says so and waits to be SIGKILLed.
    const runId = order.shared!
    const b = EventBuilder.make(runId, 0)
    yield* ws.headers.create(new RunHeader({
      runId: b.runId,
      sessionId: b.ids.sessionId as RunHeader["sessionId"],
      invocationId: b.ids.invocationId as RunHeader["invocationId"],
      turnId: b.ids.turnId as RunHeader["turnId"],
      status: "running",
      workspaceId: ws.workspaceId,
      createdAt: 0,
      updatedAt: 0
    }))
    yield* ws.store.append(b.runId, [b.opened("t1_after_preflight_v1"), b.user("write the notes")])
    const failpoints = Failpoints.layerAt("in_implementation", (site) =>
      site.label === FileWriteTool.FAILPOINT_AFTER_RENAME ? Effect.zipRight(say("at after_rename"), Effect.never) : Effect.void)
    yield* ToolRuntime.run(b.runId, b.call("call-1", "write_file", { path: "notes.txt", content: "after" }), {
      tools: [FileWriteTool.fileWriteTool({ root: order.root! })]
    }).pipe(
      Effect.provide(failpoints),
      Effect.provideService(RuntimeEventStore, ws.store),
      Effect.provide(Layer.merge(NodeContext.layer, NodeNoFollowFileSystem.layer))
    )
    yield* say("finished without stopping")
  } else if (order.mode === "kill-inside") {
    // Holds the owner lock shared as a host does, then dies inside a T2 transaction.
    yield* ws.owner.acquire(order.workspace, "shared")
    const runId = order.shared!
    const b = EventBuilder.make(runId)
    yield* ws.store.append(RunId.make(runId), [b.opened("t1_after_preflight_v1")])
    yield* ws.store.appendDispatch(RunId.make(runId), { call: b.call("c1", "Bash", { x: 1 }), dispatch: b.dispatched("c1", "Bash", { x: 1 }) })
    yield* ws.store.appendOutcome(RunId.make(runId), b.response("c1", "Bash", "ok", { operationBound: true })).pipe(
      Effect.provide(Failpoints.layerAt("inside_t2", () => Effect.zipRight(say("inside"), Effect.never)))
    )
  } else {
    yield* ws.owner.acquire(order.workspace, "shared")
    yield* say("held")
    yield* Effect.never
  }
})

Effect.runPromise(Effect.scoped(program).pipe(Effect.provide(Layer.empty))).then(
  () => process.exit(0),
  (e) => {
    process.stdout.write(`error ${String(e?._tag ?? e)}\n`)
    process.exit(3)
  }
)
