// The Phase 0 crash harness (docs/spec/02-resume-plan.md): for each (store, failpoint) a child process appends the committed prefix
// through the real store and is SIGKILLed; the workspace is then reopened twice and its plans checked against a literal table.
import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Console from "effect/Console"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Equal from "effect/Equal"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { fileURLToPath } from "node:url"
import { isDeepStrictEqual } from "node:util"
import { CommittedPrefix, FailpointId, RUNTIME_RESUME_FAILPOINTS } from "../src/Domain/Failpoints.js"
import type { Failpoint } from "../src/Domain/Failpoints.js"
import { RunId } from "../src/Domain/Ids.js"
import { PlanDecision, ResumePlan } from "../src/Domain/ResumePlan.js"
import { decide, Decision } from "../src/Domain/Rules/Decide.js"
import { planResume } from "../src/Domain/Rules/PlanResume.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { CLEANUP_MARKER, HARNESS_STORES, HarnessStore, READY_LINE, storeLayer } from "./Child.js"
import { EXPECTED_PLANS, EXPECTED_PREFIX, HARNESS_RUN_ID } from "./Expected.js"
import type { ExpectedPlan } from "./Expected.js"

import { errorMessage, HarnessStepFailed, snapshotDifference, snapshotLedger } from "./HarnessShared.js"
import { runToolRow, ToolCommittedPrefix, TOOL_FAILPOINTS, ToolFailpointId } from "./ToolHarness.js"
import { McpCommittedPrefix, McpDecision, McpFailpointId, MCP_FAILPOINTS, runMcpRow } from "./McpHarness.js"
import {
  ContinuationCommittedPrefix,
  ContinuationDecision,
  ContinuationFailpointId,
  runContinuationCrashRow,
  runContinuationRace
} from "./ContinuationHarness.js"
import { CONTINUATION_POINTS } from "../src/Services/ContinuationFailpoints.js"
import {
  RECOVERY_CRASH_POINTS,
  RECOVERY_RACES,
  RecoveryCommittedPrefix,
  RecoveryDecision,
  RecoveryFailpointId,
  runRecoveryCrashRow,
  runRecoveryRace
} from "./RecoveryHarness.js"
import { childArgv } from "./ChildScript.js"

export { HARNESS_STORES, HarnessStore } from "./Child.js"
export { HarnessStepFailed, type LedgerSnapshot, snapshotDifference, snapshotLedger } from "./HarnessShared.js"

// `node --import tsx Child.ts` from the sources, `node Child.js` compiled.
const CHILD_ARGV = childArgv(import.meta.url, "Child")
// The child runs `--import tsx`, which Node resolves from the working directory: the project root.
const PROJECT_ROOT = fileURLToPath(new URL("..", import.meta.url))
// How long a child may take to start and commit its prefix (tsx compiles on first use), and to die once killed.
const READY_TIMEOUT = Duration.seconds(60)
const EXIT_TIMEOUT = Duration.seconds(10)
// Small pages, so reading the five-row prefix crosses page boundaries.
const PAGE_SIZE = 2
// Rows are independent workspaces, so any value is correct. Two at once measured faster on 2 cores
// (24 rows: 58–77 s against 81–119 s one at a time, on a machine shared with other jobs): each row is mostly child startup.
const DEFAULT_CONCURRENCY = 2

/** The error of a failed row: what went wrong, and where. */
export const HarnessRowError = Schema.Struct({ _tag: Schema.String, message: Schema.String })
/** The error of a failed row. */
export type HarnessRowError = typeof HarnessRowError.Type

/**
 * One row of the harness (docs/spec/06-cli.md `harness` JSON): `null` marks a check the row never reached. `decision` is the
 * plan's decision, or `decide`'s word for a ledger error. `pass` is true only if every check held; `error` says why not.
 */
