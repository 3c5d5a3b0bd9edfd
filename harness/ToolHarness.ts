// The tool-boundary crash rows of the harness (docs/spec/03-tool-boundary.md): a child runs one tool call and is SIGKILLed at a boundary;
// the parent checks the resolver's decision, the projections, a re-drive from a new process and the side-effect counter.
import * as Command from "@effect/platform/Command"
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import Sqlite from "better-sqlite3"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { isDeepStrictEqual } from "node:util"
import { LEDGER_FILES } from "../src/Layers/NodeRuntimeEventStore.js"
import { planResume } from "../src/Domain/Rules/PlanResume.js"
import * as RecoveryResolver from "../src/Domain/Rules/RecoveryResolver.js"
import * as ToolProjection from "../src/Domain/Rules/ToolProjection.js"
import { TOOL_BOUNDARIES } from "../src/Services/Failpoints.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { CLEANUP_MARKER, storeLayer } from "./Child.js"
import type { HarnessStore } from "./Child.js"
import { COUNTER_FILE, TOOL_RUN_ID } from "./ToolChild.js"
import { childArgv } from "./ChildScript.js"
import { snapshotDifference, snapshotLedger } from "./HarnessShared.js"

// `node --import tsx ToolChild.ts` from the sources, `node ToolChild.js` compiled.
const CHILD_ARGV = childArgv(import.meta.url, "ToolChild")
const PROJECT_ROOT = fileURLToPath(new URL("..", import.meta.url))
const READY_TIMEOUT = Duration.seconds(60)
const EXIT_TIMEOUT = Duration.seconds(30)

/** The tool rows' ids: one per boundary, plus `T/delivered` (no failpoint: killed after the result was printed). */
export const TOOL_FAILPOINTS = [...TOOL_BOUNDARIES.map((b) => `T/${b}` as const), "T/delivered" as const]
/** A tool row's id. */
export const ToolFailpointId = Schema.Literal(...TOOL_FAILPOINTS)
/** A tool row's id. */
export type ToolFailpointId = typeof ToolFailpointId.Type
/** What a tool row's child committed before it died: T1 only, or T1 and T2. */
export const ToolCommittedPrefix = Schema.Literal("t1_dispatched", "t2_response")
/** What a tool row's child committed before it died. */
export type ToolCommittedPrefix = typeof ToolCommittedPrefix.Type

/** The literal expectations of each tool row (never computed by the code under test). */
export const TOOL_EXPECTED: Record<ToolFailpointId, {
  readonly prefix: ToolCommittedPrefix
  readonly decision: "indeterminate" | "completed"
  readonly plan: "blocked" | "safe_replay"
  readonly counter: ReadonlyArray<number>
}> = {
  "T/after_t1": { prefix: "t1_dispatched", decision: "indeterminate", plan: "blocked", counter: [0] },
  "T/in_implementation": { prefix: "t1_dispatched", decision: "indeterminate", plan: "blocked", counter: [0, 1] },
  "T/before_t2": { prefix: "t1_dispatched", decision: "indeterminate", plan: "blocked", counter: [1] },
  "T/inside_t2": { prefix: "t1_dispatched", decision: "indeterminate", plan: "blocked", counter: [1] },
  "T/after_t2": { prefix: "t2_response", decision: "completed", plan: "safe_replay", counter: [1] },
  "T/delivered": { prefix: "t2_response", decision: "completed", plan: "safe_replay", counter: [1] }
}

/** One tool row, in the harness's row shape, plus what the tool checks found. */
export interface ToolRow {
  readonly failpoint: ToolFailpointId
  readonly store: HarnessStore
  readonly committedPrefix: ToolCommittedPrefix
  readonly decision: "blocked" | "safe_replay" | "corruption" | "indeterminate" | null
  readonly expected: "blocked" | "safe_replay"
  readonly markerWritten: boolean | null
  readonly deterministic: boolean | null
  readonly ledgerUnchanged: boolean | null
  readonly pass: boolean
  readonly error?: { readonly _tag: string; readonly message: string }
}

/** Test hooks: run the deliberately broken re-drive. */
export interface ToolRowOptions {
  readonly broken?: boolean
}

/** What the tool checks of one row found (for tests): the counter, the re-drive's answer, the printed results. */
export interface ToolRowDetail {
  counter: number | null
  redrive: string | null
  printed: Array<string>
  operationDecision: string | null
}

