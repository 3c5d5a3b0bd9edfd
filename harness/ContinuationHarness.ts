// The continuation crash and race rows of the harness (docs/spec/04-continuation.md "Crash proof"): a child continues a source run and is
// SIGKILLed at each of the five points, or two children race for one boundary; the parent repairs and checks the proofs.
import * as Command from "@effect/platform/Command"
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import Sqlite from "better-sqlite3"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { isDeepStrictEqual } from "node:util"
import { reasonsOf } from "../src/Domain/ContinuationPlan.js"
import { RunId, type InvocationId, type SessionId, type TurnId } from "../src/Domain/Ids.js"
import { isTerminalStatus, RunHeader } from "../src/Domain/RunHeader.js"
import { RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import * as JsonlRunHeaderStore from "../src/Layers/JsonlRunHeaderStore.js"
import * as NodeContinuationSafetyInspector from "../src/Layers/NodeContinuationSafetyInspector.js"
import { LEDGER_FILES } from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceOwner from "../src/Layers/NodeWorkspaceOwner.js"
import * as ContinuationExecutor from "../src/Programs/ContinuationExecutor.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as StartupRepair from "../src/Programs/StartupRepair.js"
import * as WorkspaceIdentity from "../src/Services/WorkspaceIdentity.js"
import { CONTINUATION_POINTS, type ContinuationPoint } from "../src/Services/ContinuationFailpoints.js"
import { isAbandoned, RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { OWNER_LOCK_WAIT_MS, WorkspaceOwner } from "../src/Services/WorkspaceOwner.js"
import { CLEANUP_MARKER, HarnessStore } from "./Child.js"
import {
  atLine,
  ChildResult,
  GO_FILE,
  PROVIDER_CALLS_FILE,
  ProviderCall,
  RACE_READY_LINE,
  roundWorkspace,
  SOURCE_RUN_ID,
  SOURCE_TOOLS,
  workspaceStores
} from "./ContinuationChild.js"
import { childArgv } from "./ChildScript.js"

// `node --import tsx ContinuationChild.ts` from the sources, `node ContinuationChild.js` compiled.
const CHILD_ARGV = childArgv(import.meta.url, "ContinuationChild")
const PROJECT_ROOT = fileURLToPath(new URL("..", import.meta.url))
const READY_TIMEOUT = Duration.seconds(60)
const EXIT_TIMEOUT = Duration.seconds(30)
// A race round's children each wait at most 2 s for the lock; a round that takes this long is stuck.
const ROUND_TIMEOUT = Duration.seconds(30)

/** A step of a row that could not be carried out (a child that printed something unexpected); the row fails with it. */
export class HarnessStepFailed extends Data.TaggedError("HarnessStepFailed")<{ readonly message: string }> {}

/** The continuation rows' ids: one per crash point of docs/spec/04-continuation.md, and the race. */
export const CONTINUATION_FAILPOINTS = [...CONTINUATION_POINTS.map((p) => `C/${p}` as const), "C/race" as const]
/** A continuation row's id. */
export const ContinuationFailpointId = Schema.Literal(...CONTINUATION_FAILPOINTS)
/** A continuation row's id. */
export type ContinuationFailpointId = typeof ContinuationFailpointId.Type

/** What a crash row's child committed before it died (`race` for the race row). */
export const ContinuationCommittedPrefix = Schema.Literal("nothing", "claim", "start", "terminal_event", "terminal_header", "race")
/** What a crash row's child committed before it died. */
export type ContinuationCommittedPrefix = typeof ContinuationCommittedPrefix.Type

/**
 * What a row decided: for a crash row, what a new plan of the source says after repair (`continue`, or the park
 * `continuation_already_exists`; `unexpected` for anything else, named in the row's error); for the race,
 * `one_provider_call` when every round called the provider exactly once, else `not_exactly_one_call`.
 */
export const ContinuationDecision = Schema.Literal("continue", "continuation_already_exists", "one_provider_call", "not_exactly_one_call", "unexpected")
/** What a row decided. */
export type ContinuationDecision = typeof ContinuationDecision.Type

/** The literal expectations of each crash point (never computed by the code under test). */
export const CONTINUATION_EXPECTED: Record<ContinuationPoint, {
  readonly prefix: ContinuationCommittedPrefix
  /** What a new plan of the source says once repair ran. */
  readonly decision: "continue" | "continuation_already_exists"
  /** Provider calls recorded by the killed child. */
  readonly providerCalls: number
  /** The continuation run's header after repair: its status and reason (`undefined`: no header was committed). */
  readonly header: readonly [string, string] | undefined
}> = {
  run_created: { prefix: "nothing", decision: "continue", providerCalls: 0, header: undefined },
  claim_committed: { prefix: "claim", decision: "continue", providerCalls: 0, header: ["failed", "continuation_abandoned_before_provider_call"] },
  start_committed: { prefix: "start", decision: "continuation_already_exists", providerCalls: 0, header: ["failed", "process_interrupted"] },
  terminal_event_committed: { prefix: "terminal_event", decision: "continuation_already_exists", providerCalls: 1, header: ["completed", "-"] },
  terminal_header_committed: { prefix: "terminal_header", decision: "continuation_already_exists", providerCalls: 1, header: ["completed", "-"] }
}

/** The error of a failed row: what went wrong, and where. */
export const ContinuationRowError = Schema.Struct({ _tag: Schema.String, message: Schema.String })

/**
 * One continuation row, in the harness's row shape (docs/spec/06-cli.md `harness` JSON): `deterministic` is "repair converged"
 * (a second pass changed nothing; for the race: every round called the provider exactly once), `ledgerUnchanged` is
 * "every source row is unchanged", `markerWritten` is whether the killed child's finalizer ran (never, after a
 * SIGKILL; `null` for the race). `null` marks a check never reached.
 */
export const ContinuationRow = Schema.Struct({
  failpoint: ContinuationFailpointId,
  store: HarnessStore,
  committedPrefix: ContinuationCommittedPrefix,
  decision: Schema.NullOr(ContinuationDecision),
  expected: ContinuationDecision,
  markerWritten: Schema.NullOr(Schema.Boolean),
  deterministic: Schema.NullOr(Schema.Boolean),
  ledgerUnchanged: Schema.NullOr(Schema.Boolean),
  pass: Schema.Boolean,
  error: Schema.optionalWith(ContinuationRowError, { exact: true })
})
/** One continuation row. */
export type ContinuationRow = typeof ContinuationRow.Type

/** What the checks of one crash row found (for tests). */
export interface CrashDetail {
  /** Provider calls recorded by the killed child, then after the second execution. */
  providerCalls: Array<ProviderCall>
  /** The continuation runs' headers after repair, as `<runId> <status> <reason>`. */
  headers: Array<string>
  /** The claims on the source, as `<claimId> <supersedes|->`, after everything. */
  claims: Array<string>
  /** The second execution's result (only after a kill before the start committed). */
  second: ChildResult | null
}

/** What the race found (for tests and the row's message). */
export interface RaceDetail {
  rounds: number
  /** Rounds in which exactly one child continued and the provider was called exactly once, by it. */
  oneCall: number
  /** How the losers ended, by kind: `WorkspaceLocked`, `ContinuationAlreadyExists`, `park:continuation_already_exists`. */
  losers: Record<string, number>
  /** Wall time of the rounds (the children's start excluded), in ms. */
  elapsedMs: number
}

const T1 = "t1_after_preflight_v1"

const inspectorLayer = NodeContinuationSafetyInspector.layerNode(NodeContinuationSafetyInspector.fixed(SOURCE_TOOLS, true))

/** Runs startup repair on the workspace under the exclusive owner lock (at most 2 s), with the stores opened as a writer. */
export const repairLocked = (store: HarnessStore, workspace: string) =>
  Effect.flatMap(WorkspaceOwner, (owner) =>
    owner.withExclusive(workspace, StartupRepair.repair.pipe(Effect.provide(workspaceStores(store, workspace, false))))).pipe(
      Effect.provide(NodeWorkspaceOwner.layerNode)
    )

/**
 * Builds the source in a workspace folder that exists: its identity marker, then a managed run (opener, user message,
 * a `read` call dispatched and answered) interrupted before its end, which startup repair seals (failed /
 * process_interrupted): a terminal run with a header, eligible to continue.
 */
export const buildSource = (store: HarnessStore, workspace: string) =>
  Effect.gen(function*() {
    const workspaceId = yield* WorkspaceIdentity.ensure(workspace)
    yield* Effect.gen(function*() {
      const events = yield* RuntimeEventStore
      const headers = yield* RunHeaderStore
      const now = yield* Clock.currentTimeMillis
      const b = EventBuilder.make(EventBuilder.idsFor(SOURCE_RUN_ID), now)
      yield* headers.create(new RunHeader({
        runId: b.runId,
        sessionId: b.ids.sessionId as SessionId,
        invocationId: b.ids.invocationId as InvocationId,
        turnId: b.ids.turnId as TurnId,
        status: "running",
        workspaceId,
        createdAt: now,
        updatedAt: now
      }))
      yield* events.append(b.runId, [b.opened(T1), b.user("read the file")])
      const args = { path: "a.txt" }
      yield* events.appendDispatch(b.runId, { call: b.call("c1", "read", args), dispatch: b.dispatched("c1", "read", args, "read_only") })
      yield* events.appendOutcome(b.runId, b.response("c1", "read", { text: "contents" }, { operationBound: true }))
    }).pipe(Effect.provide(workspaceStores(store, workspace, false)))
    const report = yield* repairLocked(store, workspace)
    if (report.repaired.length !== 1 || report.failed.length > 0) {
      return yield* Effect.dieMessage(`sealing the source run failed: ${JSON.stringify(report)}`)
    }
  })

/** The source run as it lies on disk: its rows through the store, its raw SQLite rows, or the JSONL files' bytes. */
export interface SourceSnapshot {
  readonly rows: ReadonlyArray<string>
  readonly header: string
  /** SQLite: the source's raw `runs`, `events` and `run_headers` rows. */
  readonly raw: ReadonlyArray<string>
  /** JSONL: the ledger and header files' bytes (the source's records are their prefix: append-only). */
  readonly files: Readonly<Record<string, string>>
}

const rawSqliteRows = (workspace: string): ReadonlyArray<string> => {
  const db = new Sqlite(join(workspace, LEDGER_FILES.sqlite), { readonly: true, fileMustExist: true })
  try {
    return [
      ...db.prepare("SELECT * FROM runs WHERE run_id = ?").all(SOURCE_RUN_ID),
      ...db.prepare("SELECT run_id, seq, end_seq, event_id, digest, hex(bytes) AS bytes FROM events WHERE run_id = ? ORDER BY seq").all(SOURCE_RUN_ID),
      ...db.prepare("SELECT * FROM run_headers WHERE run_id = ?").all(SOURCE_RUN_ID)
    ].map((row) => JSON.stringify(row))
  } finally {
    db.close()
  }
}

/** Snapshots the source run (stores opened read-only). */
export const snapshotSource = (store: HarnessStore, workspace: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const { header, rows } = yield* Effect.gen(function*() {
      const events = yield* RuntimeEventStore
      const headers = yield* RunHeaderStore
      const rows = (yield* events.readRun(RunId.make(SOURCE_RUN_ID))).map((r) =>
        `${r.seq} ${r.end} ${r.digest} ${JSON.stringify(Schema.encodeSync(RuntimeEvent)(r.event))}`
      )
      const header = JSON.stringify(Schema.encodeSync(RunHeader)(Option.getOrThrow(yield* headers.get(RunId.make(SOURCE_RUN_ID)))))
      return { header, rows }
    }).pipe(Effect.provide(workspaceStores(store, workspace, true)))
    const files: Record<string, string> = {}
    if (store === "jsonl") {
      for (const name of [LEDGER_FILES.jsonl, JsonlRunHeaderStore.FILE_NAME]) files[name] = yield* fs.readFileString(join(workspace, name), "latin1")
    }
    return { rows, header, raw: store === "sqlite" ? rawSqliteRows(workspace) : [], files } satisfies SourceSnapshot
  })

/** Where `after` differs from `before` for the source (JSONL files may only have grown), or `undefined`. */
export const sourceDifference = (before: SourceSnapshot, after: SourceSnapshot): string | undefined => {
  if (!isDeepStrictEqual(before.rows, after.rows)) return "the source run's rows changed"
  if (before.header !== after.header) return `the source header changed: ${before.header} became ${after.header}`
  if (!isDeepStrictEqual(before.raw, after.raw)) return "the source's raw SQLite rows changed"
  for (const [name, bytes] of Object.entries(before.files)) {
    if (!(after.files[name] ?? "").startsWith(bytes)) return `the first ${bytes.length} bytes of ${name} (the source's records) changed`
  }
  return undefined
}

/** Everything in a workspace, as comparable lines: every header, every claim, every run's rows (seq and digest). */
export const snapshotWorkspace = (store: HarnessStore, workspace: string) =>
  Effect.gen(function*() {
    const events = yield* RuntimeEventStore
    const headers = yield* RunHeaderStore
    const out: Array<string> = []
    for (const h of yield* headers.list()) out.push(`header ${JSON.stringify(Schema.encodeSync(RunHeader)(h))}`)
    for (const c of yield* headers.claims(RunId.make(SOURCE_RUN_ID))) out.push(`claim ${c.claimId} ${c.sourceSeq} ${c.sourceDigest} ${c.continuationRunId} ${c.supersedes ?? "-"}`)
    for (const runId of yield* events.listRuns()) {
      for (const row of yield* events.readRun(runId)) out.push(`row ${runId} ${row.seq} ${row.digest}`)
    }
    return out
  }).pipe(Effect.provide(workspaceStores(store, workspace, true)))

/** The provider calls the side file records (none when it does not exist). */
export const providerCalls = (workspace: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const file = join(workspace, PROVIDER_CALLS_FILE)
    if (!(yield* fs.exists(file))) return []
    const text = yield* fs.readFileString(file)
    return yield* Effect.forEach(text.split("\n").filter((l) => l.length > 0), (line) => Schema.decodeUnknown(ProviderCall)(line))
  })

