// The recovery crash and race rows of the harness (docs/spec/05-reconciliation.md "Crash proof"): real children SIGKILLed inside a file write,
// after a re-execution or an observation, after a bundle or a manual bundle commits; and two processes racing to settle.
import * as Command from "@effect/platform/Command"
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import Sqlite from "better-sqlite3"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { createHash } from "node:crypto"
import { lstatSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { isDeepStrictEqual } from "node:util"
import { RunId } from "../src/Domain/Ids.js"
import { RecoveryDecided, ToolDispatched } from "../src/Domain/RuntimeEvent.js"
import * as NodeNoFollowFileSystem from "../src/Layers/NodeNoFollowFileSystem.js"
import { LEDGER_FILES } from "../src/Layers/NodeRuntimeEventStore.js"
import { verificationOk, verifyWorkspace } from "../src/Programs/VerifyWorkspace.js"
import * as Failpoints from "../src/Services/Failpoints.js"
import type { RecoveryPoint } from "../src/Services/RecoveryFailpoints.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { CLEANUP_MARKER, HarnessStore } from "./Child.js"
import { childArgv } from "./ChildScript.js"
import { HarnessStepFailed } from "./HarnessShared.js"
import { repairLocked } from "./ContinuationHarness.js"
import { workspaceStores } from "./ContinuationChild.js"
import {
  atLine,
  boot,
  BootLine,
  EXECUTIONS_FILE,
  GO_FILE,
  MANUAL_ACTOR,
  MANUAL_RESULT,
  PROVIDER_CALLS_FILE,
  ProviderCall,
  RaceReconcileLine,
  READY,
  RECOVERY_CALL_ID,
  RECOVERY_RUN_ID,
  resolveOnce,
  ResolveLine,
  roundWorkspace,
  runSource,
  type Scenario,
  type SourcePoint,
  TARGET_AFTER,
  TARGET_BEFORE,
  TARGET_FILE
} from "./RecoveryChild.js"

// `node --import tsx RecoveryChild.ts` from the sources, `node RecoveryChild.js` compiled.
const CHILD_ARGV = childArgv(import.meta.url, "RecoveryChild")
const PROJECT_ROOT = fileURLToPath(new URL("..", import.meta.url))
const READY_TIMEOUT = Duration.seconds(60)
const EXIT_TIMEOUT = Duration.seconds(30)

/** The crash points of docs/spec/05-reconciliation.md, as harness rows (`R/<point>`), in the order a settlement crosses them. */
export const RECOVERY_CRASH_POINTS = [
  "before_rename",
  "after_rename",
  "after_reexecution",
  "after_observation",
  "after_bundle",
  "after_manual"
] as const
/** A crash point of docs/spec/05-reconciliation.md. */
export type RecoveryCrashPoint = typeof RECOVERY_CRASH_POINTS[number]
/** The two races of docs/spec/05-reconciliation.md (SQLite, without the owner lock): reconcile against reconcile, reconcile against resolve. */
export const RECOVERY_RACES = ["race_reconcile", "race_resolve"] as const
/** A race of docs/spec/05-reconciliation.md. */
export type RecoveryRace = typeof RECOVERY_RACES[number]

/** The recovery rows' ids. */
export const RECOVERY_FAILPOINTS = [...RECOVERY_CRASH_POINTS.map((p) => `R/${p}` as const), ...RECOVERY_RACES.map((r) => `R/${r}` as const)]
/** A recovery row's id. */
export const RecoveryFailpointId = Schema.Literal(...RECOVERY_FAILPOINTS)
/** A recovery row's id. */
export type RecoveryFailpointId = typeof RecoveryFailpointId.Type

/**
 * What the killed process had committed: the call's T1 only (killed inside the file write or after T1); the run sealed
 * by repair (killed after a re-execution or an observation); a reconciler bundle; a manual bundle; `race` for a race.
 */
export const RecoveryCommittedPrefix = Schema.Literal("t1_dispatched", "sealed", "bundle", "manual_bundle", "race")
/** What the killed process had committed. */
export type RecoveryCommittedPrefix = typeof RecoveryCommittedPrefix.Type

/**
 * What a row decided: the reason code of the operation's last bundle once recovery converged (`none` when nothing
 * settled it); for a race, `one_decision_each_round` when every round ended with exactly the decisions 05 admits.
 */
export const RecoveryDecision = Schema.Literal(
  "reconcile_matches_prior_state",
  "reconcile_matches_expected_state",
  "reexecuted_idempotent",
  "manual_edit",
  "one_decision_each_round",
  "none",
  "unexpected"
)
/** What a row decided. */
export type RecoveryDecision = typeof RecoveryDecision.Type

/** One step after the source crash: a host's start or a person's `resolve`, killed at `kill` when given. */
interface Step {
  readonly kind: "boot" | "resolve"
  readonly kill?: RecoveryPoint
}

/** One decision recorded on the operation: a bundle's disposition, reason, provenance and recovered response. */
export interface RecordedDecision {
  readonly disposition: string
  readonly reasonCode: string
  readonly kind: string
  readonly actor: string
  /** The bundle's response (`null` for a park): its result and `isError`, as JSON. */
  readonly response: string | null
}

/** The literal expectations of each crash point (never computed by the code under test). */
export const RECOVERY_EXPECTED: Record<RecoveryCrashPoint, {
  readonly scenario: Scenario
  readonly source: SourcePoint
  readonly steps: ReadonlyArray<Step>
  /** The same recovery without a kill: the reference's steps. */
  readonly reference: ReadonlyArray<Step>
  readonly prefix: RecoveryCommittedPrefix
  /** The operation's bundles once recovery converged, in order: disposition, reason code, provenance kind. */
  readonly decisions: ReadonlyArray<readonly [string, string, string]>
  /** The continuation of the source run after the last step: `continued`, or `parked` (dangling_tool_state). */
  readonly continuation: "continued" | "parked"
  /** Provider calls in all. */
  readonly providerCalls: number
  /** Executions of the idempotent tool in all (both with T1's key); `undefined` for the file write. */
  readonly executions?: number
}> = {
  before_rename: {
    scenario: "write",
    source: "before_rename",
    steps: [{ kind: "boot" }],
    reference: [{ kind: "boot" }],
    prefix: "t1_dispatched",
    decisions: [["parked", "reconcile_matches_prior_state", "reconciler"]],
    continuation: "parked",
    providerCalls: 0
  },
  after_rename: {
    scenario: "write",
    source: "after_rename",
    steps: [{ kind: "boot" }],
    reference: [{ kind: "boot" }],
    prefix: "t1_dispatched",
    decisions: [["completed", "reconcile_matches_expected_state", "reconciler"]],
    continuation: "continued",
    providerCalls: 1
  },
  after_reexecution: {
    scenario: "bump",
    source: "after_t1",
    steps: [{ kind: "boot", kill: "reexecuted" }, { kind: "boot" }],
    reference: [{ kind: "boot" }],
    prefix: "sealed",
    decisions: [["completed", "reexecuted_idempotent", "reconciler"]],
    continuation: "continued",
    providerCalls: 1,
    executions: 2
  },
  after_observation: {
    scenario: "write",
    source: "after_rename",
    steps: [{ kind: "boot", kill: "observed" }, { kind: "boot" }],
    reference: [{ kind: "boot" }],
    prefix: "sealed",
    decisions: [["completed", "reconcile_matches_expected_state", "reconciler"]],
    continuation: "continued",
    providerCalls: 1
  },
  after_bundle: {
    scenario: "write",
    source: "after_rename",
    steps: [{ kind: "boot", kill: "bundle_committed" }, { kind: "boot" }],
    reference: [{ kind: "boot" }],
    prefix: "bundle",
    decisions: [["completed", "reconcile_matches_expected_state", "reconciler"]],
    continuation: "continued",
    providerCalls: 1
  },
  after_manual: {
    scenario: "write",
    source: "before_rename",
    steps: [{ kind: "boot" }, { kind: "resolve", kill: "manual_bundle_committed" }, { kind: "boot" }],
    reference: [{ kind: "boot" }, { kind: "resolve" }, { kind: "boot" }],
    prefix: "manual_bundle",
    decisions: [["parked", "reconcile_matches_prior_state", "reconciler"], ["completed", "manual_edit", "manual"]],
    continuation: "continued",
    providerCalls: 1
  }
}

/** The error of a failed row. */
export const RecoveryRowError = Schema.Struct({ _tag: Schema.String, message: Schema.String })

/**
 * One recovery row, in the harness's row shape (docs/spec/06-cli.md `harness` JSON): `deterministic` is "the final decisions equal
 * those of an uninterrupted recovery of the same crashed state" (for a race: every round ended as 05 admits),
 * `ledgerUnchanged` is "every row read before a kill is unchanged", `markerWritten` whether a killed child's finalizer
 * ran (never, after a SIGKILL; `null` for a race). `null` marks a check never reached.
 */
export const RecoveryRow = Schema.Struct({
  failpoint: RecoveryFailpointId,
  store: HarnessStore,
  committedPrefix: RecoveryCommittedPrefix,
  decision: Schema.NullOr(RecoveryDecision),
  expected: RecoveryDecision,
  markerWritten: Schema.NullOr(Schema.Boolean),
  deterministic: Schema.NullOr(Schema.Boolean),
  ledgerUnchanged: Schema.NullOr(Schema.Boolean),
  pass: Schema.Boolean,
  error: Schema.optionalWith(RecoveryRowError, { exact: true })
})
/** One recovery row. */
export type RecoveryRow = typeof RecoveryRow.Type

/** What the checks of one crash row found (for tests). */
export interface RecoveryCrashDetail {
  /** The operation's decisions after the last step, and those of the uninterrupted reference. */
  decisions: Array<RecordedDecision>
  reference: Array<RecordedDecision>
  /** The continuation outcome of the last step, and of the reference. */
  continuation: string | null
  referenceContinuation: string | null
  /** Provider calls per source boundary. */
  providerCalls: Record<string, number>
  /** The keys the idempotent tool ran with, in order, and T1's key. */
  executions: Array<string>
  t1Key: string | null
  /** The problems found (empty when the row passed). */
  problems: Array<string>
}

/** What a race found (for tests and the row's message). */
export interface RecoveryRaceDetail {
  rounds: number
  /** Rounds that ended with exactly one bundle, the decisions 05 admits, and each loser reporting that decision. */
  admitted: number
  /** Which side's decision was recorded, by reason code, over all rounds. */
  winners: Record<string, number>
  /** How the losers ended, by kind. */
  losers: Record<string, number>
  elapsedMs: number
}

// ---------------------------------------------------------------------------------------------------------------
// Reading what happened.

/** The operation's recorded decisions (every `RecoveryDecided` of the source run, in order), with their responses. */
export const recordedDecisions = (store: HarnessStore, workspace: string) =>
  Effect.gen(function*() {
    const events = yield* RuntimeEventStore
    const rows = yield* events.readRun(RunId.make(RECOVERY_RUN_ID))
    const byId = new Map(rows.map((r) => [r.event.id as string, r.event]))
    const decisions: Array<RecordedDecision & { readonly callId: string }> = []
    let t1Key: string | null = null
    for (const row of rows) {
      const body = row.event.body
      if (body instanceof ToolDispatched && body.callId === RECOVERY_CALL_ID) t1Key = body.idempotencyKey ?? null
      if (!(body instanceof RecoveryDecided)) continue
      const response = body.outcomeEventId !== undefined ? byId.get(body.outcomeEventId)?.body : undefined
      decisions.push({
        callId: body.callId,
        disposition: body.disposition,
        reasonCode: body.reasonCode,
        kind: body.provenance.kind,
        actor: body.provenance.actor,
        response: response?._tag === "FunctionResponse" ? JSON.stringify([response.result, response.isError]) : null
      })
    }
    return { decisions, t1Key }
  }).pipe(Effect.provide(workspaceStores(store, workspace, true)))

/**
 * 05's rules over the recorded decisions of one operation, as problems: at most one reconciler bundle and at most one
 * manual one; a manual one only first or after a reconciler park; nothing after a manual or a `completed` one.
 */
export const decisionProblems = (decisions: ReadonlyArray<{ readonly disposition: string; readonly kind: string; readonly reasonCode: string }>): Array<string> => {
  const problems: Array<string> = []
  const reconcilers = decisions.filter((d) => d.kind === "reconciler").length
  const manuals = decisions.filter((d) => d.kind === "manual").length
  if (reconcilers > 1) problems.push(`${reconcilers} reconciler decisions on one operation`)
  if (manuals > 1) problems.push(`${manuals} manual decisions on one operation`)
  decisions.forEach((d, i) => {
    const earlier = decisions.slice(0, i)
    if (earlier.some((e) => e.kind === "manual" || e.disposition === "completed")) {
      problems.push(`decision ${i + 1} (${d.reasonCode}) follows a manual or completed decision`)
    }
  })
  return problems
}

/** Every committed row of the workspace as it lies on disk: SQLite's raw event rows, or the JSONL ledger's bytes. */
export const rawLedger = (store: HarnessStore, workspace: string): { readonly rows: ReadonlyArray<string>; readonly bytes: string } => {
  if (store === "jsonl") return { rows: [], bytes: readFileSync(join(workspace, LEDGER_FILES.jsonl), "latin1") }
  const db = new Sqlite(join(workspace, LEDGER_FILES.sqlite), { readonly: true, fileMustExist: true })
  try {
    const rows = db.prepare("SELECT run_id, seq, end_seq, event_id, digest, hex(bytes) AS bytes FROM events ORDER BY run_id, seq").all()
    return { rows: rows.map((r) => JSON.stringify(r)), bytes: "" }
  } finally {
    db.close()
  }
}

/** Where a later raw ledger lost or changed a row of an earlier one (`undefined`: every earlier row is unchanged). */
export const rawDifference = (before: ReturnType<typeof rawLedger>, after: ReturnType<typeof rawLedger>): string | undefined => {
  if (!after.bytes.startsWith(before.bytes)) return `the first ${before.bytes.length} bytes of the JSONL ledger changed`
  const later = new Set(after.rows)
  const gone = before.rows.find((r) => !later.has(r))
  return gone === undefined ? undefined : `an earlier SQLite row changed or vanished: ${gone.slice(0, 200)}`
}

// The target file's identity and bytes: a write by recovery would change them (rename: the inode; in place: the bytes).
const targetState = (workspace: string): string => {
  try {
    const stat = lstatSync(join(workspace, TARGET_FILE), { bigint: true })
    const bytes = readFileSync(join(workspace, TARGET_FILE))
    return `ino ${stat.ino} size ${stat.size} mtime ${stat.mtimeNs} sha256 ${createHash("sha256").update(bytes).digest("hex")}`
  } catch (error) {
    return `unreadable: ${String(error)}`
  }
}

const lines = (file: string): Array<string> => {
  try {
    return readFileSync(file, "utf8").split("\n").filter((l) => l.length > 0)
  } catch {
    return []
  }
}

/** The provider calls per source boundary (`<runId>@<seq>`). */
const providerCallsOf = (workspace: string): Record<string, number> => {
  const calls: Record<string, number> = {}
  for (const line of lines(join(workspace, PROVIDER_CALLS_FILE))) {
    const call = Schema.decodeUnknownSync(ProviderCall)(line)
    calls[call.boundary] = (calls[call.boundary] ?? 0) + 1
  }
  return calls
}

const verified = (store: HarnessStore, workspace: string) =>
  verifyWorkspace().pipe(Effect.map(verificationOk), Effect.provide(workspaceStores(store, workspace, true)))

// ---------------------------------------------------------------------------------------------------------------
// Children.

const start = (args: ReadonlyArray<string>) =>
  Command.make(...CHILD_ARGV, ...args).pipe(Command.workingDirectory(PROJECT_ROOT), Command.start)

/** A started child's stdout as a queue of lines (`null` at its end), and its stderr collected. */
const linesOf = (proc: CommandExecutor.Process) =>
  Effect.gen(function*() {
    const queue = yield* Queue.unbounded<string | null>()
    yield* proc.stdout.pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.runForEach((line) => Queue.offer(queue, line)),
      Effect.ignore,
      Effect.zipRight(Queue.offer(queue, null)),
      Effect.forkScoped
    )
    const stderr = yield* proc.stderr.pipe(Stream.decodeText(), Stream.runFold("", (a, b) => a + b), Effect.orElseSucceed(() => ""), Effect.forkScoped)
    return { lines: queue, stderr }
  })

