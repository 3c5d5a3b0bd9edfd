// `resume --store postgres` through the real executable against the test server: an interrupted managed run is
// repaired, planned and continued exactly as on SQLite (same plans, reasons, outcomes and exit codes), the workspace
// identity taken from the PostgreSQL workspace's identity row (no folder marker), and the password never printed.
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { RunHeader } from "../src/Domain/RunHeader.js"
import type { RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as PgWorkspace from "../src/Layers/PgWorkspace.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { MARKER_FILE_NAME } from "../src/Services/WorkspaceIdentity.js"
import { layerWorkspaceStores } from "../src/Workspace/RepairWorkspace.js"
import { pgUrl } from "./support/pg.js"

const bin = fileURLToPath(new URL("../bin/runtime-resume", import.meta.url))
const T1 = "t1_after_preflight_v1"
const FOREIGN_ID = "00000000-0000-4000-8000-000000000000"

interface Ran {
  readonly args: ReadonlyArray<string>
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

// The real executable, with the test server in RUNTIME_RESUME_PG_URL and the continuation flag unset.
const cli = (args: ReadonlyArray<string>, env: Record<string, string | undefined> = {}) =>
  Effect.async<Ran>((resume) => {
    execFile(
      "node",
      [bin, ...args],
      { env: { ...process.env, MAKA_RUNTIME_SAFE_BOUNDARY_RESUME: "", RUNTIME_RESUME_PG_URL: Redacted.value(pgUrl()), ...env } },
      (error, stdout, stderr) =>
        resume(Effect.succeed({ args, code: error === null ? 0 : typeof error.code === "number" ? error.code : -1, stdout, stderr }))
    )
  })

const ids = (name: string): EventBuilder.RunIds => ({ sessionId: "sess-1", invocationId: `inv-${name}`, runId: name, turnId: `turn-${name}` })

// An interrupted managed run (its tool call answered, no terminal event, header running) and a sealed run of another
// workspace (its header names another identity).
const seedRuns = (): ReadonlyArray<{ name: string; events: ReadonlyArray<RuntimeEvent>; header: (workspaceId: string) => RunHeader }> => {
  const done = EventBuilder.make(ids("done"))
  const foreign = EventBuilder.make(ids("foreign"))
  const header = (name: string, workspaceId: string) => {
    const i = ids(name)
    return new RunHeader({
      runId: i.runId as RunHeader["runId"],
      sessionId: i.sessionId as RunHeader["sessionId"],
      invocationId: i.invocationId as RunHeader["invocationId"],
      turnId: i.turnId as RunHeader["turnId"],
      status: "running",
      workspaceId,
      createdAt: 1,
      updatedAt: 1
    })
  }
  return [
    {
      name: "foreign",
      events: [foreign.opened(T1), foreign.user("elsewhere"), foreign.model("ok"), foreign.terminated("failed", "process_interrupted")],
      header: () => header("foreign", FOREIGN_ID)
    },
    {
      name: "done",
      events: [
        done.opened(T1),
        done.user("list the files"),
        done.call("c1", "read", { path: "a" }),
        done.dispatched("c1", "read", { path: "a" }, "read_only"),
        done.response("c1", "read", { ok: true }, { operationBound: true })
      ],
      header: (workspaceId) => header("done", workspaceId)
    }
  ]
}

// Writes the runs (restore mode: setup only) and their headers through the store services of the context.
const seed = (workspaceId: string) =>
  Effect.gen(function*() {
    const events = yield* RuntimeEventStore
    const headers = yield* RunHeaderStore
    for (const r of seedRuns()) {
      yield* events.appendBatch([{ runId: EventBuilder.make(ids(r.name)).runId, events: r.events }], { mode: "restore" })
      yield* headers.create(r.header(workspaceId))
    }
  })

// What each step decided: exit code, plan, reasons, next step, outcome.
const decision = (ran: Ran) => {
  const doc = JSON.parse(ran.stdout) as {
    readonly runId?: string
    readonly plan?: { readonly _tag: string; readonly reasons: ReadonlyArray<string>; readonly nextStep?: string }
    readonly outcome?: { readonly _tag: string; readonly startedSeq?: number; readonly terminalSeq?: number }
    readonly error?: { readonly _tag: string }
    readonly repaired?: ReadonlyArray<{ readonly runId: string; readonly status: string }>
  }
  return {
    code: ran.code,
    runId: doc.runId ?? null,
    plan: doc.plan?._tag ?? null,
    reasons: doc.plan?.reasons ?? null,
    nextStep: doc.plan?.nextStep ?? null,
    outcome: doc.outcome === undefined ? null : [doc.outcome._tag, doc.outcome.startedSeq, doc.outcome.terminalSeq],
    error: doc.error?._tag ?? null,
    repaired: doc.repaired?.map((r) => `${r.runId} ${r.status}`) ?? null
  }
}

// The same steps on a workspace: repair, plans (no catalog, the foreign run, confirmation awaited), the execution, a
// second execution of the claimed boundary, and the next default run.
const steps = (ws: string, store: ReadonlyArray<string>) => [
  ["repair", ws, ...store, "--json"],
  ["resume", "--plan", "--json", ws, ...store],
  ["resume", "--plan", "--json", "--tool", "read", "--run", "foreign", ws, ...store],
  ["resume", "--plan", "--json", "--tool", "read", ws, ...store],
  ["resume", "--json", "--tool", "read", ws, ...store],
  ["resume", "--yes", "--json", "--tool", "read", "--scripted-reply", "all done", ws, ...store],
  ["resume", "--yes", "--json", "--tool", "read", "--scripted-reply", "twice", "--run", "done", ws, ...store]
]

describe("resume --store postgres", () => {
  it.live("an interrupted run: repaired, planned and continued as on SQLite (same decisions and exit codes); identity from the PG workspace; password never printed", () =>
    Effect.gen(function*() {
      const password = new URL(Redacted.value(pgUrl())).password
      const name = `resume_${Math.random().toString(36).slice(2, 10)}`
      // PostgreSQL: the workspace and its identity row; the headers name that identity.
      const workspaceId = yield* Effect.scoped(Effect.gen(function*() {
        const ws = yield* PgWorkspace.make({ url: pgUrl(), workspace: name })
        yield* seed(ws.workspaceId).pipe(Effect.provideService(RuntimeEventStore, ws.store), Effect.provideService(RunHeaderStore, ws.headers))
        return ws.workspaceId
      }))
      assert.match(workspaceId, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
      // SQLite: the same runs and headers in a folder whose marker holds the same identity.
      const dir = mkdtempSync(join(tmpdir(), "rr-pg-resume-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      writeFileSync(join(dir, MARKER_FILE_NAME), `${workspaceId}\n`)
      yield* seed(workspaceId).pipe(
        Effect.provide(layerWorkspaceStores("sqlite", { workspace: dir, readOnly: false }).pipe(Layer.provide(NodeWorkspaceLock.layerNode))),
        Effect.provide(NodeContext.layer),
        Effect.scoped
      )

      const onPg: Array<Ran> = []
      for (const args of steps(name, ["--store", "postgres"])) onPg.push(yield* cli(args))
      const onSqlite: Array<Ran> = []
      for (const args of steps(dir, ["--store", "sqlite"])) onSqlite.push(yield* cli(args))
      const show = (runs: ReadonlyArray<Ran>) => runs.map((r) => `${r.args.join(" ")} -> ${r.code}\n${r.stdout}${r.stderr}`).join("\n")
      const pgDecisions = onPg.map(decision)
      // The continuation's run id is derived from its claim: compare everything else.
      const strip = (d: ReturnType<typeof decision>) => ({ ...d, runId: d.runId?.startsWith("claim-") ? "continuation" : d.runId })
      assert.deepStrictEqual(pgDecisions.map(strip), onSqlite.map(decision).map(strip), show(onPg) + "\n----\n" + show(onSqlite))
      // And they are the expected ones.
      assert.deepStrictEqual(pgDecisions.map((d) => [d.code, d.plan, d.reasons, d.outcome?.[0] ?? d.error]), [
        [0, null, null, null],
        [1, "Park", ["tool_catalog_mismatch"], null],
        [1, "Park", ["workspace_identity_mismatch", "provider_resume_boundary_unsupported"], null],
        [1, "AwaitingConfirmation", [], null],
        [1, "AwaitingConfirmation", [], null],
        [0, "Continue", [], "Continued"],
        [1, "Park", ["continuation_already_exists"], null]
      ], show(onPg))
      assert.deepStrictEqual(pgDecisions[0]!.repaired, ["foreign failed", "done failed"])

      // The ledger after it: the continuation's header completed, its run verifies, the source unchanged but sealed.
      const after = yield* Effect.scoped(Effect.gen(function*() {
        const ws = yield* PgWorkspace.make({ url: pgUrl(), workspace: name, readOnly: true })
        const headers = yield* ws.headers.list()
        const runs = yield* ws.store.listRuns()
        return {
          headers: headers.map((h) => `${h.runId.startsWith("claim-") ? "continuation" : h.runId} ${h.status}`),
          runs: runs.length,
          done: (yield* ws.store.readRun(runs.find((r) => r === "done")!)).map((r) => r.event.body._tag)
        }
      }))
      assert.deepStrictEqual(after.headers, ["foreign failed", "done failed", "continuation completed"])
      assert.strictEqual(after.runs, 3)
      assert.deepStrictEqual(after.done, ["RunOpened", "UserMessage", "FunctionCall", "ToolDispatched", "FunctionResponse", "RunTerminated"])
      const verified = yield* cli(["verify", name, "--store", "postgres", "--pg-url", Redacted.value(pgUrl())], { RUNTIME_RESUME_PG_URL: undefined })
      assert.strictEqual(verified.code, 0, verified.stdout + verified.stderr)

      // The next default run is the continuation; --pg-url instead of the environment; a missing workspace is exit 2.
      const next = decision(yield* cli(["resume", "--plan", "--json", "--tool", "read", name, "--store", "postgres", "--pg-url", Redacted.value(pgUrl())], {
        RUNTIME_RESUME_PG_URL: undefined
      }))
      assert.isTrue(next.runId?.startsWith("claim-"), JSON.stringify(next))
      const missing = yield* cli(["resume", "--plan", "--json", `${name}_none`, "--store", "postgres"])
      assert.deepStrictEqual([missing.code, decision(missing).error], [2, "WorkspaceNotFound"])
      const noServer = yield* cli(["resume", "--plan", "--json", name, "--store", "postgres"], { RUNTIME_RESUME_PG_URL: undefined })
      assert.deepStrictEqual([noServer.code, decision(noServer).error], [2, "StoreReadFailed"])
      for (const ran of [...onPg, verified, missing, noServer]) {
        assert.notInclude(ran.stdout + ran.stderr, password, `the password was printed: ${ran.args.join(" ")}`)
      }
    }).pipe(Effect.scoped))
})