/**
 * The durable invariants after a crash and repair, as problems (empty: all hold): every managed run terminal; at most
 * one live continuation per source boundary (a claim not superseded whose run is not abandoned); each recorded
 * provider call belongs to a run whose first event is its `ContinuationStarted`.
 */
export const checkInvariants = (store: HarnessStore, workspace: string) =>
  Effect.gen(function*() {
    const events = yield* RuntimeEventStore
    const headers = yield* RunHeaderStore
    const problems: Array<string> = []
    for (const h of yield* headers.list()) {
      if (!isTerminalStatus(h.status)) problems.push(`run ${h.runId} is ${h.status} after repair`)
    }
    const claims = yield* headers.claims(RunId.make(SOURCE_RUN_ID))
    const superseded = new Set(claims.flatMap((c) => c.supersedes !== undefined ? [c.supersedes] : []))
    const live = new Map<string, Array<string>>()
    for (const c of claims) {
      if (superseded.has(c.claimId)) continue
      if (isAbandoned(Option.getOrUndefined(yield* headers.get(c.continuationRunId)))) continue
      const boundary = `${c.sourceRunId}@${c.sourceSeq}/${c.sourceDigest}`
      live.set(boundary, [...(live.get(boundary) ?? []), c.claimId])
    }
    for (const [boundary, ids] of live) if (ids.length > 1) problems.push(`${ids.length} live continuations on ${boundary}: ${ids.join(", ")}`)
    for (const call of yield* providerCalls(workspace)) {
      const rows = yield* Effect.either(events.readRun(RunId.make(call.runId)))
      const first = rows._tag === "Right" ? rows.right[0]?.event.body : undefined
      if (first?._tag !== "ContinuationStarted" || first.claimId !== call.claimId) {
        problems.push(`the provider was called for ${call.runId} (claim ${call.claimId}) whose first committed event is ${first?._tag ?? "missing"}`)
      }
    }
    return { problems, live: [...live.values()].flat(), claims }
  }).pipe(Effect.provide(workspaceStores(store, workspace, true)))