/**
 * Runs a child to its first line. With `killAt`, that line must be the marker `at <killAt>`, and the child is then
 * SIGKILLed; without, it is the child's result line and the child ends by itself.
 */
const runChild = (args: ReadonlyArray<string>, killAt: string | undefined) =>
  Effect.scoped(Effect.gen(function*() {
    const proc = yield* start(args)
    const { lines: queue, stderr } = yield* linesOf(proc)
    const line = yield* Queue.take(queue).pipe(Effect.timeoutFail({ duration: READY_TIMEOUT, onTimeout: () => new HarnessStepFailed({ message: `${args.join(" ")}: no answer in time` }) }))
    if (killAt !== undefined) {
      yield* proc.kill("SIGKILL").pipe(Effect.timeout(EXIT_TIMEOUT), Effect.ignore)
      if (line !== atLine(killAt)) {
        return yield* Effect.fail(new HarnessStepFailed({ message: `${args.join(" ")}: printed ${JSON.stringify(line)} instead of reaching ${killAt}; ${yield* stderr.await.pipe(Effect.map(String))}` }))
      }
      return line
    }
    yield* proc.exitCode.pipe(Effect.timeout(EXIT_TIMEOUT), Effect.ignore)
    if (line === null) return yield* Effect.fail(new HarnessStepFailed({ message: `${args.join(" ")}: printed nothing; ${yield* stderr.await.pipe(Effect.map(String))}` }))
    return line
  }))

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