export const HarnessRow = Schema.Struct({
  failpoint: Schema.Union(FailpointId, ToolFailpointId, ContinuationFailpointId, RecoveryFailpointId, McpFailpointId),
  store: HarnessStore,
  committedPrefix: Schema.Union(CommittedPrefix, ToolCommittedPrefix, ContinuationCommittedPrefix, RecoveryCommittedPrefix, McpCommittedPrefix),
  decision: Schema.NullOr(Schema.Union(Decision, ContinuationDecision, RecoveryDecision, McpDecision)),
  expected: Schema.Union(PlanDecision, ContinuationDecision, RecoveryDecision, McpDecision),
  markerWritten: Schema.NullOr(Schema.Boolean),
  deterministic: Schema.NullOr(Schema.Boolean),
  ledgerUnchanged: Schema.NullOr(Schema.Boolean),
  pass: Schema.Boolean,
  error: Schema.optionalWith(HarnessRowError, { exact: true })
})
/** One row of the harness. */
export type HarnessRow = typeof HarnessRow.Type

/** What `runHarness` runs: both stores and all twelve failpoints unless narrowed. */
export interface HarnessOptions {
  readonly stores?: ReadonlyArray<HarnessStore>
  readonly failpoints?: ReadonlyArray<FailpointId>
  /** How many rows run at once (each row is one child process); defaults to 2. */
  readonly concurrency?: number
  /**
   * Also run the tool-boundary rows of docs/spec/03-tool-boundary.md (`T/after_t1` … `T/delivered`, per store) after the Phase 0
   * rows; `toolFailpoints` narrows them. Off by default, so `runHarness()` stays the 24 Phase 0 rows.
   */
  readonly tool?: boolean
  readonly toolFailpoints?: ReadonlyArray<ToolFailpointId>
  /**
   * Also run the continuation rows of docs/spec/04-continuation.md (`C/run_created` … `C/terminal_header_committed`: a real SIGKILL at each
   * crash point, then repair and the invariants; and `C/race`: two processes resume one boundary 50 times), per store,
   * after the tool rows; `continuationFailpoints` narrows them. Off by default.
   */
  readonly continuation?: boolean
  readonly continuationFailpoints?: ReadonlyArray<ContinuationFailpointId>
  /**
   * Also run the recovery rows of docs/spec/05-reconciliation.md (`R/before_rename` … `R/after_manual`: a real SIGKILL at each kill point, then
   * a new host start, checked against an uninterrupted run; and `R/race_reconcile`, `R/race_resolve`: two processes
   * settle one operation, 20 rounds, SQLite only), after the continuation rows; `recoveryFailpoints` narrows them.
   */
  readonly recovery?: boolean
  readonly recoveryFailpoints?: ReadonlyArray<RecoveryFailpointId>
  /**
   * Also run the MCP rows (docs/mcp.md: `M/<tool>/<point>`, a real MCP server over stdio, the host SIGKILLed inside a
   * read-only, an idempotent and a destructive call, then a new host start; `M/server_killed`), SQLite only, after the
   * recovery rows; `mcpFailpoints` narrows them. Off by default.
   */
  readonly mcp?: boolean
  readonly mcpFailpoints?: ReadonlyArray<McpFailpointId>
}

/** Test hooks of one row, to prove each check can fail. */
export interface RowOptions {
  /** The signal that ends the child; anything but SIGKILL lets its finalizer write the marker. */
  readonly signal?: "SIGKILL" | "SIGTERM"
  /** Replaces the literal expected plan. */
  readonly expected?: ExpectedPlan
  /** Runs in the fresh workspace before the child starts (a test can make the child's store fail to open). */
  readonly beforeSpawn?: (workspace: string) => Effect.Effect<void, unknown>
  /** Runs after the two reopens, before the second snapshot (a tampering test writes here). */
  readonly beforeFinalSnapshot?: (workspace: string) => Effect.Effect<void, unknown>
}

const failed = (message: string) => new HarnessStepFailed({ message })


// ---------------------------------------------------------------------------------------------------------------
// Steps 1–5: the child commits the prefix, signals readiness, and is killed.

interface CrashOutcome {
  readonly markerWritten: boolean
  /** The exit code when the child exited by itself instead of dying from the signal. */
  readonly exitCode: number | undefined
}