/** What a new plan of the source says now: `continue`, or its park reasons joined by `+` (stores read-only). */
export const planDecision = (store: HarnessStore, workspace: string) =>
  ContinuationExecutor.prepare(workspace, SOURCE_RUN_ID, { confirmed: true }).pipe(
    Effect.map((prepared) => prepared.plan._tag === "Continue" ? "continue" : prepared.plan._tag === "Park" ? reasonsOf(prepared.plan).join("+") : "awaiting_confirmation"),
    Effect.provide(Layer.mergeAll(workspaceStores(store, workspace, true), inspectorLayer))
  )

// A child's result line, or a step failure quoting what it printed instead.
const decodeResult = (line: string, who: string) =>
  Schema.decodeUnknown(ChildResult)(line).pipe(
    Effect.mapError(() => new HarnessStepFailed({ message: `${who} printed ${JSON.stringify(line.slice(0, 500))}, not a result line` }))
  )

const start = (args: ReadonlyArray<string>) =>
  Command.make(...CHILD_ARGV, ...args).pipe(Command.workingDirectory(PROJECT_ROOT), Command.start)

/** A started child's stdout as a queue of lines, and its stderr collected. */
const linesOf = (proc: CommandExecutor.Process) =>
  Effect.gen(function*() {
    const lines = yield* Queue.unbounded<string | null>()
    yield* proc.stdout.pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.runForEach((line) => Queue.offer(lines, line)),
      Effect.ignore,
      Effect.zipRight(Queue.offer(lines, null)),
      Effect.forkScoped
    )
    const stderr = yield* proc.stderr.pipe(Stream.decodeText(), Stream.runFold("", (a, b) => a + b), Effect.orElseSucceed(() => ""), Effect.forkScoped)
    return { lines, stderr }
  })

