// `reconcile` (docs/spec/05-reconciliation.md): settles the indeterminate operations of a workspace's sealed managed runs from evidence or by
// re-running what may be re-run, one recovery bundle per operation; the caller holds the owner lock exclusively.
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { RunNotFound } from "../Domain/Errors.js"
import { FILE_WRITE_EVIDENCE_TOOL, fileWriteEvidenceProblem } from "../Domain/FileWriteEvidence.js"
import { deriveOperationId, RunId } from "../Domain/Ids.js"
import { Observation as ObservationSchema } from "../Domain/Observation.js"
import type { Observation, ObserveFailed } from "../Domain/Observation.js"
import { canonicalText, type CommittedRow, type RuntimeEvent, ToolDispatched } from "../Domain/RuntimeEvent.js"
import { type LeftReason, ReconciledOperation, ReconcileReport, UnreadableRun } from "../Domain/Settlement.js"
import { isReconcilable, type Tool, type ToolRequirements } from "../Domain/Tool.js"
import * as Failpoints from "../Services/Failpoints.js"
import * as RecoveryFailpoints from "../Services/RecoveryFailpoints.js"
import { RunHeaderStore } from "../Services/RunHeaderStore.js"
import { type CallState, RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import { enabledConfig } from "./ContinuationFacts.js"
import * as FileWriteTool from "./FileWriteTool.js"
import * as RecoveryBundle from "../Domain/Rules/RecoveryBundle.js"

/**
 * The built-in file-write observation (docs/spec/05-reconciliation.md), with its requirements already provided (see `builtinFileWrite`).
 *
 * @since 0.1.0
 * @category models
 */
export interface BuiltinFileWrite {
  /**
   * Observes an operation from its recorded `runtime-resume/file-write@1` evidence; `roots`, when given, holds the
   * roots this reconcile has resolved (one cache per `reconcile` call: see `FileWriteTool.ObserveOptions.roots`).
   */
  readonly observe: (evidence: unknown, roots?: FileWriteTool.RootCache) => Effect.Effect<Observation, ObserveFailed>
  /** Removes the operation's leftover temporary file; true when one was removed. */
  readonly removeTempFile: (evidence: unknown, operationId: string) => Effect.Effect<boolean, ObserveFailed>
}

/**
 * What `reconcile` settles, and with what.
 *
 * @since 0.1.0
 * @category models
 */
export interface ReconcileOptions<T extends Tool = Tool> {
  /** Only this run (a run without a header is reported unmanaged and left alone). */
  readonly runId?: string
  /** The host's tools (docs/spec/03-tool-boundary.md): only the host has their implementations. The CLI has none. */
  readonly tools?: ReadonlyArray<T>
  /**
   * The built-in file-write observation, for operations whose evidence names `runtime-resume/file-write@1` and whose
   * tool the host does not supply (the CLI); it also removes each such operation's leftover temporary file.
   */
  readonly fileWrite?: BuiltinFileWrite
  /**
   * A person's confirmation (a host's own start option): `idempotent` tools are re-run. Without it they are re-run only
   * with `MAKA_RUNTIME_SAFE_BOUNDARY_RESUME=1` (read through `Config`), else left `awaiting_confirmation`.
   */
  readonly confirmed?: boolean
}

/**
 * The built-in file-write observation under the root recorded in each operation's evidence, or under `root` when
 * given (a moved project); its requirements (the file systems) are captured here.
 *
 * @since 0.1.0
 * @category programs
 */
export const builtinFileWrite = (
  options: { readonly root?: string } = {}
): Effect.Effect<BuiltinFileWrite, never, FileWriteTool.FileWriteRequirements> =>
  Effect.map(Effect.context<FileWriteTool.FileWriteRequirements>(), (context) => {
    const observeOptions = options.root !== undefined ? { root: options.root } : {}
    return {
      observe: (evidence, roots) =>
        Effect.provide(FileWriteTool.observe(evidence, roots !== undefined ? { ...observeOptions, roots } : observeOptions), context),
      removeTempFile: (evidence, operationId) =>
        Effect.provide(FileWriteTool.removeTempFile(evidence, operationId, observeOptions), context)
    }
  })

// A JSON-safe description of a re-run's typed failure, as T2 records one.
const errorResult = (error: unknown): unknown => {
  if (typeof error === "object" && error !== null) {
    const tag = "_tag" in error && typeof error._tag === "string" ? error._tag : "Error"
    const message = "message" in error && typeof error.message === "string" ? error.message : String(error)
    return { error: tag, message }
  }
  return { error: "Error", message: String(error) }
}

const messageOf = (error: unknown): string =>
  typeof error === "object" && error !== null && "message" in error && typeof error.message === "string"
    ? error.message
    : String(error)

const decodeObservation = Schema.decodeUnknownEither(ObservationSchema)

// Whether built events can be written: each is strict JSON within the event limit.
const encodable = (events: ReadonlyArray<RuntimeEvent>): string | undefined => {
  for (const event of events) {
    const text = canonicalText(event)
    if (Either.isLeft(text)) return text.left.message
  }
  return undefined
}

/**
 * How many observation bundles `reconcile` commits together (`appendRecoveryBatch`): observations are pure reads, so
 * their bundles are written in groups of up to this many, one transaction each, instead of one commit per operation.
 * 256 bounds what is held in memory (the built bundles, a few KB each) and what a crash takes back (at most 256
 * observations, made again at the next `reconcile`), while the commit's cost spread over 256 bundles is negligible.
 *
 * @since 0.1.0
 * @category constants
 */
export const OBSERVATION_BATCH = 256

// A built bundle on its way to the store, and what to report once it is written.
interface Settling {
  readonly c: CallState
  readonly operationId: string
  readonly built: ReadonlyArray<RuntimeEvent>
  readonly outcome: "completed" | "parked"
  readonly reason: string
  readonly message: string
  /** Its place in the report. */
  readonly slot: number
  /** The file-write evidence whose leftover temporary file is removed once the bundle is settled. */
  readonly tempOf: unknown
}

/**
 * The evidence's `tool` field, when the evidence is an object that has one.
 *
 * @since 0.1.0
 * @category programs
 */
export const evidenceTool = (evidence: unknown): string | undefined =>
  typeof evidence === "object" && evidence !== null && "tool" in evidence && typeof evidence.tool === "string"
    ? evidence.tool
    : undefined

/**
 * Writes a built bundle. After a refusal the operation is re-read: a recorded bundle with these ids whose events are
 * canonically equal (`ts` aside) counts as done; anything else is the decision already recorded, reported as such.
 *
 * @since 0.1.0
 * @category programs
 */
export const writeBundle = (runId: RunId, callId: string, built: ReadonlyArray<RuntimeEvent>) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const written = yield* Effect.either(store.appendRecovery(runId, built))
    if (Either.isRight(written)) return { _tag: "Written" as const }
    const error = written.left
    if (error._tag === "StoreWriteFailed") return { _tag: "WriteFailed" as const, message: error.message, error }
    const state = yield* Effect.either(store.toolCallState(runId, callId))
    const recovery = Either.isRight(state) ? state.right.call?.recovery : undefined
    if (recovery === undefined) return { _tag: "Refused" as const, message: error.message }
    const ids = new Set(built.map((e) => e.id))
    // The recorded bundle ends at its decision: read only its rows, never the whole run.
    const first = Math.max(1, recovery.decidedSeq - built.length + 1)
    const seqs = Array.from({ length: recovery.decidedSeq - first + 1 }, (_, i) => first + i)
    const rows = yield* Effect.either(store.readRowsAt(runId, seqs))
    const recorded = Either.isRight(rows) ? rows.right.filter((r) => ids.has(r.event.id)).map((r) => r.event) : []
    if (RecoveryBundle.sameBundle(recorded, built)) return { _tag: "Written" as const }
    return {
      _tag: "AlreadyDecided" as const,
      message: `the decision already recorded is ${recovery.disposition} (${recovery.reasonCode}) by ` +
        `${recovery.kind} ${recovery.actor} at seq ${recovery.decidedSeq}; nothing was written`
    }
  })