const spawn = (store: HarnessStore, workspace: string, mode: string) =>
  Command.make(...CHILD_ARGV, store, workspace, mode).pipe(
    Command.workingDirectory(PROJECT_ROOT),
    Command.start
  )

const reopen = (store: HarnessStore, workspace: string) =>
  Effect.gen(function*() {
    const ledger = yield* storeLayer(store, { workspace, readOnly: true }).pipe(Layer.build, Effect.map(Context.get(RuntimeEventStore)))
    const rows = yield* ledger.readRun(TOOL_RUN_ID as never)
    const all = Chunk.toReadonlyArray(yield* Stream.runCollect(ledger.exportRows()))
    return { rows, rebuilt: ToolProjection.rebuild(all) }
  }).pipe(Effect.scoped)

const onlineProjection = (workspace: string): ToolProjection.Projection => {
  const db = new Sqlite(join(workspace, LEDGER_FILES.sqlite), { readonly: true, fileMustExist: true })
  try {
    return {
      operations: db.prepare(`SELECT ${ToolProjection.OPERATION_COLUMNS.join(", ")} FROM tool_operations ORDER BY operation_id`).all() as any,
      journal: db.prepare(`SELECT ${ToolProjection.JOURNAL_COLUMNS.join(", ")} FROM tool_operation_journal ORDER BY journal_id`).all() as any
    }
  } finally {
    db.close()
  }
}