/** A row's error collector, and the row built from what was found. */
const collector = () => {
  const problems: Array<string> = []
  let tag: string | undefined
  return {
    problems,
    fail: (errorTag: string, message: string) => {
      tag ??= errorTag
      problems.push(message)
    },
    tag: () => tag ?? "HarnessCheckFailed"
  }
}

const catchRow = (fail: (tag: string, message: string) => void) => (cause: Cause.Cause<unknown>) =>
  Effect.sync(() => {
    const failure = Cause.failureOption(cause)
    if (Option.isSome(failure)) {
      const e = failure.value as { _tag?: string; message?: string }
      fail(e._tag ?? "Error", e.message ?? String(e))
    } else fail("Defect", Cause.pretty(cause))
  })

/**
 * Runs one crash row: builds the source, starts a child that continues it and SIGKILLs it at `point`, then repairs
 * twice under the exclusive owner lock and checks docs/spec/04-continuation.md's four proofs (and the literal expectations of the point).
 * After a kill before the start committed, a second child continues the boundary once more (superseding the
 * abandoned claim, if one committed), and the provider is called exactly once. Never fails: a failure is `pass: false`.
 */
export const runContinuationCrashRow = (
  store: HarnessStore,
  point: ContinuationPoint,
  detail: CrashDetail = { providerCalls: [], headers: [], claims: [], second: null }
): Effect.Effect<ContinuationRow, never, CommandExecutor.CommandExecutor | FileSystem.FileSystem | Path.Path> => {
  const expected = CONTINUATION_EXPECTED[point]
  const { fail, problems, tag } = collector()
  const row = {
    decision: null as ContinuationDecision | null,
    markerWritten: null as boolean | null,
    deterministic: null as boolean | null,
    ledgerUnchanged: null as boolean | null
  }
  const steps = Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const workspace = yield* fs.makeTempDirectoryScoped({ prefix: `rr-cont-${store}-${point}-` })
    yield* buildSource(store, workspace)
    const before = yield* snapshotSource(store, workspace)
    // The crash: wait for "at <point>", then SIGKILL.
    const proc = yield* start(["crash", store, workspace, point])
    const { lines, stderr } = yield* linesOf(proc)
    const seen: Array<string> = []
    let reached = false
    while (!reached) {
      const line = yield* Queue.take(lines).pipe(Effect.timeoutFail({ duration: READY_TIMEOUT, onTimeout: () => new Error(`the child did not reach ${point}`) }))
      if (line === null) break
      if (line === atLine(point)) reached = true
      else seen.push(line)
    }
    if (!reached) {
      yield* proc.kill("SIGKILL").pipe(Effect.ignore)
      return fail("HarnessStepFailed", `the child ended before reaching ${point}: ${seen.join(" | ")} ${yield* stderr.await.pipe(Effect.map(String))}`)
    }
    yield* proc.kill("SIGKILL").pipe(Effect.timeout(EXIT_TIMEOUT), Effect.orDie)
    row.markerWritten = yield* fs.exists(join(workspace, CLEANUP_MARKER))
    if (row.markerWritten) fail("HarnessCheckFailed", "the child's finalizer ran")
    detail.providerCalls = [...(yield* providerCalls(workspace))]
    if (detail.providerCalls.length !== expected.providerCalls) {
      fail("HarnessCheckFailed", `the provider was called ${detail.providerCalls.length} times before the kill at ${point}, expected ${expected.providerCalls}`)
    }
    // Repair converges: the second pass repairs nothing and changes nothing.
    const first = yield* repairLocked(store, workspace)
    if (first.failed.length > 0) fail("HarnessCheckFailed", `repair failed: ${first.failed.map((f) => f.message).join("; ")}`)
    const once = yield* snapshotWorkspace(store, workspace)
    const second = yield* repairLocked(store, workspace)
    const twice = yield* snapshotWorkspace(store, workspace)
    row.deterministic = second.repaired.length === 0 && second.failed.length === 0 && isDeepStrictEqual(once, twice)
    if (!row.deterministic) fail("HarnessCheckFailed", `a second repair changed the workspace: ${JSON.stringify(second)}`)
    detail.headers = once.filter((l) => l.startsWith("header ")).flatMap((l) => {
      const h = JSON.parse(l.slice(7)) as { runId: string; status: string; statusReason?: string }
      return h.runId === SOURCE_RUN_ID ? [] : [`${h.runId} ${h.status} ${h.statusReason ?? "-"}`]
    })
    const want = expected.header === undefined ? [] : [expected.header.join(" ")]
    if (!isDeepStrictEqual(detail.headers.map((h) => h.split(" ").slice(1).join(" ")), want)) {
      fail("HarnessCheckFailed", `the continuation headers after repair are ${JSON.stringify(detail.headers)}, expected ${JSON.stringify(want)}`)
    }
    const invariants = yield* checkInvariants(store, workspace)
    for (const p of invariants.problems) fail("HarnessCheckFailed", p)
    // What a new plan says: continue after a kill before the start committed, else the live claim parks it.
    const decided = yield* planDecision(store, workspace)
    row.decision = decided === "continue" || decided === "continuation_already_exists" ? decided : "unexpected"
    if (decided !== expected.decision) fail("HarnessCheckFailed", `a new plan after repair is ${decided}, expected ${expected.decision}`)
    if (expected.decision === "continue") {
      // The boundary is claimed once more (superseding the abandoned claim), and the provider called exactly once.
      const abandoned = invariants.claims.map((c) => c.claimId)
      const again = yield* start(["run", store, workspace])
      const out = yield* linesOf(again)
      const line = yield* Queue.take(out.lines).pipe(Effect.timeoutFail({ duration: READY_TIMEOUT, onTimeout: () => new Error("the second execution did not answer") }))
      yield* again.exitCode.pipe(Effect.timeout(EXIT_TIMEOUT), Effect.ignore)
      if (line === null) return fail("HarnessStepFailed", `the second execution printed nothing: ${yield* out.stderr.await.pipe(Effect.map(String))}`)
      const result = yield* decodeResult(line, "the second execution")
      detail.second = result
      const calls = yield* providerCalls(workspace)
      detail.providerCalls = [...calls]
      if (result._tag !== "Continued") fail("HarnessCheckFailed", `the second execution did not continue: ${line}`)
      else {
        if (result.supersededClaimId !== (abandoned[0] ?? null)) {
          fail("HarnessCheckFailed", `the second execution superseded ${result.supersededClaimId ?? "nothing"}, expected ${abandoned[0] ?? "nothing"}`)
        }
        if (calls.length !== 1 || calls[0]!.runId !== result.runId || calls[0]!.pid !== result.pid) {
          fail("HarnessCheckFailed", `the second execution should call the provider exactly once; the calls are ${JSON.stringify(calls)}`)
        }
      }
      const after = yield* checkInvariants(store, workspace)
      for (const p of after.problems) fail("HarnessCheckFailed", `after the second execution: ${p}`)
      if (after.live.length !== 1) fail("HarnessCheckFailed", `after the second execution ${after.live.length} continuations are live, expected 1`)
      // The superseded claim cannot be superseded again: a third plan parks.
      const third = yield* planDecision(store, workspace)
      if (third !== "continuation_already_exists") fail("HarnessCheckFailed", `a plan after the second execution is ${third}, expected continuation_already_exists`)
    }
    detail.claims = (yield* checkInvariants(store, workspace)).claims.map((c) => `${c.claimId} ${c.supersedes ?? "-"}`)
    const difference = sourceDifference(before, yield* snapshotSource(store, workspace))
    row.ledgerUnchanged = difference === undefined
    if (difference !== undefined) fail("HarnessCheckFailed", difference)
  }).pipe(Effect.scoped)
  return steps.pipe(
    Effect.catchAllCause(catchRow(fail)),
    Effect.map((): ContinuationRow => {
      const pass = problems.length === 0 && row.markerWritten === false && row.deterministic === true && row.ledgerUnchanged === true
      return {
        failpoint: `C/${point}`,
        store,
        committedPrefix: expected.prefix,
        decision: row.decision,
        expected: expected.decision,
        markerWritten: row.markerWritten,
        deterministic: row.deterministic,
        ledgerUnchanged: row.ledgerUnchanged,
        pass,
        ...(pass ? {} : { error: { _tag: tag(), message: problems.join("; ") || "the row stopped early" } })
      }
    })
  )
}

