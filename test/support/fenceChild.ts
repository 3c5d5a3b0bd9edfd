// A child process of the fencing tests (test/Fencing.test.ts): a live host, or a racing repair, on one workspace of
// any store. It reads commands from stdin, one a line, and reports each outcome as one line on stdout:
// - host: `round R [keepaliveMs]` starts a host (HostStartup: repair under exclusive, then the owner lock shared), creates the
//   managed run `run-R` (a `running` header and its RunOpened) and says `ready R`, then appends one event at a time,
//   saying `ack R <eventId> <seq>` for each acknowledgement, until `stop R` (then `done R`) or a refusal: `fail R <tag>`
//   (the host stops the turn, as docs/stores.md "Fencing" says). A server outage (StoreWriteFailed or StoreReadFailed on
//   PostgreSQL) is retried with the same event, as a host would.
// - repair: `repair R` runs `runtime-resume repair`'s program (the exclusive owner lock, then StartupRepair) and says
//   `repaired R <report JSON>` or `rfail R <tag>`.
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { createInterface } from "node:readline"
import * as NodeWorkspaceLock from "../../src/Layers/NodeWorkspaceLock.js"
import * as NodeWorkspaceOwner from "../../src/Layers/NodeWorkspaceOwner.js"
import { PgWorkspace } from "../../src/Postgres.js"
import * as EventBuilder from "../../src/Domain/Rules/EventBuilder.js"
import * as HostStartup from "../../src/Programs/HostStartup.js"
import * as StartupRepair from "../../src/Programs/StartupRepair.js"
import { RunHeaderStore } from "../../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../../src/Services/RuntimeEventStore.js"
import { WorkspaceOwner } from "../../src/Services/WorkspaceOwner.js"
import { layerWorkspaceStores, repairWorkspace } from "../../src/Workspace/RepairWorkspace.js"
import { OwnerKeepaliveMs } from "../../src/Layers/PgWorkspaceOwner.js"
import { headerOf } from "./runHeaders.js"

interface Order {
  readonly role: "host" | "repair"
  readonly store: "postgres" | "sqlite" | "jsonl"
  /** A folder (sqlite, jsonl) or a workspace name (postgres). */
  readonly workspace: string
  readonly url?: string
  /** Pause between two appends of the host. */
  readonly paceMs?: number
}

const order = JSON.parse(process.argv[2]!) as Order
const say = (line: string) => Effect.sync(() => void process.stdout.write(`${line}\n`))

// Commands as they come; `next` waits for the next one.
const queue: Array<string> = []
const waiting: Array<(line: string) => void> = []
createInterface({ input: process.stdin }).on("line", (line) => {
  const w = waiting.shift()
  if (w !== undefined) w(line)
  else queue.push(line)
}).on("close", () => process.exit(0))
const next = Effect.async<string>((resume) => {
  const line = queue.shift()
  if (line !== undefined) resume(Effect.succeed(line))
  else waiting.push((l) => resume(Effect.succeed(l)))
})
const stops = new Set<string>()

const pg = order.store === "postgres"
  ? Layer.unwrapScoped(Effect.map(
    PgWorkspace.make({
      url: Redacted.make(order.url!),
      workspace: order.workspace,
      maxConnections: 3,
      connectTimeout: "2 seconds",
      operationTimeout: "3 seconds"
    }),
    (ws) =>
      Layer.mergeAll(
        Layer.succeed(RuntimeEventStore, ws.store),
        Layer.succeed(RunHeaderStore, ws.headers),
        Layer.succeed(WorkspaceOwner, ws.owner)
      )
  ))
  : undefined

// The stores and the owner of one round (a host's life, or one repair).
const layerOf = () =>
  pg !== undefined
    ? pg
    : Layer.mergeAll(
      layerWorkspaceStores(order.store as "sqlite" | "jsonl", { workspace: order.workspace, readOnly: false }),
      NodeWorkspaceOwner.layerNode
    ).pipe(Layer.provide(NodeWorkspaceLock.layerNode), Layer.provide(NodeContext.layer))

const outage = (tag: string) => pg !== undefined && (tag === "StoreWriteFailed" || tag === "StoreReadFailed")

const host = (r: string, keepaliveMs: number) =>
  Effect.gen(function*() {
    yield* HostStartup.start(order.workspace, { repair: StartupRepair.repair })
    const store = yield* RuntimeEventStore
    const headers = yield* RunHeaderStore
    const b = EventBuilder.make(`run-${r}`)
    yield* headers.create(headerOf(b))
    yield* store.append(b.runId, [b.opened()])
    yield* say(`ready ${r}`)
    for (let i = 0; !stops.has(r); i++) {
      const event = b.user(`m${i}`)
      for (;;) {
        const result = yield* Effect.either(store.append(b.runId, [event]))
        if (Either.isRight(result)) {
          yield* say(`ack ${r} ${event.id} ${result.right[0]!.seq}`)
          break
        }
        if (outage(result.left._tag) && !stops.has(r)) {
          yield* Effect.sleep("100 millis")
          continue
        }
        return yield* say(`fail ${r} ${result.left._tag}`)
      }
      yield* Effect.sleep(order.paceMs ?? 2)
    }
    yield* say(`done ${r}`)
  }).pipe(
    Effect.scoped,
    Effect.provide(layerOf()),
    Effect.provideService(OwnerKeepaliveMs, keepaliveMs),
    Effect.catchAll((error) => say(`fail ${r} start:${(error as { _tag?: string })._tag ?? String(error)}`))
  )

const repair = (r: string) =>
  (pg !== undefined
    ? Effect.flatMap(WorkspaceOwner, (owner) => owner.withExclusive(order.workspace, StartupRepair.repair)).pipe(Effect.provide(pg))
    : Effect.map(
      repairWorkspace({ workspace: order.workspace, store: order.store as "sqlite" | "jsonl" }).pipe(
        Effect.provide(NodeWorkspaceOwner.layerNode),
        Effect.provide(NodeWorkspaceLock.layerNode),
        Effect.provide(NodeContext.layer)
      ),
      (outcome) => outcome.report
    )).pipe(
      Effect.matchEffect({
        onSuccess: (report) =>
          say(`repaired ${r} ${JSON.stringify({ repaired: report.repaired.map((x) => ({ runId: x.runId, action: x.action, terminatedSeq: x.terminatedSeq })) })}`),
        onFailure: (error) => say(`rfail ${r} ${(error as { _tag?: string })._tag ?? String(error)}`)
      })
    )

const program = Effect.gen(function*() {
  yield* say("ready")
  for (;;) {
    const line = yield* next
    const [verb, r, keepalive] = line.split(" ") as [string, string, string | undefined]
    if (verb === "round") yield* Effect.fork(host(r, Number(keepalive ?? 500)))
    else if (verb === "stop") stops.add(r)
    else if (verb === "repair") yield* repair(r)
    else if (verb === "exit") return
  }
})

Effect.runPromise(program).then(() => process.exit(0), (error) => {
  process.stderr.write(`${String(error)}\n`)
  process.exit(1)
})