const crashChild = (
  store: HarnessStore,
  failpoint: Failpoint,
  workspace: string,
  signal: "SIGKILL" | "SIGTERM"
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const proc = yield* Command.make(...CHILD_ARGV, store, workspace, failpoint.id)
      .pipe(
        Command.workingDirectory(PROJECT_ROOT),
        Command.start,
        Effect.mapError((error) => failed(`could not start the child process: ${error.message}`))
      )
    const stderr = yield* proc.stderr.pipe(
      Stream.decodeText(),
      Stream.runFold("", (text, chunk) => text + chunk),
      Effect.orElseSucceed(() => ""),
      Effect.fork
    )
    const childStderr = Fiber.join(stderr).pipe(
      Effect.timeoutTo({ duration: EXIT_TIMEOUT, onTimeout: () => "", onSuccess: (text) => text.trim() })
    )
    const ready = yield* proc.stdout.pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.filter((line) => line === READY_LINE),
      Stream.runHead,
      Effect.orElseSucceed(() => Option.none<string>()),
      Effect.timeoutFail({
        duration: READY_TIMEOUT,
        onTimeout: () => failed(`child ${proc.pid} did not signal readiness within ${Duration.format(READY_TIMEOUT)}`)
      })
    )
    if (Option.isNone(ready)) {
      const exit = yield* proc.exitCode.pipe(Effect.either, Effect.timeout(EXIT_TIMEOUT), Effect.option)
      const how = Option.match(exit, {
        onNone: () => "closed its stdout",
        onSome: (e) => e._tag === "Right" ? `exited with code ${e.right}` : `died: ${e.left.message}`
      })
      return yield* failed(`the child ${how} before signalling readiness: ${yield* childStderr}`)
    }
    // Step 5. `kill` waits for the exit; after a signal, `exitCode` fails instead of returning a code.
    yield* proc.kill(signal).pipe(
      Effect.timeoutFail({ duration: EXIT_TIMEOUT, onTimeout: () => failed(`child ${proc.pid} survived ${signal}`) }),
      Effect.mapError((error) => error._tag === "HarnessStepFailed" ? error : failed(`could not kill: ${error.message}`))
    )
    const exit = yield* Effect.either(proc.exitCode)
    // Step 6, first half.
    const markerWritten = yield* fs.exists(path.join(workspace, CLEANUP_MARKER)).pipe(
      Effect.mapError((error) => failed(`could not check the cleanup marker: ${error.message}`))
    )
    const outcome: CrashOutcome = { markerWritten, exitCode: exit._tag === "Right" ? exit.right : undefined }
    return outcome
  })

// ---------------------------------------------------------------------------------------------------------------
// Steps 7–8: reopen with a new read-only store instance and plan the prefix.

/** Opens a new read-only store over the workspace, plans the harness run page by page, and closes the store. */
export const reopenAndPlan = (store: HarnessStore, workspace: string) =>
  Effect.gen(function*() {
    const ledger = yield* storeLayer(store, { workspace, readOnly: true }).pipe(
      Layer.build,
      Effect.map(Context.get(RuntimeEventStore))
    )
    return yield* planResume(ledger.readRunPages(RunId.make(HARNESS_RUN_ID), PAGE_SIZE))
  }).pipe(Effect.scoped)

const encodePlan = Schema.encodeSync(ResumePlan)

/** Whether two plans are the same value: `Equal.equals` and equal as encoded JSON. */
export const samePlan = (a: ResumePlan, b: ResumePlan): boolean =>
  Equal.equals(a, b) && JSON.stringify(encodePlan(a)) === JSON.stringify(encodePlan(b))

/** Every way a plan differs from the literal expectation, in words (empty when it matches in full). */
export const planMismatches = (plan: ResumePlan, expected: ExpectedPlan): ReadonlyArray<string> => {
  const actual: { readonly [K in keyof ExpectedPlan]: unknown } = {
    decision: plan.decision,
    reasons: [...plan.reasons],
    operations: plan.operations.map((op) => ({ callId: op.callId, name: op.name, status: op.status })),
    replay: plan.replay.map((ref) => ref.id),
    requiresVerification: plan.requiresVerification,
    terminal: plan.terminal === undefined
      ? null
      : {
        status: plan.terminal.status,
        ...(plan.terminal.failureClass !== undefined ? { failureClass: plan.terminal.failureClass } : {}),
        seq: plan.terminal.seq
      },
    highWaterSeq: plan.highWater.seq
  }
  const mismatches: Array<string> = []
  for (const key of Object.keys(expected) as Array<keyof ExpectedPlan>) {
    if (!isDeepStrictEqual(actual[key], expected[key])) {
      mismatches.push(`${key}: expected ${JSON.stringify(expected[key])}, got ${JSON.stringify(actual[key])}`)
    }
  }
  if (plan.runId !== HARNESS_RUN_ID) mismatches.push(`runId: expected ${HARNESS_RUN_ID}, got ${plan.runId}`)
  if ((plan.directive !== undefined) !== plan.requiresVerification) {
    mismatches.push(`directive: present must mean requiresVerification, got ${plan.directive !== undefined ? "a" : "no"} directive`)
  }
  return mismatches
}