const decisionOf = (decisions: ReadonlyArray<RecordedDecision>): RecoveryDecision => {
  const last = decisions[decisions.length - 1]
  if (last === undefined) return "none"
  return (RecoveryDecision.literals as ReadonlyArray<string>).includes(last.reasonCode) ? last.reasonCode as RecoveryDecision : "unexpected"
}

// ---------------------------------------------------------------------------------------------------------------
// Rows.

/**
 * Runs one crash row: a child makes the source call and is SIGKILLed inside it (the file write before or after its
 * rename, or after T1 of the idempotent call); then new children run a host's start (repair → reconcile →
 * continuation) and, for `after_manual`, a person's `resolve`, one of them SIGKILLed at the row's kill point, and a
 * last one converging. The same crashed state, copied before recovery, is recovered once without a kill (in this
 * process) as the reference. Checks all of 05's list. Never fails: a failure is `pass: false`.
 */
export const runRecoveryCrashRow = (
  store: HarnessStore,
  point: RecoveryCrashPoint,
  detail: RecoveryCrashDetail = {
    decisions: [],
    reference: [],
    continuation: null,
    referenceContinuation: null,
    providerCalls: {},
    executions: [],
    t1Key: null,
    problems: []
  }
): Effect.Effect<RecoveryRow, never, CommandExecutor.CommandExecutor | FileSystem.FileSystem | Path.Path> => {
  const expected = RECOVERY_EXPECTED[point]
  const { fail, problems, tag } = collector()
  const row = {
    decision: null as RecoveryDecision | null,
    markerWritten: null as boolean | null,
    deterministic: null as boolean | null,
    ledgerUnchanged: null as boolean | null
  }
  const steps = Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const base = yield* fs.makeTempDirectoryScoped({ prefix: `rr-recovery-${store}-${point}-` })
    const workspace = join(base, "ws")
    const referenceWs = join(base, "ref")
    yield* fs.makeDirectory(workspace, { mode: 0o700 })
    const markerPath = join(workspace, CLEANUP_MARKER)
    const markerAfterKill = Effect.gen(function*() {
      const written = yield* fs.exists(markerPath)
      row.markerWritten = (row.markerWritten ?? false) || written
      if (written) fail("HarnessCheckFailed", "a killed child's finalizer ran")
    })
    // The source: a real SIGKILL inside the tool call.
    yield* runChild(["source", store, workspace, expected.scenario, expected.source], expected.source)
    yield* markerAfterKill
    const target = expected.scenario === "write" ? targetState(workspace) : undefined
    const expectTarget = expected.source === "after_rename" ? TARGET_AFTER : TARGET_BEFORE
    if (expected.scenario === "write" && readFileSync(join(workspace, TARGET_FILE), "utf8") !== expectTarget) {
      fail("HarnessCheckFailed", `after the kill at ${expected.source} the target holds ${JSON.stringify(readFileSync(join(workspace, TARGET_FILE), "utf8"))}`)
    }
    // The reference starts from the same crashed state (the recorded evidence names the same target folder).
    yield* fs.copy(workspace, referenceWs)
    const snapshots = [rawLedger(store, workspace)]
    // Recovery: each step in a new process; the killed one SIGKILLed at its point.
    let last: typeof BootLine.Type | undefined
    for (const step of expected.steps) {
      snapshots.push(rawLedger(store, workspace))
      const line = yield* runChild([step.kind, store, workspace, step.kill ?? "-"], step.kill)
      if (step.kill !== undefined) {
        yield* markerAfterKill
        continue
      }
      // A child that ended by itself ran its finalizer: clear the marker for the next kill.
      yield* fs.remove(markerPath, { force: true })
      if (step.kind === "boot") last = yield* Schema.decodeUnknown(BootLine)(line)
      else {
        const resolved = yield* Schema.decodeUnknown(ResolveLine)(line)
        if (resolved._tag !== "Recorded") fail("HarnessCheckFailed", `resolve was refused: ${resolved.message}`)
      }
    }
    detail.continuation = last?.continuation.outcome ?? null
    // The reference: the same recovery, uninterrupted, in this process.
    let referenceLast: typeof BootLine.Type | undefined
    for (const step of expected.reference) {
      // Quiet: the executor's lifecycle log lines must not reach the harness's stdout (`--json`).
      if (step.kind === "boot") referenceLast = yield* boot(store, referenceWs).pipe(Logger.withMinimumLogLevel(LogLevel.None))
      else yield* resolveOnce(store, referenceWs).pipe(Logger.withMinimumLogLevel(LogLevel.None))
    }
    detail.referenceContinuation = referenceLast?.continuation.outcome ?? null
    if (referenceLast !== undefined && referenceLast.continuation.codes.length > 0 && expected.continuation === "continued") {
      fail("HarnessCheckFailed", `the reference's continuation ended ${referenceLast.continuation.outcome}: ${referenceLast.continuation.codes.join(", ")}`)
    }
    if (last !== undefined && last.continuation.codes.length > 0 && expected.continuation === "continued") {
      fail("HarnessCheckFailed", `the continuation ended ${last.continuation.outcome}: ${last.continuation.codes.join(", ")}`)
    }

    // Every operation: at most one reconciler and one manual decision, in an order 05 admits.
    const recorded = yield* recordedDecisions(store, workspace)
    const reference = yield* recordedDecisions(store, referenceWs)
    detail.decisions = recorded.decisions
    detail.reference = reference.decisions
    detail.t1Key = recorded.t1Key
    for (const p of decisionProblems(recorded.decisions)) fail("HarnessCheckFailed", p)
    if (recorded.decisions.some((d) => d.callId !== RECOVERY_CALL_ID)) fail("HarnessCheckFailed", "a decision names another call")
    // The final decisions equal the uninterrupted reference's, and the literal expectation.
    const strip = (ds: ReadonlyArray<RecordedDecision & { callId?: string }>) =>
      ds.map((d) => ({ disposition: d.disposition, reasonCode: d.reasonCode, kind: d.kind, actor: d.actor, response: d.response }))
    row.deterministic = isDeepStrictEqual(strip(recorded.decisions), strip(reference.decisions)) &&
      detail.continuation === detail.referenceContinuation
    if (!row.deterministic) {
      fail("HarnessCheckFailed", `the decisions ${JSON.stringify(strip(recorded.decisions))} (continuation ${detail.continuation}) differ from the uninterrupted run's ${JSON.stringify(strip(reference.decisions))} (continuation ${detail.referenceContinuation})`)
    }
    row.decision = decisionOf(recorded.decisions)
    const got = recorded.decisions.map((d) => [d.disposition, d.reasonCode, d.kind])
    if (!isDeepStrictEqual(got, expected.decisions)) fail("HarnessCheckFailed", `the decisions are ${JSON.stringify(got)}, expected ${JSON.stringify(expected.decisions)}`)
    if (detail.continuation !== expected.continuation) fail("HarnessCheckFailed", `the continuation is ${detail.continuation}, expected ${expected.continuation}`)
    if (expected.decisions.some(([, reason]) => reason === "manual_edit")) {
      const manual = recorded.decisions.find((d) => d.kind === "manual")
      if (manual?.actor !== MANUAL_ACTOR || manual.response !== JSON.stringify([MANUAL_RESULT, false])) {
        fail("HarnessCheckFailed", `the manual decision is ${JSON.stringify(manual)}`)
      }
    }
    // The target file was never written by recovery.
    if (target !== undefined && targetState(workspace) !== target) {
      fail("HarnessCheckFailed", `recovery wrote the target: ${target} became ${targetState(workspace)}`)
    }
    // The idempotent tool ran at most twice, each time with T1's key.
    detail.executions = lines(join(workspace, EXECUTIONS_FILE))
    if (expected.executions !== undefined) {
      if (detail.executions.length !== expected.executions || detail.executions.length > 2) {
        fail("HarnessCheckFailed", `the idempotent tool ran ${detail.executions.length} times, expected ${expected.executions} (at most twice)`)
      }
      if (recorded.t1Key === null || detail.executions.some((k) => k !== recorded.t1Key)) {
        fail("HarnessCheckFailed", `the idempotent tool ran with keys ${JSON.stringify(detail.executions)}, T1 recorded ${recorded.t1Key}`)
      }
    } else if (detail.executions.length > 0) fail("HarnessCheckFailed", "the idempotent tool ran in a file-write scenario")
    // The provider was called at most once per boundary, and as expected.
    detail.providerCalls = providerCallsOf(workspace)
    const calls = Object.values(detail.providerCalls)
    if (calls.some((n) => n > 1)) fail("HarnessCheckFailed", `the provider was called more than once for a boundary: ${JSON.stringify(detail.providerCalls)}`)
    if (calls.reduce((a, b) => a + b, 0) !== expected.providerCalls) {
      fail("HarnessCheckFailed", `the provider was called ${JSON.stringify(detail.providerCalls)}, expected ${expected.providerCalls} call(s)`)
    }
    // `verify` passes on both ledgers.
    if (!(yield* verified(store, workspace))) fail("HarnessCheckFailed", "verify fails on the recovered workspace")
    if (!(yield* verified(store, referenceWs))) fail("HarnessCheckFailed", "verify fails on the reference workspace")
    // Every row read before a kill is unchanged.
    const final = rawLedger(store, workspace)
    const changed = snapshots.map((s) => rawDifference(s, final)).find((d) => d !== undefined)
    row.ledgerUnchanged = changed === undefined
    if (changed !== undefined) fail("HarnessCheckFailed", changed)
  }).pipe(Effect.scoped)
  return steps.pipe(
    Effect.catchAllCause(catchRow(fail)),
    Effect.map((): RecoveryRow => {
      detail.problems = problems
      const pass = problems.length === 0 && row.markerWritten === false && row.deterministic === true && row.ledgerUnchanged === true
      return {
        failpoint: `R/${point}`,
        store,
        committedPrefix: expected.prefix,
        decision: row.decision,
        expected: expected.decisions[expected.decisions.length - 1]![1] as RecoveryDecision,
        markerWritten: row.markerWritten,
        deterministic: row.deterministic,
        ledgerUnchanged: row.ledgerUnchanged,
        pass,
        ...(pass ? {} : { error: { _tag: tag(), message: problems.join("; ") || "the row stopped early" } })
      }
    })
  )
}