/** Options of the race. */
export interface RaceOptions {
  /** Rounds, each on a fresh source workspace (default 50). */
  readonly rounds?: number
  /** How long the provider waits before answering, so the loser contends for the held lock (default 150 ms). */
  readonly delayMs?: number
  /** How long each child waits for the owner lock (default docs/spec/04-continuation.md's 2 s; shorter than `delayMs` to see `WorkspaceLocked`). */
  readonly lockWaitMs?: number
}

// The kind of a loser's result, or `undefined` when it is not an allowed loss.
const loserKind = (result: ChildResult): string | undefined => {
  if (result._tag === "Failed" && (result.error === "WorkspaceLocked" || result.error === "ContinuationAlreadyExists")) return result.error
  if (result._tag === "NotContinued" && isDeepStrictEqual(result.parkReasons, ["continuation_already_exists"])) return "park:continuation_already_exists"
  return undefined
}

const takeLine = (lines: Queue.Queue<string | null>, who: string) =>
  Queue.take(lines).pipe(
    Effect.timeoutFail({ duration: ROUND_TIMEOUT, onTimeout: () => new Error(`${who} did not answer in time`) }),
    Effect.flatMap((line) => line === null ? Effect.fail(new Error(`${who} ended`)) : Effect.succeed(line))
  )