// ---------------------------------------------------------------------------------------------------------------
// One row.

// What a row has found so far; it survives a failing step, so the row reports everything it reached.
class RowReport {
  decision: Decision | null = null
  markerWritten: boolean | null = null
  deterministic: boolean | null = null
  ledgerUnchanged: boolean | null = null
  errorTag: string | undefined = undefined
  readonly problems: Array<string> = []
  constructor(
    readonly store: HarnessStore,
    readonly failpoint: Failpoint,
    readonly expected: ExpectedPlan
  ) {}

  fail(tag: string, message: string): void {
    this.errorTag ??= tag
    this.problems.push(message)
  }

  toRow(): HarnessRow {
    const pass = this.problems.length === 0 && this.markerWritten === false && this.deterministic === true &&
      this.ledgerUnchanged === true
    return {
      failpoint: this.failpoint.id,
      store: this.store,
      committedPrefix: this.failpoint.committedPrefix,
      decision: this.decision,
      expected: this.expected.decision,
      markerWritten: this.markerWritten,
      deterministic: this.deterministic,
      ledgerUnchanged: this.ledgerUnchanged,
      pass,
      ...(pass ? {} : {
        error: {
          _tag: this.errorTag ?? "HarnessCheckFailed",
          message: this.problems.length > 0 ? this.problems.join("; ") : "the row stopped before all its checks ran"
        }
      })
    }
  }
}

const rowSteps = (report: RowReport, options: RowOptions) =>
  Effect.gen(function*() {
    const { failpoint, store } = report
    if (failpoint.committedPrefix !== EXPECTED_PREFIX[failpoint.id]) {
      report.fail(
        "HarnessCheckFailed",
        `failpoint ${failpoint.id} declares prefix ${failpoint.committedPrefix}, the contract says ${
          EXPECTED_PREFIX[failpoint.id]
        }`
      )
    }
    // Step 1.
    const fs = yield* FileSystem.FileSystem
    const workspace = yield* fs.makeTempDirectoryScoped({ prefix: `rr-harness-${store}-${failpoint.id}-` }).pipe(
      Effect.mapError((error) => failed(`could not create a temporary workspace: ${error.message}`))
    )
    if (options.beforeSpawn !== undefined) {
      yield* options.beforeSpawn(workspace).pipe(Effect.mapError((e) => failed(`beforeSpawn failed: ${errorMessage(e)}`)))
    }
    // Steps 2–6 (marker).
    const crash = yield* crashChild(store, failpoint, workspace, options.signal ?? "SIGKILL")
    report.markerWritten = crash.markerWritten
    if (crash.markerWritten) report.fail("HarnessCheckFailed", `the child's finalizer wrote ${CLEANUP_MARKER}`)
    if (crash.exitCode !== undefined) {
      report.fail("HarnessCheckFailed", `the child exited with code ${crash.exitCode} instead of dying from the signal`)
    }
    // Step 6 (snapshot), before anything opens the workspace.
    const before = yield* snapshotLedger(store, workspace)
    // Steps 7–8: two new store instances, one after the other.
    const plans = yield* Effect.either(
      Effect.zip(reopenAndPlan(store, workspace), reopenAndPlan(store, workspace))
    )
    if (plans._tag === "Right") {
      const [first, second] = plans.right
      report.decision = first.decision
      report.deterministic = samePlan(first, second)
      if (!report.deterministic) {
        report.fail(
          "HarnessCheckFailed",
          `the two reopened plans differ: ${JSON.stringify(encodePlan(first))} vs ${JSON.stringify(encodePlan(second))}`
        )
      }
      const mismatches = planMismatches(first, report.expected)
      if (mismatches.length > 0) {
        report.fail("HarnessCheckFailed", `the plan does not match the expected table: ${mismatches.join(", ")}`)
      }
    } else {
      const error = plans.left
      if (error._tag === "LedgerCorruption" || error._tag === "RuntimeOffsetMismatch") report.decision = decide(error)
      report.fail(error._tag, `reopening and planning failed: ${error.message}`)
    }
    // Step 9.
    if (options.beforeFinalSnapshot !== undefined) {
      yield* options.beforeFinalSnapshot(workspace).pipe(Effect.mapError((e) => failed(`tampering failed: ${errorMessage(e)}`)))
    }
    const after = yield* snapshotLedger(store, workspace)
    const difference = snapshotDifference(before, after)
    report.ledgerUnchanged = difference === undefined
    if (difference !== undefined) report.fail("HarnessCheckFailed", difference)
  }).pipe(Effect.scoped)