/**
 * Settles the indeterminate operations of the sealed managed runs behind `RuntimeEventStore` and `RunHeaderStore` (or
 * of `options.runId`), docs/spec/05-reconciliation.md's table per recorded mode: `read_only` re-run; `idempotent` re-run with the key recorded
 * at T1 (only confirmed or with the flag); `reconcilable` observed, finalize only; `never_auto_retry` left for a
 * person. Candidates come from the call index (`unsettledCalls`); a run is read only when it has one, and then only its
 * candidates' call and dispatch rows (`readRowsAt`: no O(events) work). Everything left
 * unsettled is reported with its reason and nothing written; unmanaged runs are reported and never touched; an
 * unreadable run is reported and the others are still reconciled. Run it under the exclusive owner lock.
 *
 * @since 0.1.0
 * @category programs
 */
export const reconcile = <T extends Tool = Tool>(options: ReconcileOptions<T> = {}) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const headers = yield* RunHeaderStore
    const tools = options.tools ?? []
    const flag = yield* Effect.orElseSucceed(enabledConfig, () => false)
    const rerunIdempotent = options.confirmed === true || flag
    // The roots the built-in file-write observation resolved during this reconcile (each resolved once).
    const roots: FileWriteTool.RootCache = new Map()
    // In candidate order; an observation whose bundle waits for its group's commit holds its place (undefined) until then.
    const operations: Array<ReconciledOperation | undefined> = []
    const unreadable: Array<UnreadableRun> = []
    const unreadableRun = (runId: string, error: { readonly _tag: string; readonly message: string }) =>
      unreadable.push(new UnreadableRun({
        runId,
        error: error._tag,
        ...("reason" in error && typeof error.reason === "string" ? { reason: error.reason } : {}),
        message: error.message
      }))

    const all = yield* headers.list()
    const managed = new Set<string>(all.map((h) => h.runId))
    const listed = yield* Effect.either(store.listRuns())
    if (Either.isLeft(listed)) unreadableRun("", listed.left)
    const stored = Either.isRight(listed) ? listed.right : []
    if (options.runId !== undefined && !managed.has(options.runId) && Either.isRight(listed) && !stored.includes(RunId.make(options.runId, true))) {
      return yield* new RunNotFound({ runId: options.runId, message: `run ${options.runId} is neither in this store nor in its run headers` })
    }
    const unmanaged = stored.filter((runId) => !managed.has(runId) && (options.runId === undefined || runId === options.runId))
    const runIds = options.runId !== undefined
      ? (managed.has(options.runId) ? [RunId.make(options.runId, true)] : [])
      : all.map((h) => h.runId)

    for (const runId of runIds) {
      const unsettled = yield* Effect.either(store.unsettledCalls(runId))
      if (Either.isLeft(unsettled)) {
        unreadableRun(runId, unsettled.left)
        continue
      }
      const { calls, terminalSeq, toolBoundary } = unsettled.right
      // Not dispatched calls of a T1 run provably never ran: nothing to settle.
      const open = calls.filter((c) => c.dispatchSeq !== undefined || toolBoundary !== "t1_after_preflight_v1")
      if (open.length === 0) continue
      const report = (c: CallState, outcome: ReconciledOperation["outcome"], reason: string, message: string, slot?: number) => {
        const reported = new ReconciledOperation({
          runId,
          callId: c.callId,
          operationId: c.operationId ?? "",
          name: c.name,
          outcome,
          reason,
          message
        })
        if (slot === undefined) operations.push(reported)
        else operations[slot] = reported
      }
      const left = (c: CallState, reason: LeftReason, message: string, slot?: number) => report(c, "left", reason, message, slot)
      // Already parked by a bundle: reported as parked (a person decides next), not settled again here.
      for (const c of open) {
        if (c.recovery !== undefined) {
          report(c, "parked", c.recovery.reasonCode, `parked by ${c.recovery.kind} ${c.recovery.actor} at seq ${c.recovery.decidedSeq}`)
        }
      }
      const candidates = open.filter((c) => c.recovery === undefined)
      if (candidates.length === 0) continue
      if (terminalSeq === undefined) {
        for (const c of candidates) {
          left(c, "not_sealed", `run ${runId} is not sealed: run repair (runtime-resume repair) before settling its operations`)
        }
        continue
      }
      // Only the rows the candidates need (their calls and dispatches), in one read: no O(events) work per run.
      const seqs = candidates.flatMap((c) => c.dispatchSeq !== undefined ? [c.callSeq, c.dispatchSeq] : [c.callSeq])
      const read = yield* Effect.either(store.readRowsAt(runId, seqs))
      if (Either.isLeft(read)) {
        unreadableRun(runId, read.left)
        for (const c of candidates) left(c, "unreadable", `run ${runId} cannot be read: ${read.left.message}`)
        continue
      }
      const rows = new Map<number, CommittedRow>()
      for (const row of read.right) rows.set(row.seq, row)
      // One bundle, written on its own (`appendRecovery`), then reported in its slot; a refusal is re-read (`writeBundle`).
      const settleOne = (item: Settling) =>
        Effect.gen(function*() {
          const written = yield* writeBundle(runId, item.c.callId, item.built)
          switch (written._tag) {
            case "Written":
              yield* RecoveryFailpoints.hit("bundle_committed", { runId, callId: item.c.callId, operationId: item.operationId })
              return report(item.c, item.outcome, item.reason, item.message, item.slot)
            case "WriteFailed":
              return left(item.c, "write_failed", written.message, item.slot)
            case "AlreadyDecided":
            case "Refused":
              return left(item.c, "already_decided", written.message, item.slot)
          }
        })
      // `reconcile` removes a file-write operation's leftover temporary file once its bundle is settled.
      const removeTemp = (tempOf: unknown, operationId: string) =>
        tempOf !== undefined && options.fileWrite !== undefined
          ? Effect.ignore(options.fileWrite.removeTempFile(tempOf, operationId))
          : Effect.void
      // The observation bundles waiting for their group's commit (at most OBSERVATION_BATCH), in candidate order.
      const pending: Array<Settling> = []
      // Commits the waiting bundles in one write when the store can (`appendRecoveryBatch`), each checked as
      // `appendRecovery` checks it; a refused group (or a store without group commit) is written one bundle at a time,
      // so every report is what one `appendRecovery` per bundle reports.
      const flush = Effect.gen(function*() {
        if (pending.length === 0) return
        const items = pending.splice(0)
        const batch = store.appendRecoveryBatch
        const grouped = batch !== undefined && items.length > 1
          ? Either.isRight(yield* Effect.either(batch(runId, items.map((i) => i.built))))
          : false
        if (grouped) {
          // The leftover temporary files first: a crash after the commit leaves as few of them behind as it can.
          for (const item of items) yield* removeTemp(item.tempOf, item.operationId)
          for (const item of items) {
            yield* RecoveryFailpoints.hit("bundle_committed", { runId, callId: item.c.callId, operationId: item.operationId })
            report(item.c, item.outcome, item.reason, item.message, item.slot)
          }
          return
        }
        for (const item of items) {
          yield* settleOne(item)
          yield* removeTemp(item.tempOf, item.operationId)
        }
      })
      for (const c of candidates) {
        const callEvent = rows.get(c.callSeq)?.event
        if (callEvent === undefined || callEvent.body._tag !== "FunctionCall") {
          left(c, "unreadable", `the call index names seq ${c.callSeq}, which is not the call ${c.callId}`)
          continue
        }
        const operationId = deriveOperationId(callEvent.invocationId, c.callId)
        // A re-execution's bundle is written at once, right after its re-run (05: a crash in between re-runs it; the
        // window stays one operation wide); an observation's waits for its group (`flush`).
        const settle = (
          built: ReadonlyArray<RuntimeEvent>,
          outcome: "completed" | "parked",
          reason: string,
          message: string,
          group?: { readonly tempOf: unknown }
        ) =>
          Effect.gen(function*() {
            const tooBig = encodable(built)
            if (tooBig !== undefined) {
              left(c, "needs_person", `the bundle cannot be recorded (${tooBig}): a person must decide`)
              if (group !== undefined) yield* removeTemp(group.tempOf, operationId)
              return
            }
            const item: Settling = { c, operationId, built, outcome, reason, message, slot: operations.length, tempOf: group?.tempOf }
            operations.push(undefined)
            if (group === undefined) return yield* settleOne(item)
            pending.push(item)
            if (pending.length >= OBSERVATION_BATCH) yield* flush
          })
        if (c.dispatchSeq === undefined) {
          left(c, "needs_person", "no ToolDispatched: the call has no recorded mode (a none-boundary call); a person must decide")
          continue
        }
        const dispatchEvent = rows.get(c.dispatchSeq)?.event
        if (dispatchEvent === undefined || !(dispatchEvent.body instanceof ToolDispatched)) {
          left(c, "unreadable", `the call index names seq ${c.dispatchSeq}, which is not the dispatch of ${c.callId}`)
          continue
        }
        const dispatch = dispatchEvent.body
        const mode = dispatch.recoveryMode
        const tool = tools.find((t) => t.name === c.name)
        const ts = yield* Clock.currentTimeMillis
        if (mode === "never_auto_retry") {
          left(c, "needs_person", `${c.name} is never_auto_retry: only a person can settle it`)
          continue
        }
        if (mode === "reconcilable") {
          const evidence = dispatch.evidence
          if (evidence === undefined || c.evidenceDigest === undefined) {
            left(c, "needs_person", `${c.name} was dispatched as reconcilable without evidence: a person must decide`)
            continue
          }
          // File-write evidence whose root or path is not normal is never walked: a person decides (docs/spec/05-reconciliation.md).
          const unsound = fileWriteEvidenceProblem(evidence)
          if (unsound !== undefined) {
            left(c, "needs_person", `${c.name}'s recorded evidence cannot be observed inside its root (${unsound}): a person must decide`)
            continue
          }
          const builtin = options.fileWrite !== undefined && evidenceTool(evidence) === FILE_WRITE_EVIDENCE_TOOL
            ? options.fileWrite
            : undefined
          let observed: Effect.Effect<Observation, unknown, any>
          if (tool !== undefined) {
            if (!isReconcilable(tool)) {
              left(c, "needs_person", `the host's ${c.name} is no longer reconcilable (it has no observe): a person must decide`)
              continue
            }
            const args = Schema.decodeUnknownEither(tool.args as Schema.Schema<unknown, unknown>)(callEvent.body.args)
            if (Either.isLeft(args)) {
              left(c, "needs_person", `the recorded args of ${c.name} no longer decode: ${ParseResult.TreeFormatter.formatErrorSync(args.left)}`)
              continue
            }
            observed = tool.observe(args.right, evidence)
          } else if (builtin !== undefined) {
            observed = builtin.observe(evidence, roots)
          } else {
            left(c, "needs_host_tool", `${c.name} is reconcilable, but only its host can observe it: start the host that has it`)
            continue
          }
          const outcome = yield* Effect.either(observed as Effect.Effect<Observation, unknown>)
          if (Either.isLeft(outcome)) {
            left(c, "observe_failed", `could not observe ${c.name}: ${messageOf(outcome.left)} (tried again next time)`)
            continue
          }
          const observation = decodeObservation(outcome.right)
          if (Either.isLeft(observation)) {
            left(c, "observe_failed", `${c.name}'s observe returned no valid observation (tried again next time)`)
            continue
          }
          const o = observation.right
          yield* RecoveryFailpoints.hit("observed", { runId, callId: c.callId, operationId })
          const group = { tempOf: evidenceTool(evidence) === FILE_WRITE_EVIDENCE_TOOL ? evidence : undefined }
          if (o.observation === "matches_expected_state") {
            yield* settle(
              RecoveryBundle.reconcileCompleted(callEvent, { ts, evidenceDigest: c.evidenceDigest, result: o.result }),
              "completed",
              "reconcile_matches_expected_state",
              o.detail,
              group
            )
          } else {
            yield* settle(
              RecoveryBundle.reconcileParked(callEvent, { ts, evidenceDigest: c.evidenceDigest, observation: o.observation }),
              "parked",
              `reconcile_${o.observation}`,
              o.detail,
              group
            )
          }
          continue
        }
        // read_only and idempotent: re-run the host's implementation.
        if (tool === undefined) {
          left(c, "needs_host_tool", `${c.name} is ${mode}: only its host can re-run it; start the host that has it`)
          continue
        }
        if (mode === "idempotent" && !rerunIdempotent) {
          left(
            c,
            "awaiting_confirmation",
            `${c.name} is idempotent: re-running it is a real side effect; start with MAKA_RUNTIME_SAFE_BOUNDARY_RESUME=1 or a person's confirmation`
          )
          continue
        }
        const key = mode === "idempotent" ? c.idempotencyKey : undefined
        if (mode === "idempotent" && key === undefined) {
          left(c, "needs_person", `${c.name} was dispatched as idempotent without a key: a person must decide`)
          continue
        }
        const args = Schema.decodeUnknownEither(tool.args as Schema.Schema<unknown, unknown>)(callEvent.body.args)
        if (Either.isLeft(args)) {
          left(c, "needs_person", `the recorded args of ${c.name} no longer decode: ${ParseResult.TreeFormatter.formatErrorSync(args.left)}`)
          continue
        }
        // The observations before it commit first: a re-run is a side effect, and the bundles before it stay ahead of it.
        yield* flush
        const site = { runId, operationId, callId: c.callId }
        const exit = yield* Effect.exit(
          (tool.implementation(args.right, {
            operationId,
            callId: c.callId,
            idempotencyKey: key,
            evidence: undefined,
            failpoint: Failpoints.hit("in_implementation", site),
            failpointAt: (label) => Failpoints.hit("in_implementation", { ...site, label })
          }) as Effect.Effect<unknown, unknown>)
        )
        let result: unknown
        let isError = false
        if (Exit.isSuccess(exit)) {
          result = exit.value
        } else {
          // A typed failure is an error result, as T2 records one; a defect or an interruption writes nothing.
          const failure = Cause.failureOrCause(exit.cause)
          if (Either.isRight(failure)) {
            left(c, "reexecution_failed", `re-running ${c.name} died or was interrupted; nothing was written (tried again next time, with the same key)`)
            continue
          }
          result = errorResult(failure.left)
          isError = true
        }
        yield* RecoveryFailpoints.hit("reexecuted", { runId, callId: c.callId, operationId })
        const built = mode === "idempotent"
          ? RecoveryBundle.reexecutedIdempotent(callEvent, { ts, result, isError, idempotencyKey: key! })
          : RecoveryBundle.reexecutedReadOnly(callEvent, { ts, result, isError })
        yield* settle(
          built,
          "completed",
          mode === "idempotent" ? "reexecuted_idempotent" : "reexecuted_read_only",
          `re-ran ${c.name}${isError ? " (it failed: an error result is recorded)" : ""}`
        )
      }
      yield* flush
    }
    return new ReconcileReport({
      operations: operations.filter((o): o is ReconciledOperation => o !== undefined),
      unmanaged,
      unreadable
    })
  }).pipe(Effect.withSpan("Reconcile.reconcile")) as Effect.Effect<
    ReconcileReport,
    Effect.Effect.Error<ReturnType<RunHeaderStore["Type"]["list"]>> | RunNotFound,
    RuntimeEventStore | RunHeaderStore | ToolRequirements<T>
  >