/**
 * Runs the race: two child processes, started once, resume the same boundary in each of `rounds` rounds, each round
 * on a fresh source workspace (its stores, lock and identity opened anew by both children); both are released by the
 * round's `go` file. Each round exactly one continues and calls the provider, once; the other gets `WorkspaceLocked`
 * or `continuation_already_exists` (an error, or a park when it planned after the claim) and calls nothing. Every
 * durable invariant is checked after each round. Never fails: a failure is `pass: false`.
 */
export const runContinuationRace = (
  store: HarnessStore,
  options: RaceOptions = {},
  detail: RaceDetail = { rounds: 0, oneCall: 0, losers: {}, elapsedMs: 0 }
): Effect.Effect<ContinuationRow, never, CommandExecutor.CommandExecutor | FileSystem.FileSystem | Path.Path> => {
  const rounds = options.rounds ?? 50
  const delayMs = options.delayMs ?? 150
  const lockWaitMs = options.lockWaitMs ?? OWNER_LOCK_WAIT_MS
  const { fail, problems, tag } = collector()
  let unchanged: boolean | null = null
  const steps = Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const base = yield* fs.makeTempDirectoryScoped({ prefix: `rr-race-${store}-` })
    const children = yield* Effect.forEach(["a", "b"], (name) =>
      Effect.gen(function*() {
        const proc = yield* start(["race", store, base, `${rounds}`, `${delayMs}`, `${lockWaitMs}`])
        const out = yield* linesOf(proc)
        return { name, proc, ...out }
      }))
    for (const child of children) {
      const ready = yield* takeLine(child.lines, `child ${child.name}`).pipe(Effect.timeout(READY_TIMEOUT))
      if (ready !== RACE_READY_LINE) return fail("HarnessStepFailed", `child ${child.name} is not ready: ${ready}`)
    }
    const started = yield* Clock.currentTimeMillis
    unchanged = true
    for (let n = 1; n <= rounds; n++) {
      const workspace = roundWorkspace(base, n)
      yield* fs.makeDirectory(workspace, { mode: 0o700 })
      yield* buildSource(store, workspace)
      const before = yield* snapshotSource(store, workspace)
      yield* fs.writeFileString(join(workspace, GO_FILE), "go\n")
      const results = yield* Effect.forEach(children, (child) =>
        Effect.flatMap(takeLine(child.lines, `child ${child.name} in round ${n}`), (line) => decodeResult(line, `child ${child.name} in round ${n}`)), { concurrency: 2 })
      detail.rounds = n
      const winners = results.filter((r) => r._tag === "Continued")
      const calls = yield* providerCalls(workspace)
      const winner = winners[0]
      if (winners.length !== 1 || winner === undefined || winner._tag !== "Continued") {
        fail("HarnessCheckFailed", `round ${n}: ${winners.length} children continued: ${JSON.stringify(results)}`)
      } else {
        const loser = results.find((r) => r !== winner)!
        const kind = loserKind(loser)
        if (kind === undefined) fail("HarnessCheckFailed", `round ${n}: the loser ended with ${JSON.stringify(loser)}`)
        else detail.losers[kind] = (detail.losers[kind] ?? 0) + 1
        if (calls.length === 1 && calls[0]!.pid === winner.pid && calls[0]!.runId === winner.runId) detail.oneCall++
        else fail("HarnessCheckFailed", `round ${n}: the provider calls are ${JSON.stringify(calls)}, expected one by pid ${winner.pid}`)
      }
      const invariants = yield* checkInvariants(store, workspace)
      for (const p of invariants.problems) fail("HarnessCheckFailed", `round ${n}: ${p}`)
      if (invariants.live.length !== 1) fail("HarnessCheckFailed", `round ${n}: ${invariants.live.length} live continuations, expected 1`)
      const difference = sourceDifference(before, yield* snapshotSource(store, workspace))
      if (difference !== undefined) {
        unchanged = false
        fail("HarnessCheckFailed", `round ${n}: ${difference}`)
      }
      if (problems.length > 0) break
      // The round's folder is no longer needed: keep the disk small over 50 rounds.
      yield* fs.remove(workspace, { recursive: true })
    }
    detail.elapsedMs = (yield* Clock.currentTimeMillis) - started
    // After the last round the children end by themselves; after a stop they are killed (they wait for a next round).
    for (const child of children) {
      if (detail.rounds < rounds) yield* child.proc.kill("SIGKILL").pipe(Effect.ignore)
      yield* child.proc.exitCode.pipe(Effect.timeout(EXIT_TIMEOUT), Effect.ignore)
    }
  }).pipe(Effect.scoped)
  return steps.pipe(
    Effect.catchAllCause(catchRow(fail)),
    Effect.map((): ContinuationRow => {
      const deterministic = detail.rounds === rounds && detail.oneCall === rounds
      const pass = problems.length === 0 && deterministic && unchanged === true
      return {
        failpoint: "C/race",
        store,
        committedPrefix: "race",
        decision: detail.rounds === 0 ? null : detail.oneCall === detail.rounds ? "one_provider_call" : "not_exactly_one_call",
        expected: "one_provider_call",
        markerWritten: null,
        deterministic,
        ledgerUnchanged: unchanged,
        pass,
        ...(pass ? {} : { error: { _tag: tag(), message: problems.join("; ") || "the race stopped early" } })
      }
    })
  )
}