/**
 * Runs one (store, failpoint) row through the nine steps. Never fails: any failure, defect included, becomes
 * `pass: false` with `error`. `options` exist for tests that prove a check can fail.
 */
export const runRow = (
  store: HarnessStore,
  failpoint: Failpoint,
  options: RowOptions = {}
): Effect.Effect<HarnessRow, never, CommandExecutor.CommandExecutor | FileSystem.FileSystem | Path.Path> => {
  const report = new RowReport(store, failpoint, options.expected ?? EXPECTED_PLANS[EXPECTED_PREFIX[failpoint.id]])
  return rowSteps(report, options).pipe(
    Effect.catchAllCause((cause) =>
      Effect.sync(() => {
        const failure = Cause.failureOption(cause)
        if (Option.isSome(failure)) report.fail(failure.value._tag, failure.value.message)
        else report.fail("Defect", Cause.pretty(cause))
      })
    ),
    Effect.map(() => report.toRow())
  )
}

const progressLine = (row: HarnessRow, millis: number): string =>
  `harness: ${row.pass ? "pass" : "FAIL"} ${row.failpoint.padEnd(3)} ${row.store.padEnd(6)} ${
    row.committedPrefix.padEnd(23)
  } decision ${row.decision ?? "-"} (expected ${row.expected}) ${millis} ms` +
  (row.error !== undefined ? `\n  ${row.error._tag}: ${row.error.message}` : "")

/**
 * Runs the crash harness: one row per (store, failpoint), stores in the order sqlite, jsonl, failpoints P0–P11,
 * each in a fresh temporary workspace. Progress goes to stderr. It never fails: a failing row has `pass: false`.
 */