/**
 * Builds one race round's source in this process: the managed run's file write lands (its rename done), then the
 * writer stops before T2 (a defect at `before_t2`: nothing more is written), and repair seals the run.
 */
export const buildRaceSource = (store: HarnessStore, workspace: string) =>
  Effect.gen(function*() {
    const stop = Failpoints.layerAt("before_t2", () => Effect.dieMessage("stopped before T2"))
    yield* runSource(store, workspace, "write", stop).pipe(Effect.catchAllDefect(() => Effect.void))
    const report = yield* repairLocked(store, workspace)
    if (report.repaired.length !== 1) return yield* Effect.dieMessage(`sealing the race source failed: ${JSON.stringify(report)}`)
  }).pipe(Effect.provide(Layer.merge(NodeContext.layer, NodeNoFollowFileSystem.layer)))

/** Options of a race. */
export interface RecoveryRaceOptions {
  /** Rounds, each on a fresh workspace (default 20). */
  readonly rounds?: number
}

const takeLine = (queue: Queue.Queue<string | null>, who: string) =>
  Queue.take(queue).pipe(
    Effect.timeoutFail({ duration: READY_TIMEOUT, onTimeout: () => new HarnessStepFailed({ message: `${who} did not answer in time` }) }),
    Effect.flatMap((line) => line === null ? Effect.fail(new HarnessStepFailed({ message: `${who} ended` })) : Effect.succeed(line))
  )