/** Options of `runContinuationRows`. */
export interface ContinuationRowsOptions {
  readonly stores?: ReadonlyArray<HarnessStore>
  readonly points?: ReadonlyArray<ContinuationPoint>
  /** Also run the race per store (default true). */
  readonly race?: boolean
  readonly raceRounds?: number
  /** How many crash rows run at once (each is one or two child processes); default 2. */
  readonly concurrency?: number
}

/** The continuation rows for `runtime-resume harness`: `C/<point>` for each store and point, then `C/race` per store. */
export const runContinuationRows = (
  options: ContinuationRowsOptions = {}
): Effect.Effect<ReadonlyArray<ContinuationRow>, never, CommandExecutor.CommandExecutor | FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    const stores = options.stores ?? ["sqlite", "jsonl"]
    const points = options.points ?? CONTINUATION_POINTS
    const crashes = yield* Effect.forEach(
      stores.flatMap((store) => points.map((point) => [store, point] as const)),
      ([store, point]) => runContinuationCrashRow(store, point),
      { concurrency: options.concurrency ?? 2 }
    )
    const races = options.race === false ? [] : yield* Effect.forEach(stores, (store) =>
      runContinuationRace(store, options.raceRounds !== undefined ? { rounds: options.raceRounds } : {}))
    return [...crashes, ...races]
  })