/** Runs one tool row; never fails (a failure is `pass: false`). `detail` receives what the checks found. */
export const runToolRow = (
  store: HarnessStore,
  failpoint: ToolFailpointId,
  options: ToolRowOptions = {},
  detail: ToolRowDetail = { counter: null, redrive: null, printed: [], operationDecision: null }
): Effect.Effect<ToolRow, never, CommandExecutor.CommandExecutor | FileSystem.FileSystem | Path.Path> => {
  const expected = TOOL_EXPECTED[failpoint]
  const problems: Array<string> = []
  let errorTag: string | undefined
  const row = {
    decision: null as ToolRow["decision"],
    markerWritten: null as boolean | null,
    deterministic: null as boolean | null,
    ledgerUnchanged: null as boolean | null
  }
  const fail = (tag: string, message: string) => {
    errorTag ??= tag
    problems.push(message)
  }
  const mode = failpoint.slice(2)
  const steps = Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const workspace = yield* fs.makeTempDirectoryScoped({ prefix: `rr-tool-${store}-${mode}-` })
    // The crash: wait for "at <mode>", collecting printed results; then SIGKILL.
    const proc = yield* spawn(store, workspace, mode)
    const stderr = yield* proc.stderr.pipe(Stream.decodeText(), Stream.runFold("", (a, b) => a + b), Effect.orElseSucceed(() => ""), Effect.fork)
    const reached = yield* proc.stdout.pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.tap((line) => Effect.sync(() => line.startsWith("result ") && detail.printed.push(line.slice(7)))),
      Stream.filter((line) => line === `at ${mode}`),
      Stream.runHead,
      Effect.orElseSucceed(() => Option.none<string>()),
      Effect.timeoutFail({ duration: READY_TIMEOUT, onTimeout: () => new Error(`the child did not reach ${mode}`) })
    )
    if (Option.isNone(reached)) {
      yield* proc.kill("SIGKILL").pipe(Effect.ignore)
      return fail("HarnessStepFailed", `the child ended before reaching ${mode}: ${yield* stderr.await.pipe(Effect.map(String))}`)
    }
    yield* proc.kill("SIGKILL").pipe(Effect.timeout(EXIT_TIMEOUT), Effect.orDie)
    row.markerWritten = yield* fs.exists(join(workspace, CLEANUP_MARKER))
    if (row.markerWritten) fail("HarnessCheckFailed", "the child's finalizer ran")
    const before = yield* snapshotLedger(store, workspace)
    // Reopen twice: the resolver's decision matches the kill point, and both reads agree.
    const first = yield* reopen(store, workspace)
    const second = yield* reopen(store, workspace)
    const r1 = RecoveryResolver.resolve(first.rows)
    const r2 = RecoveryResolver.resolve(second.rows)
    row.deterministic = Either.isRight(r1) && Either.isRight(r2) && isDeepStrictEqual(
      r1.right.operations.map((o) => [o.callId, o.decision, o.reason]),
      r2.right.operations.map((o) => [o.callId, o.decision, o.reason])
    ) && isDeepStrictEqual(first.rebuilt, second.rebuilt)
    if (Either.isLeft(r1)) return fail(r1.left._tag, `resolving failed: ${r1.left.message}`)
    const op = r1.right.operations[0]
    detail.operationDecision = op?.decision ?? null
    if (r1.right.operations.length !== 1 || op?.decision !== expected.decision) {
      fail("HarnessCheckFailed", `the resolver decided ${JSON.stringify(r1.right.operations.map((o) => o.decision))}, expected [${expected.decision}]`)
    }
    const plan = yield* planResume(first.rows)
    row.decision = plan.decision
    if (plan.decision !== expected.plan) fail("HarnessCheckFailed", `the plan is ${plan.decision}, expected ${expected.plan}`)
    // Projections: SQLite online = rebuilt; on both stores they agree with the resolver.
    if (store === "sqlite" && !isDeepStrictEqual(onlineProjection(workspace), first.rebuilt)) {
      fail("HarnessCheckFailed", `online projection ${JSON.stringify(onlineProjection(workspace))} differs from the rebuild ${JSON.stringify(first.rebuilt)}`)
    }
    for (const projected of first.rebuilt.operations) {
      const decision = r1.right.operations.find((o) => o.callId === projected.call_id)
      if (decision === undefined || !ToolProjection.agreesWithStatus(projected.state, RecoveryResolver.toolOperationStatus(decision))) {
        fail("HarnessCheckFailed", `projection state ${projected.state} disagrees with the resolver for ${projected.call_id}`)
      }
    }
    // No result was delivered without its committed response.
    const committed = first.rows.find((r) => r.event.body._tag === "FunctionResponse")
    for (const printed of detail.printed) {
      if (committed === undefined || JSON.stringify(Schema.encodeSync(Schema.Unknown)((committed.event.body as any).result)) !== JSON.stringify(JSON.parse(printed).result)) {
        fail("HarnessCheckFailed", `the child printed a result without its committed response: ${printed}`)
      }
    }
    // Re-drive the same model call from a new process: refused by T1, the implementation not called.
    const redrive = yield* spawn(store, workspace, options.broken === true ? "redrive-broken" : "redrive")
    const answer = yield* redrive.stdout.pipe(Stream.decodeText(), Stream.runFold("", (a, b) => a + b), Effect.orElseSucceed(() => ""))
    yield* redrive.exitCode.pipe(Effect.timeout(EXIT_TIMEOUT), Effect.ignore)
    detail.redrive = answer.trim()
    if (detail.redrive !== "refused AppendRejected duplicate_dispatch") {
      fail("HarnessCheckFailed", `the re-drive answered "${detail.redrive}", expected a duplicate_dispatch refusal`)
    }
    const counterFile = join(workspace, COUNTER_FILE)
    detail.counter = (yield* fs.exists(counterFile)) ? Number(yield* fs.readFileString(counterFile)) : 0
    if (!expected.counter.includes(detail.counter)) {
      fail("HarnessCheckFailed", `the side-effect counter reads ${detail.counter}, expected ${expected.counter.join(" or ")}`)
    }
    const after = yield* snapshotLedger(store, workspace)
    const difference = snapshotDifference(before, after)
    row.ledgerUnchanged = difference === undefined
    if (difference !== undefined) fail("HarnessCheckFailed", `the re-drive or a reopen changed the ledger: ${difference}`)
  }).pipe(Effect.scoped)
  return steps.pipe(
    Effect.catchAllCause((cause) =>
      Effect.sync(() => {
        const failure = Cause.failureOption(cause)
        if (Option.isSome(failure)) {
          const e = failure.value as { _tag?: string; message?: string }
          fail(e._tag ?? "Error", e.message ?? String(e))
        } else fail("Defect", Cause.pretty(cause))
      })
    ),
    Effect.map((): ToolRow => {
      const pass = problems.length === 0 && row.markerWritten === false && row.deterministic === true && row.ledgerUnchanged === true
      return {
        failpoint,
        store,
        committedPrefix: expected.prefix,
        decision: row.decision,
        expected: expected.plan,
        markerWritten: row.markerWritten,
        deterministic: row.deterministic,
        ledgerUnchanged: row.ledgerUnchanged,
        pass,
        ...(pass ? {} : { error: { _tag: errorTag ?? "HarnessCheckFailed", message: problems.join("; ") || "the row stopped early" } })
      }
    })
  )
}