// How one side of a round ended: `won` (its decision is the recorded one), or the kind of its loss; `undefined` when
// what it reported is not admitted (a second decision, a decision other than the recorded one, an error).
const sideOutcome = (role: "reconcile" | "resolve", line: string, recorded: RecordedDecision): string | undefined => {
  if (role === "resolve") {
    const r = Schema.decodeUnknownSync(ResolveLine)(line)
    if (r._tag === "Recorded") return recorded.reasonCode === "manual_edit" && r.reasonCode === "manual_edit" && !r.alreadyRecorded ? "won" : undefined
    return r.reason === "already_settled" && r.message.includes(recorded.reasonCode) ? "resolve_already_settled" : undefined
  }
  const { operations } = Schema.decodeUnknownSync(RaceReconcileLine)(line)
  if (operations.length === 0) return "reconcile_saw_it_settled"
  const o = operations[0]!
  if (operations.length === 1 && o.outcome === "completed" && o.reason === recorded.reasonCode) return "won_or_same_decision"
  if (operations.length === 1 && o.outcome === "left" && o.reason === "already_decided" && o.message.includes(recorded.reasonCode)) {
    return "reconcile_already_decided"
  }
  return undefined
}

/**
 * Runs one race on SQLite WITHOUT the owner lock: two child processes, started once, settle the same indeterminate
 * file write in each round (reconcile against reconcile, or reconcile against resolve), released together by the
 * round's `go` file. Each round: exactly one bundle, 05's rules hold, the recorded decision is one side's, the other
 * reports that decision (or found it recorded), and `verify` passes. Never fails: a failure is `pass: false`.
 */
