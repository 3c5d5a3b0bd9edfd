// Random workspaces in every state of docs/recovery.md, written through the stores' own APIs (no CLI): the input of
// the property test that follows the CLI's advice (test/AdviceNeverLoops.test.ts).
import * as Effect from "effect/Effect"
import * as FastCheck from "effect/FastCheck"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import Database from "better-sqlite3"
import * as Either from "effect/Either"
import { createHash } from "node:crypto"
import { appendFileSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { FILE_WRITE_EVIDENCE_TOOL } from "../../src/Domain/FileWriteEvidence.js"
import { RunId } from "../../src/Domain/Ids.js"
import * as LedgerRules from "../../src/Domain/Rules/LedgerRules.js"
import { RunHeader } from "../../src/Domain/RunHeader.js"
import type { RecoveryMode, RuntimeEvent } from "../../src/Domain/RuntimeEvent.js"
import * as NodeWorkspaceLock from "../../src/Layers/NodeWorkspaceLock.js"
import * as PgWorkspace from "../../src/Layers/PgWorkspace.js"
import * as EventBuilder from "../../src/Domain/Rules/EventBuilder.js"
import * as RecoveryBundle from "../../src/Domain/Rules/RecoveryBundle.js"
import { RunHeaderStore } from "../../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../../src/Services/RuntimeEventStore.js"
import * as WorkspaceIdentity from "../../src/Services/WorkspaceIdentity.js"
import { layerWorkspaceStores } from "../../src/Workspace/RepairWorkspace.js"
import { EVIDENCE, EVIDENCE_DIGEST } from "./recoveryConformance.js"

/** The run states of docs/recovery.md a generated run starts in. */
export const RUN_STATES = [
  "open_dead", //            managed, no RunTerminated, no live host
  "open_live", //            managed, no RunTerminated, a host holds the owner lock (the test holds it)
  "unmanaged", //            no run header, blocked (sealed or not)
  "unsettled", //            sealed, managed, operations indeterminate
  "parked", //               sealed, a reconciler parked an operation for a person
  "settled", //              sealed, every operation settled by a reconciler
  "awaiting_continuation", // sealed, settled by a person's decision (edit or retry), not continued
  "abandoned", //            sealed, every unsettled operation abandoned by a person
  "continued", //            sealed source run, carried on by a continuation run with events
  "completed" //             an ordinary completed turn
] as const
/** A run state of the generator. */
export type RunStateName = typeof RUN_STATES[number]

/** The workspace-level states: none, or the ledger file damaged after the runs were written. */
export const FILE_STATES = ["none", "corrupt", "torn_tail", "garbage"] as const
/** A file state of the generator. */
export type FileState = typeof FILE_STATES[number]

/** How a file-write operation's target looks when the person follows the advice. */
export type FileOnDisk = "landed" | "prior" | "diverged"

/** One tool call of a generated run: its recorded mode (or `file_write`: the built-in, CLI-observable one). */
export interface CallSpec {
  readonly kind: RecoveryMode | "file_write"
  readonly disk: FileOnDisk
}

/** One generated run. */
export interface RunSpec {
  readonly state: RunStateName
  readonly calls: ReadonlyArray<CallSpec>
  /** `unmanaged`: whether the run was sealed by its host (else it is open). */
  readonly sealed: boolean
}

/** One generated workspace. */
export interface WorkspaceSpec {
  readonly store: "sqlite" | "jsonl" | "postgres"
  readonly runs: ReadonlyArray<RunSpec>
  readonly file: FileState
}

const arbCall: FastCheck.Arbitrary<CallSpec> = FastCheck.record({
  kind: FastCheck.constantFrom("file_write", "never_auto_retry", "reconcilable", "idempotent", "read_only") as FastCheck.Arbitrary<CallSpec["kind"]>,
  disk: FastCheck.constantFrom("landed", "prior", "diverged") as FastCheck.Arbitrary<FileOnDisk>
})

/** A run in `state`, with one to three calls. */
export const arbRun = (states: ReadonlyArray<RunStateName> = RUN_STATES): FastCheck.Arbitrary<RunSpec> =>
  FastCheck.record({
    state: FastCheck.constantFrom(...states),
    calls: FastCheck.array(arbCall, { minLength: 1, maxLength: 3 }),
    sealed: FastCheck.boolean()
  })

/**
 * A workspace: one to three runs (at most one `open_live`: one host), on `stores`; a JSONL one may also be damaged
 * (`file`, in one case out of four), a SQLite one corrupt.
 */
export const arbWorkspace = (
  options: {
    readonly stores?: ReadonlyArray<WorkspaceSpec["store"]>
    readonly states?: ReadonlyArray<RunStateName>
    /** The damage to draw from (default: none in three cases out of four, else any); kept only where it applies. */
    readonly files?: ReadonlyArray<FileState>
    /** Whether a workspace (store, file) may be drawn: the ones a test leaves out. */
    readonly allow?: (store: WorkspaceSpec["store"], file: FileState) => boolean
  } = {}
): FastCheck.Arbitrary<WorkspaceSpec> =>
  FastCheck.record({
    store: FastCheck.constantFrom(...(options.stores ?? ["sqlite", "jsonl"] as const)),
    runs: FastCheck.array(arbRun(options.states), { minLength: 1, maxLength: 3 }),
    damaged: options.files !== undefined
      ? FastCheck.constantFrom(...options.files)
      : FastCheck.oneof({ weight: 3, arbitrary: FastCheck.constant("none" as const) }, {
        weight: 1,
        arbitrary: FastCheck.constantFrom("corrupt", "torn_tail", "garbage") as FastCheck.Arbitrary<FileState>
      })
  }).filter(({ damaged, store }) => options.allow === undefined || options.allow(store, fileStateOf(store, damaged))).map(({ damaged, runs, store }) => {
    let live = false
    const kept = runs.map((run) => {
      if (run.state !== "open_live") return run
      if (live) return { ...run, state: "open_dead" as const }
      live = true
      return run
    })
    return { store, runs: kept, file: fileStateOf(store, damaged) }
  })

// A database has no torn tail and no garbage lines (its damage is an edited row); PostgreSQL's rows are guarded by
// triggers (not damaged here).
const fileStateOf = (store: WorkspaceSpec["store"], damaged: FileState): FileState =>
  store === "postgres" ? "none" : store === "sqlite" && (damaged === "torn_tail" || damaged === "garbage") ? "corrupt" : damaged

const sha = (text: string) => `sha256:${createHash("sha256").update(text).digest("hex")}`

/** What was written: each run's id and whether a live host must hold the owner lock. */
export interface Written {
  readonly runIds: ReadonlyArray<string>
  readonly live: boolean
}

// A call's events: its FunctionCall and ToolDispatched (T1), with the evidence its mode needs; a file write also puts
// its target on disk as `disk` says.
const dispatchOf = (b: EventBuilder.EventBuilder, callId: string, spec: CallSpec, project: string) => {
  if (spec.kind === "file_write") {
    const path = `${callId}.txt`
    const content = `written by ${b.runId}/${callId}`
    const prior = `before ${b.runId}/${callId}`
    const args = { path, content }
    const evidence = { tool: FILE_WRITE_EVIDENCE_TOOL, root: realpathSync(project), path, before: sha(prior), after: sha(content) }
    writeFileSync(join(project, path), spec.disk === "landed" ? content : spec.disk === "prior" ? prior : "changed by someone else")
    return {
      call: b.call(callId, "write_file", args),
      dispatch: b.dispatched(callId, "write_file", args, "reconcilable", { evidence }),
      digest: Either.getOrThrow(LedgerRules.evidenceDigest(evidence))
    }
  }
  const args = { n: callId }
  return {
    call: b.call(callId, "Tool", args),
    dispatch: b.dispatched(callId, "Tool", args, spec.kind, spec.kind === "reconcilable" ? { evidence: EVIDENCE } : undefined),
    digest: spec.kind === "reconcilable" ? EVIDENCE_DIGEST : undefined
  }
}

// The bundle that puts a call of a sealed run in the run's state (none: it stays indeterminate).
const bundleFor = (state: RunStateName, call: RuntimeEvent, spec: CallSpec, digest: string | undefined, ts: number) => {
  const person = { ts, actor: "alice" }
  switch (state) {
    case "parked":
      return digest !== undefined ? RecoveryBundle.reconcileParked(call, { ts, evidenceDigest: digest, observation: "diverged" }) : undefined
    case "settled":
      return digest !== undefined
        ? RecoveryBundle.reconcileCompleted(call, { ts, evidenceDigest: digest, result: { ok: true } })
        : spec.kind === "read_only"
        ? RecoveryBundle.reexecutedReadOnly(call, { ts, result: { ok: true } })
        : spec.kind === "idempotent"
        ? RecoveryBundle.reexecutedIdempotent(call, { ts, result: { ok: true }, idempotencyKey: RecoveryBundle.operationIdOf(call) })
        : RecoveryBundle.manualEdit(call, { ...person, result: { ok: true }, isError: false })
    case "awaiting_continuation":
    case "continued":
      return RecoveryBundle.manualRetry(call, person)
    case "abandoned":
      return RecoveryBundle.manualAbort(call, person)
    default:
      return undefined
  }
}

/**
 * Writes `spec` into the (empty) folder `workspace` (on PostgreSQL: into the workspace named `pg.workspace` of the
 * server `pg.url`, the folder holding only the project files), then damages the ledger file as `spec.file` says.
 */
export const writeWorkspace = (workspace: string, spec: WorkspaceSpec, pg?: { readonly url: string; readonly workspace: string }) =>
  Effect.gen(function*() {
    const stores = spec.store === "postgres"
      ? PgWorkspace.layer({ url: Redacted.make(pg!.url), workspace: pg!.workspace })
      : layerWorkspaceStores(spec.store, { workspace, readOnly: false }).pipe(Layer.provide(NodeWorkspaceLock.layerNode))
    const workspaceId = spec.store === "postgres"
      ? yield* Effect.scoped(Effect.map(PgWorkspace.make({ url: Redacted.make(pg!.url), workspace: pg!.workspace }), (ws) => ws.workspaceId))
      : yield* WorkspaceIdentity.ensure(workspace)
    const project = join(workspace, "project")
    mkdirSync(project, { recursive: true })
    const runIds: Array<string> = []
    yield* Effect.scoped(Effect.gen(function*() {
      const store = yield* RuntimeEventStore
      const headers = yield* RunHeaderStore
      let ts = 1_000
      for (const [i, run] of spec.runs.entries()) {
        const name = `run-${i + 1}`
        runIds.push(name)
        const b = EventBuilder.make(name, ts)
        const r = RunId.make(name)
        const header = (status: RunHeader["status"], extra: Partial<ConstructorParameters<typeof RunHeader>[0]> = {}) =>
          new RunHeader({
            runId: r,
            sessionId: b.ids.sessionId as RunHeader["sessionId"],
            invocationId: b.ids.invocationId as RunHeader["invocationId"],
            turnId: b.ids.turnId as RunHeader["turnId"],
            status,
            workspaceId,
            createdAt: ts,
            updatedAt: ts,
            ...extra
          })
        const managed = run.state !== "unmanaged"
        if (managed) yield* headers.create(header("running"))
        yield* store.append(r, [b.opened("t1_after_preflight_v1"), b.user("go")])
        if (run.state === "completed") {
          yield* store.append(r, [b.model("done"), b.terminated("completed")])
          yield* headers.setStatus(r, "completed", { at: ts })
          continue
        }
        const calls: Array<{ readonly call: RuntimeEvent; readonly spec: CallSpec; readonly digest: string | undefined }> = []
        for (const [j, callSpec] of run.calls.entries()) {
          const { call, digest, dispatch } = dispatchOf(b, `call-${j + 1}`, callSpec, project)
          yield* store.appendDispatch(r, { call, dispatch })
          calls.push({ call, spec: callSpec, digest })
        }
        const open = run.state === "open_dead" || run.state === "open_live" || (run.state === "unmanaged" && !run.sealed)
        if (open) continue
        yield* store.append(r, [b.terminated("failed", "process_interrupted")])
        if (managed) yield* headers.setStatus(r, "failed", { at: ts, reason: "process_interrupted" })
        for (const { call, digest, spec: callSpec } of calls) {
          const bundle = bundleFor(run.state, call, callSpec, digest, ts)
          if (bundle !== undefined) yield* store.appendRecovery(r, bundle)
        }
        if (run.state === "continued") {
          // The continuation: a run whose header names this one as its parent, with events of its own.
          const next = `${name}-cont`
          runIds.push(next)
          const c = EventBuilder.make(next, ts)
          const cr = RunId.make(next)
          yield* headers.create(new RunHeader({
            runId: cr,
            sessionId: c.ids.sessionId as RunHeader["sessionId"],
            invocationId: c.ids.invocationId as RunHeader["invocationId"],
            turnId: c.ids.turnId as RunHeader["turnId"],
            status: "running",
            workspaceId,
            parentRunId: r,
            createdAt: ts,
            updatedAt: ts
          }))
          yield* store.append(cr, [c.opened("t1_after_preflight_v1"), c.user("continue"), c.model("done"), c.terminated("completed")])
          yield* headers.setStatus(cr, "completed", { at: ts })
        }
        ts += 10
      }
    }).pipe(Effect.provide(stores)))
    damage(workspace, spec)
    return { runIds, live: spec.runs.some((run) => run.state === "open_live") } satisfies Written
  })

const lastIndex = <A>(items: ReadonlyArray<A>, test: (item: A) => boolean): number => {
  for (let i = items.length - 1; i >= 0; i--) if (test(items[i]!)) return i
  return -1
}

// The ledger file damaged after the fact: a middle row edited (its hash no longer chains), a torn last line, or
// lines that are not ledger rows at all.
const damage = (workspace: string, spec: WorkspaceSpec): void => {
  if (spec.file === "none") return
  if (spec.store === "jsonl") {
    const file = join(workspace, "runtime-events.jsonl")
    if (spec.file === "torn_tail") return appendFileSync(file, "{\"runId\":\"run-1\",\"seq\":")
    if (spec.file === "garbage") return writeFileSync(file, "this is not a ledger\n\u0000\u0001garbage\n")
    // The last run's user message edited: its row's hash no longer matches its bytes.
    const lines = readFileSync(file, "utf8").split("\n")
    const i = lastIndex(lines, (line) => line.includes("\"go\""))
    lines[i] = lines[i]!.replace("\"go\"", "\"GO\"")
    return writeFileSync(file, lines.join("\n"))
  }
  // SQLite: one event's bytes edited in place (no trigger guards a local file against its owner).
  const db = new Database(join(workspace, "runtime.sqlite"))
  try {
    // The last run's first append group (its opener and user message) edited: the digest no longer matches.
    const rows = db.prepare("SELECT pos, bytes FROM events ORDER BY pos").all() as Array<{ pos: number; bytes: Buffer }>
    const row = rows[lastIndex(rows, (r) => r.bytes.toString("utf8").includes("\"go\""))]!
    db.prepare("UPDATE events SET bytes = ? WHERE pos = ?").run(Buffer.from(row.bytes.toString("utf8").replace("\"go\"", "\"GO\"")), row.pos)
  } finally {
    db.close()
  }
}