export const runHarness = (
  options: HarnessOptions = {}
): Effect.Effect<ReadonlyArray<HarnessRow>, never, CommandExecutor.CommandExecutor | FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    const stores = HARNESS_STORES.filter((store) => options.stores === undefined || options.stores.includes(store))
    const failpoints = RUNTIME_RESUME_FAILPOINTS.filter((failpoint) =>
      options.failpoints === undefined || options.failpoints.includes(failpoint.id)
    )
    const pairs = stores.flatMap((store) => failpoints.map((failpoint) => [store, failpoint] as const))
    const toolPairs = options.tool === true
      ? stores.flatMap((store) =>
        TOOL_FAILPOINTS.filter((f) => options.toolFailpoints === undefined || options.toolFailpoints.includes(f))
          .map((failpoint) => [store, failpoint] as const)
      )
      : []
    const wanted = (id: ContinuationFailpointId) =>
      options.continuationFailpoints === undefined || options.continuationFailpoints.includes(id)
    const crashPairs = options.continuation === true
      ? stores.flatMap((store) =>
        CONTINUATION_POINTS.filter((point) => wanted(`C/${point}`)).map((point) => [store, point] as const)
      )
      : []
    const raceStores = options.continuation === true && wanted("C/race") ? stores : []
    const wantedRecovery = (id: RecoveryFailpointId) =>
      options.recoveryFailpoints === undefined || options.recoveryFailpoints.includes(id)
    const recoveryPairs = options.recovery === true
      ? stores.flatMap((store) =>
        RECOVERY_CRASH_POINTS.filter((point) => wantedRecovery(`R/${point}`)).map((point) => [store, point] as const)
      )
      : []
    const recoveryRaces = options.recovery === true && stores.includes("sqlite")
      ? RECOVERY_RACES.filter((race) => wantedRecovery(`R/${race}`))
      : []
    const mcpRows = options.mcp === true && stores.includes("sqlite")
      ? MCP_FAILPOINTS.filter((id) => options.mcpFailpoints === undefined || options.mcpFailpoints.includes(id))
      : []
    // The number of rows that will really run: Phase 0, tool-boundary, continuation, recovery and MCP rows together.
    const total = pairs.length + toolPairs.length + crashPairs.length + raceStores.length + recoveryPairs.length + recoveryRaces.length +
      mcpRows.length
    yield* Console.error(
      `harness: ${total} rows on ${stores.join(", ")} (${pairs.length} Phase 0, ${toolPairs.length} tool-boundary, ` +
        `${crashPairs.length + raceStores.length} continuation, ${recoveryPairs.length + recoveryRaces.length} recovery, ` +
        `${mcpRows.length} MCP). ` +
        "It tests process crash (a real SIGKILL on real files), not power loss: fsync durability is not exercised."
    )
    const start = yield* Clock.currentTimeMillis
    const rows: Array<HarnessRow> = yield* Effect.forEach(pairs, ([store, failpoint]) =>
      Effect.gen(function*() {
        const rowStart = yield* Clock.currentTimeMillis
        const row = yield* runRow(store, failpoint)
        yield* Console.error(progressLine(row, (yield* Clock.currentTimeMillis) - rowStart))
        return row
      }), { concurrency: options.concurrency ?? DEFAULT_CONCURRENCY })
    const toolRows = yield* Effect.forEach(toolPairs, ([store, failpoint]) =>
      Effect.gen(function*() {
        const rowStart = yield* Clock.currentTimeMillis
        const row: HarnessRow = yield* runToolRow(store, failpoint)
        yield* Console.error(progressLine(row, (yield* Clock.currentTimeMillis) - rowStart))
        return row
      }), { concurrency: options.concurrency ?? DEFAULT_CONCURRENCY })
    rows.push(...toolRows)
    if (options.continuation === true) {
      const timed = (row: Effect.Effect<HarnessRow, never, CommandExecutor.CommandExecutor | FileSystem.FileSystem | Path.Path>) =>
        Effect.gen(function*() {
          const rowStart = yield* Clock.currentTimeMillis
          const done = yield* row
          yield* Console.error(progressLine(done, (yield* Clock.currentTimeMillis) - rowStart))
          return done
        })
      rows.push(...yield* Effect.forEach(crashPairs, ([store, point]) => timed(runContinuationCrashRow(store, point)), {
        concurrency: options.concurrency ?? DEFAULT_CONCURRENCY
      }))
      rows.push(...yield* Effect.forEach(raceStores, (store) => timed(runContinuationRace(store))))
    }
    if (options.recovery === true) {
      const timed = (row: Effect.Effect<HarnessRow, never, CommandExecutor.CommandExecutor | FileSystem.FileSystem | Path.Path>) =>
        Effect.gen(function*() {
          const rowStart = yield* Clock.currentTimeMillis
          const done = yield* row
          yield* Console.error(progressLine(done, (yield* Clock.currentTimeMillis) - rowStart))
          return done
        })
      rows.push(...yield* Effect.forEach(recoveryPairs, ([store, point]) => timed(runRecoveryCrashRow(store, point)), {
        concurrency: options.concurrency ?? DEFAULT_CONCURRENCY
      }))
      rows.push(...yield* Effect.forEach(recoveryRaces, (race) => timed(runRecoveryRace(race))))
    }
    for (const id of mcpRows) {
      const rowStart = yield* Clock.currentTimeMillis
      const row: HarnessRow = yield* runMcpRow(id)
      yield* Console.error(progressLine(row, (yield* Clock.currentTimeMillis) - rowStart))
      rows.push(row)
    }
    const passed = rows.filter((row) => row.pass).length
    yield* Console.error(
      `harness: ${passed}/${rows.length} rows passed in ${(yield* Clock.currentTimeMillis) - start} ms`
    )
    return rows
  })