export const runRecoveryRace = (
  race: RecoveryRace,
  options: RecoveryRaceOptions = {},
  detail: RecoveryRaceDetail = { rounds: 0, admitted: 0, winners: {}, losers: {}, elapsedMs: 0 }
): Effect.Effect<RecoveryRow, never, CommandExecutor.CommandExecutor | FileSystem.FileSystem | Path.Path> => {
  const store: HarnessStore = "sqlite"
  const rounds = options.rounds ?? 20
  const sides = race === "race_reconcile"
    ? ([["reconcile", "a"], ["reconcile", "b"]] as const)
    : ([["reconcile", "a"], ["resolve", "resolve"]] as const)
  const { fail, problems, tag } = collector()
  let unchanged: boolean | null = null
  const steps = Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const base = yield* fs.makeTempDirectoryScoped({ prefix: `rr-recovery-${race}-` })
    const children = yield* Effect.forEach(sides, ([role, name]) =>
      Effect.gen(function*() {
        const proc = yield* start(["race", store, base, `${rounds}`, race, name])
        return { name: `${role} ${name}`, role, proc, ...(yield* linesOf(proc)) }
      }))
    for (const child of children) {
      const ready = yield* takeLine(child.lines, child.name)
      if (ready !== READY) return fail("HarnessStepFailed", `${child.name} is not ready: ${ready}`)
    }
    const started = yield* Clock.currentTimeMillis
    unchanged = true
    for (let n = 1; n <= rounds; n++) {
      const workspace = roundWorkspace(base, n)
      yield* fs.makeDirectory(workspace, { mode: 0o700 })
      yield* buildRaceSource(store, workspace)
      const before = rawLedger(store, workspace)
      yield* fs.writeFileString(join(workspace, GO_FILE), "go\n")
      const answers = yield* Effect.forEach(children, (child) => takeLine(child.lines, `${child.name} in round ${n}`), { concurrency: 2 })
      detail.rounds = n
      const { decisions } = yield* recordedDecisions(store, workspace)
      const problemsBefore = problems.length
      for (const p of decisionProblems(decisions)) fail("HarnessCheckFailed", `round ${n}: ${p}`)
      const recorded = decisions[0]
      if (decisions.length !== 1 || recorded === undefined) {
        fail("HarnessCheckFailed", `round ${n}: ${decisions.length} decisions recorded, expected exactly one: ${JSON.stringify(decisions)}`)
      } else {
        detail.winners[recorded.reasonCode] = (detail.winners[recorded.reasonCode] ?? 0) + 1
        const outcomes = children.map((child, i) => sideOutcome(child.role, answers[i]!, recorded))
        if (outcomes.some((o) => o === undefined)) {
          fail("HarnessCheckFailed", `round ${n}: recorded ${recorded.reasonCode}, yet the sides answered ${JSON.stringify(answers)}`)
        } else {
          for (const o of outcomes) if (o !== "won" && o !== "won_or_same_decision") detail.losers[o!] = (detail.losers[o!] ?? 0) + 1
          // Exactly one side's decision is the recorded one; a reconciler that found the same bundle counts it as done.
          const winners = outcomes.filter((o) => o === "won" || o === "won_or_same_decision").length
          if (race === "race_resolve" && winners !== 1) fail("HarnessCheckFailed", `round ${n}: ${winners} sides report the recorded decision as theirs: ${JSON.stringify(answers)}`)
          if (race === "race_reconcile" && winners < 1) fail("HarnessCheckFailed", `round ${n}: no side reports the recorded decision: ${JSON.stringify(answers)}`)
        }
      }
      if (!(yield* verified(store, workspace))) fail("HarnessCheckFailed", `round ${n}: verify fails`)
      const difference = rawDifference(before, rawLedger(store, workspace))
      if (difference !== undefined) {
        unchanged = false
        fail("HarnessCheckFailed", `round ${n}: ${difference}`)
      }
      if (problems.length > problemsBefore) break
      detail.admitted++
      yield* fs.remove(workspace, { recursive: true })
    }
    detail.elapsedMs = (yield* Clock.currentTimeMillis) - started
    for (const child of children) {
      if (detail.rounds < rounds) yield* child.proc.kill("SIGKILL").pipe(Effect.ignore)
      yield* child.proc.exitCode.pipe(Effect.timeout(EXIT_TIMEOUT), Effect.ignore)
    }
  }).pipe(Effect.scoped)
  return steps.pipe(
    Effect.catchAllCause(catchRow(fail)),
    Effect.map((): RecoveryRow => {
      const deterministic = detail.rounds === rounds && detail.admitted === rounds
      const pass = problems.length === 0 && deterministic && unchanged === true
      return {
        failpoint: `R/${race}`,
        store,
        committedPrefix: "race",
        decision: detail.rounds === 0 ? null : detail.admitted === detail.rounds ? "one_decision_each_round" : "unexpected",
        expected: "one_decision_each_round",
        markerWritten: null,
        deterministic,
        ledgerUnchanged: unchanged,
        pass,
        ...(pass ? {} : { error: { _tag: tag(), message: problems.join("; ") || "the race stopped early" } })
      }
    })
  )
}

/** Options of `runRecoveryRows`. */
export interface RecoveryRowsOptions {
  readonly stores?: ReadonlyArray<HarnessStore>
  readonly points?: ReadonlyArray<RecoveryCrashPoint>
  /** Which races to run (SQLite only; default both when SQLite is among the stores). */
  readonly races?: ReadonlyArray<RecoveryRace>
  readonly raceRounds?: number
  /** How many crash rows run at once (default 2). */
  readonly concurrency?: number
}

/** The recovery rows for `runtime-resume harness`: `R/<point>` for each store and point, then the SQLite races. */
export const runRecoveryRows = (
  options: RecoveryRowsOptions = {}
): Effect.Effect<ReadonlyArray<RecoveryRow>, never, CommandExecutor.CommandExecutor | FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    const stores = options.stores ?? ["sqlite", "jsonl"]
    const points = options.points ?? RECOVERY_CRASH_POINTS
    const crashes = yield* Effect.forEach(
      stores.flatMap((store) => points.map((point) => [store, point] as const)),
      ([store, point]) => runRecoveryCrashRow(store, point),
      { concurrency: options.concurrency ?? 2 }
    )
    const races = stores.includes("sqlite") ? (options.races ?? RECOVERY_RACES) : []
    const raced = yield* Effect.forEach(races, (race) =>
      runRecoveryRace(race, options.raceRounds !== undefined ? { rounds: options.raceRounds } : {}))
    return [...crashes, ...raced]
  })
