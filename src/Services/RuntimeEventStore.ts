// The RuntimeEventStore service (docs/spec/01-ledger.md): an append-only, hash-chained ledger of RuntimeEvents.
// The Tag and its interface live here; the SQLite, JSONL and memory implementations live in src/Layers.
import type * as Effect from "effect/Effect"
import type * as Stream from "effect/Stream"
import * as Context from "effect/Context"
import type {
  AppendRejected,
  LedgerCorruption,
  RunNotFound,
  RunNotSealed,
  RunSealed,
  RuntimeOffsetMismatch,
  StoreReadFailed,
  StoreWriteFailed,
  OwnershipLost
} from "../Domain/Errors.js"
import type { RunHeaderCorruption } from "../Domain/ContinuationErrors.js"
import type { ExpectedHighWaterInput, HighWater } from "../Domain/HighWater.js"
import type { RunId } from "../Domain/Ids.js"
import type { CallEntry, RunTail } from "../Domain/Rules/LedgerRules.js"
import type { CommittedRow, RecoveryMode, RuntimeEvent, ToolBoundary } from "../Domain/RuntimeEvent.js"

/**
 * Which kind of store a service instance is.
 *
 * @since 0.1.0
 * @category models
 */
export type StoreKind = "sqlite" | "jsonl" | "memory" | "postgres"

/**
 * Options of `append`.
 *
 * @since 0.1.0
 * @category models
 */
export interface AppendOptions {
  /** Compare-and-append: the run's high-water must be this one, or the append fails with `RuntimeOffsetMismatch`. */
  readonly expectedHighWater?: ExpectedHighWaterInput
}

/**
 * One run's part of an `appendBatch`.
 *
 * @since 0.1.0
 * @category models
 */
export interface RunBatch {
  readonly runId: RunId
  readonly events: ReadonlyArray<RuntimeEvent>
  readonly expectedHighWater?: ExpectedHighWaterInput
}

/**
 * Options of `appendBatch`.
 *
 * @since 0.1.0
 * @category models
 */
export interface AppendBatchOptions {
  /**
   * `restore` is the `import` path: the reservation of dedicated writers does not apply, but every other
   * rule does, so what it writes reads back clean. Defaults to `append`.
   */
  readonly mode?: "append" | "restore"
}

/**
 * One run's part of a `restoreStream`: how many events the stream holds for it, in one group after its tail.
 *
 * @since 0.1.0
 * @category models
 */
export interface RestorePlan {
  readonly runId: RunId
  /** The number of the run's events in the stream (at least one). */
  readonly events: number
  /** Compare-and-append on the run's tail before its first event, as in `appendBatch`. */
  readonly expectedHighWater?: ExpectedHighWaterInput
  /**
   * The high-water the run must reach with its last event (the caller's own chain over the same events): any other
   * fails the whole restore with `StoreWriteFailed` before anything is committed.
   */
  readonly expectedFinal?: { readonly seq: number; readonly digest: string }
}

/**
 * One run of a `restoreProven`: a run new to the store whose events a caller already checked in restore mode from an
 * empty run (every rule of docs/spec/01-ledger.md that does not need the store), with the state that check ended in.
 *
 * @since 0.1.0
 * @category models
 */
export interface ProvenRestorePlan {
  readonly runId: RunId
  /** The number of the run's events in the stream (at least one). */
  readonly events: number
  /** The tail the caller's check reached: its seq and digest are the high-water the store's own chain must reach. */
  readonly tail: RunTail
  /** The run's call index as the caller's check left it (each call's final entry). */
  readonly calls: ReadonlyArray<CallEntry>
}

/**
 * One event of a `restoreProven`: its run, its id and its canonical text, as the caller checked them.
 *
 * @since 0.1.0
 * @category models
 */
export interface ProvenEvent {
  readonly runId: string
  readonly id: string
  readonly text: string
  /**
   * The UTF-8 bytes of `text`, when the caller holds them (the line it read): a store may chain and write these bytes
   * instead of encoding the text. They are held to the same proof as a text: the run's chain over them must end at
   * its plan's tail, else nothing is written.
   */
  readonly bytes?: Uint8Array
}

/**
 * One piece of a `restoreChecked`: consecutive events of one run new to the store, in seq order, each with the seq
 * and digest the caller's check chained over its canonical text (the i-th event has seq `firstSeq + i`).
 * `invocationId` (on a run's first piece) is the run's; `done` (on its last) is the state the caller's check ended in.
 *
 * @since 0.1.0
 * @category models
 */
export interface CheckedPiece {
  readonly runId: RunId
  readonly first: boolean
  readonly firstSeq: number
  readonly invocationId: string
  /**
   * The run's last seq as the caller expects it before reading the run (a hint, the same on each of its pieces): rows
   * up to it are written with it as their group end; the store sets the end again if the run ends elsewhere.
   */
  readonly end: number | undefined
  readonly ids: ReadonlyArray<string>
  readonly digests: ReadonlyArray<string>
  /** Each event's canonical text, or its UTF-8 bytes (written as they are). */
  readonly texts: ReadonlyArray<string | Uint8Array>
  /** The run's state as the caller's check left it after this piece's last event (its identity, on a first piece). */
  readonly tail: RunTail
  readonly done: { readonly tail: RunTail; readonly calls: ReadonlyArray<CallEntry> } | undefined
}

/**
 * Options of `readRun`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ReadRunOptions {
  /** Read only up to this seq; beyond the high-water it fails with `RuntimeOffsetMismatch`. */
  readonly upToSeq?: number
}

/**
 * What T1 writes (docs/spec/03-tool-boundary.md): the `FunctionCall` when it is not committed yet, and its `ToolDispatched`.
 *
 * @since 0.1.0
 * @category models
 */
export interface DispatchFacts {
  readonly call?: RuntimeEvent
  readonly dispatch: RuntimeEvent
}

/**
 * What the committed call index holds about one callId of a run (no scan: an indexed lookup).
 *
 * @since 0.1.0
 * @category models
 */
export interface CallState {
  readonly callId: string
  readonly name: string
  readonly argsHash: string
  readonly callSeq: number
  readonly dispatchSeq?: number
  readonly operationId?: string
  readonly responseSeq?: number
  readonly isError?: boolean
  /** From its `ToolDispatched`: the recorded recovery mode, idempotency key and evidence digest (docs/spec/05-reconciliation.md). */
  readonly recoveryMode?: RecoveryMode
  readonly idempotencyKey?: string
  readonly evidenceDigest?: string
  /** The last recovery bundle's decision, when one settled the call (docs/spec/05-reconciliation.md). */
  readonly recovery?: {
    readonly kind: "reconciler" | "manual"
    readonly disposition: "completed" | "parked"
    readonly reasonCode: string
    readonly actor: string
    readonly decidedSeq: number
  }
}

/**
 * What `dispatchUnsettled` did: T1 committed (its rows), nothing written with the state it read, or nothing read.
 *
 * @since 0.1.0
 * @category models
 */
export type DispatchUnsettled =
  | { readonly _tag: "Dispatched"; readonly rows: ReadonlyArray<CommittedRow> }
  | { readonly _tag: "State"; readonly state: ToolCallState }
  | { readonly _tag: "Unread" }

/**
 * What a tool runtime needs to know about a run and one of its calls before T1.
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolCallState {
  /** `undefined` when the run has no committed event. */
  readonly toolBoundary: ToolBoundary | undefined
  /** The seq of the run's `RunTerminated`, when it is sealed. */
  readonly terminalSeq: number | undefined
  /** The committed call, when there is one. */
  readonly call: CallState | undefined
}

/**
 * A run's calls that have no response yet (docs/spec/05-reconciliation.md: the candidates of `reconcile`, and what keeps a run blocked), read
 * off the call index in call order: indeterminate and not-dispatched calls, and calls parked by a recovery bundle.
 *
 * @since 0.1.0
 * @category models
 */
export interface UnsettledCalls {
  /** `undefined` when the run has no committed event. */
  readonly toolBoundary: ToolBoundary | undefined
  /** The seq of the run's `RunTerminated`, when it is sealed. */
  readonly terminalSeq: number | undefined
  readonly calls: ReadonlyArray<CallState>
}

/**
 * A dispatched operation with no response and no recovery bundle yet: a candidate of `reconcile` (docs/spec/05-reconciliation.md).
 *
 * @since 0.1.0
 * @category models
 */
export interface UnsettledOperation {
  readonly runId: RunId
  /** The call's index entry: its seqs, operation id, recorded mode, idempotency key and evidence digest. */
  readonly call: CallState
}

/**
 * Errors an append can fail with (`RunNotSealed` only from the recovery writer).
 *
 * @since 0.1.0
 * @category models
 */
export type AppendError = AppendRejected | RuntimeOffsetMismatch | RunSealed | RunNotSealed | StoreWriteFailed | OwnershipLost

/**
 * Errors a read can fail with.
 *
 * @since 0.1.0
 * @category models
 */
export type ReadError = LedgerCorruption | StoreReadFailed

/**
 * One item of `scanRuns`: a verified row of some run, or the end of a run's read with its corruption (`lastGood`:
 * its last row that verified, if any). A run's items come in seq order; runs first appear in order of first commit.
 *
 * @since 0.1.0
 * @category models
 */
export type RunScanItem =
  | { readonly _tag: "Row"; readonly row: CommittedRow }
  | {
    readonly _tag: "Failed"
    readonly runId: string
    readonly error: LedgerCorruption
    readonly lastGood: CommittedRow | undefined
  }

/**
 * What a store's own integrity check found (SQLite: `PRAGMA quick_check`).
 *
 * @since 0.1.0
 * @category models
 */
export interface IntegrityReport {
  /** The file checked. */
  readonly path: string
  /** The check that ran, as a person would name it. */
  readonly check: string
  readonly ok: boolean
  /** What the check reported when it failed (its first lines). */
  readonly detail: ReadonlyArray<string>
}

/**
 * What rebuilding a store's derived state wrote: rows per derived table.
 *
 * @since 0.1.0
 * @category models
 */
export interface DerivedRebuild {
  readonly runs: number
  readonly tables: Readonly<Record<string, number>>
}

/**
 * The operations every store provides. Methods have no requirements of their own.
 *
 * @since 0.1.0
 * @category models
 */
export interface RuntimeEventStoreShape {
  /** Which kind of store this is. */
  readonly kind: StoreKind
  /**
   * Appends one or more events of one run atomically and returns the committed rows. Refuses anything that
   * would corrupt the ledger (`AppendRejected`), a sealed run (`RunSealed`) or a stale expectation.
   */
  readonly append: (
    runId: RunId,
    events: ReadonlyArray<RuntimeEvent>,
    options?: AppendOptions
  ) => Effect.Effect<ReadonlyArray<CommittedRow>, AppendError>
  /**
   * Appends events of several runs in one write (one transaction on SQLite; one write and one fsync on
   * JSONL, one contiguous group per run in order). All or nothing; each run is validated as by `append`.
   */
  readonly appendBatch: (
    batches: ReadonlyArray<RunBatch>,
    options?: AppendBatchOptions
  ) => Effect.Effect<ReadonlyArray<ReadonlyArray<CommittedRow>>, AppendError>
  /**
   * `appendBatch` in restore mode for more events than memory should hold: the events of `plans[0]`, then of
   * `plans[1]`, … arrive through `events` in seq order, and are checked and written piece by piece, in ONE write
   * (one transaction on SQLite; one write then one fsync on JSONL, one group per run, under the interrupted-import
   * marker). All or nothing: any refusal, a failure of the stream, or a count that does not match the plans writes
   * nothing. Returns each run's high-water after the write. Stores without it (memory, PostgreSQL) take `appendBatch`.
   */
  readonly restoreStream?: <E>(
    plans: ReadonlyArray<RestorePlan>,
    events: Stream.Stream<RuntimeEvent, E>
  ) => Effect.Effect<ReadonlyArray<{ readonly seq: number; readonly digest: string }>, AppendError | E>
  /**
   * `restoreStream` of runs the caller already checked (`import`'s check pass): the store does not decode or check
   * each event again, but still checks what only it can see (each run is new to it; no event id and no invocation is
   * used by a stored run, refused as `restoreStream` refuses them), chains each event's text itself and fails the
   * whole write (`StoreWriteFailed`) unless every run reaches its plan's tail; it writes the rows and the derived rows
   * (run rows, call index) exactly as `restoreStream` would. All or nothing, in one write.
   */
  readonly restoreProven?: <E>(
    plans: ReadonlyArray<ProvenRestorePlan>,
    events: Stream.Stream<ProvenEvent, E>
  ) => Effect.Effect<ReadonlyArray<{ readonly seq: number; readonly digest: string }>, AppendError | E>
  /**
   * `import`'s one pass (docs/stores.md): runs new to the store, checked by the caller in the same pass that reads them
   * (`CheckedPiece`), written in ONE transaction as `restoreProven` writes them, the caller's digests taken as chained
   * (the bytes written are the text the caller chained). What only the store sees is refused as `restoreProven`
   * refuses it; a stream that fails rolls everything back. Returns each run's high-water, in order. On PostgreSQL only
   * a store opened over a workspace that does not exist yet has it: it creates the workspace in the same transaction.
   */
  readonly restoreChecked?: <E>(
    pieces: Stream.Stream<CheckedPiece, E>
  ) => Effect.Effect<ReadonlyArray<{ readonly seq: number; readonly digest: string }>, AppendError | E>
  /**
   * T1 (docs/spec/03-tool-boundary.md): appends the call (when given) and its `ToolDispatched` in one atomic write; on SQLite the
   * operation's projection rows are written in the same transaction. Same rules as `append`, except that the
   * dispatch is allowed (mode `t1`). An exact retry (same ids, same canonical bytes, committed as the run's
   * tail) returns the committed rows and writes nothing; any other second dispatch is `duplicate_dispatch`.
   */
  readonly appendDispatch: (
    runId: RunId,
    facts: DispatchFacts,
    options?: AppendOptions
  ) => Effect.Effect<ReadonlyArray<CommittedRow>, AppendError>
  /**
   * T1 of a call whose preflight reads no state (docs/spec/03-tool-boundary.md: a known tool, args that decode, no checks, hook or
   * evidence of its own), with `toolCallState`'s read inside the same write: in ONE write, reads the run's protocol and
   * seal and the call's index entry; when the run declares `t1_after_preflight_v1`, is not sealed, and the call has
   * neither a dispatch nor a response, appends `call` (unless the call index holds it already) and `dispatch` exactly
   * as `appendDispatch` does and returns the rows; an exact retry of that write (the same events, committed as the
   * run's tail) returns the committed rows. Otherwise it writes nothing and returns the state read (`State`),
   * and the caller goes on as after `toolCallState`; `Unread` when it could not read the state this way (the caller
   * asks `toolCallState`). Optional: without it a tool runtime reads `toolCallState`, then calls `appendDispatch`. A
   * wrapper that changes `toolCallState` or `appendDispatch` must leave this out (or change it alike).
   */
  readonly dispatchUnsettled?: (
    runId: RunId,
    call: RuntimeEvent,
    dispatch: RuntimeEvent
  ) => Effect.Effect<DispatchUnsettled, AppendError>
  /**
   * T2 (docs/spec/03-tool-boundary.md): appends the operation-bound `FunctionResponse` of a dispatched call in one atomic write
   * (with the projection rows on SQLite), hitting the `inside_t2` failpoint before it commits. An exact
   * retry converges as for `appendDispatch`; any other second response is `duplicate_response`.
   */
  readonly appendOutcome: (
    runId: RunId,
    response: RuntimeEvent,
    options?: AppendOptions
  ) => Effect.Effect<CommittedRow, AppendError>
  /**
   * The recovery writer (docs/spec/05-reconciliation.md): appends one recovery bundle that settles one operation of a sealed run, in one
   * atomic write (one transaction on SQLite, one group on JSONL). Refuses a run that is not sealed (`RunNotSealed`)
   * and any bundle that breaks a rule of docs/spec/05-reconciliation.md (`AppendRejected`, mostly `recovery_fact_invalid`), writing nothing.
   * Checked through the call index (the call's recorded mode, key, evidence digest and recovery state): O(1). An
   * exact retry (same ids, same canonical bytes, committed as the run's tail) returns the committed rows and writes
   * nothing; any other second bundle is refused with a message naming the decision already recorded.
   */
  readonly appendRecovery: (
    runId: RunId,
    events: ReadonlyArray<RuntimeEvent>,
    options?: AppendOptions
  ) => Effect.Effect<ReadonlyArray<CommittedRow>, AppendError>
  /**
   * Group commit of recovery bundles (docs/spec/05-reconciliation.md, `reconcile`): the bundles of one run, in order, each checked exactly as
   * `appendRecovery` checks it (same rules, same call-index updates), each against the state the bundles before it
   * leave, all written in ONE atomic write (one transaction on SQLite, one write and one fsync on JSONL) or none. Each
   * bundle keeps its own write group (its rows' `end` is its last seq), so the rows are those one `appendRecovery` per
   * bundle would write. Any refusal refuses the whole batch, nothing written: an exact retry is not answered here (a
   * bundle whose ids are taken refuses the batch), so a caller falls back to one `appendRecovery` per bundle, which
   * reports each bundle as it always has. Returns each bundle's committed rows. Stores without it (PostgreSQL) are
   * written one `appendRecovery` per bundle.
   */
  readonly appendRecoveryBatch?: (
    runId: RunId,
    bundles: ReadonlyArray<ReadonlyArray<RuntimeEvent>>
  ) => Effect.Effect<ReadonlyArray<ReadonlyArray<CommittedRow>>, AppendError>
  /**
   * The candidates of `reconcile` (docs/spec/05-reconciliation.md) from the call index, not from reading runs: every call with a
   * `ToolDispatched`, no response and no recovery bundle, of every run (or of `runId`), in run order then call seq.
   * Runs need not be sealed; the caller checks that (`toolCallState`), and `appendRecovery` refuses unsealed runs.
   */
  readonly unsettledOperations: (runId?: RunId) => Effect.Effect<ReadonlyArray<UnsettledOperation>, ReadError>
  /** The run's protocol and seal, and the committed state of one of its calls (indexed, no scan). */
  readonly toolCallState: (runId: RunId, callId: string) => Effect.Effect<ToolCallState, ReadError>
  /**
   * The run's calls with no response (indeterminate, not dispatched, or parked by a recovery bundle), in call order,
   * from the call index (no read of the run's events on a writer); an unknown run has none.
   */
  readonly unsettledCalls: (runId: RunId) => Effect.Effect<UnsettledCalls, ReadError>
  /** Reads and verifies one run's committed rows. */
  readonly readRun: (
    runId: RunId,
    options?: ReadRunOptions
  ) => Effect.Effect<ReadonlyArray<CommittedRow>, RunNotFound | RuntimeOffsetMismatch | ReadError>
  /**
   * The committed rows at `seqs` of one run, in the order asked, without reading the rest of the run where the store
   * can (SQLite: indexed lookups of those rows and the rows before them), so a caller that needs a few rows of a
   * long run (`reconcile`: the calls and dispatches of its candidates) does no O(events) work. Each row is checked on
   * its own: strict canonical decode, its columns and run against its event, its digest chained from the row before
   * it; the rules of the run as a whole are `readRun`'s (stores without indexed reads verify the whole run). A seq
   * outside the run's high-water is `RuntimeOffsetMismatch`.
   */
  readonly readRowsAt: (
    runId: RunId,
    seqs: ReadonlyArray<number>
  ) => Effect.Effect<ReadonlyArray<CommittedRow>, RunNotFound | RuntimeOffsetMismatch | ReadError>
  /** Reads and verifies one run's committed rows page by page, without holding the run in memory. */
  readonly readRunPages: (runId: RunId, pageSize: number) => Stream.Stream<CommittedRow, RunNotFound | ReadError>
  /**
   * A window of a run for display (the console's event lists and event pages): up to `limit` committed rows from seq
   * `fromSeq` on, in seq order, found by seq without reading the rows before them (SQLite, PostgreSQL, memory; the
   * JSONL file has no seq index, so its window is cut from a verified read of the run). Each row is decoded strictly
   * and its digest checked against the row before it (the first one against the stored digest of seq `fromSeq - 1`,
   * or the run's genesis), so the window is one unbroken piece of the chain, but it is NOT verified from the run's
   * start: that is `readRun`/`readRunPages`. Beyond the high-water there are no rows; `fromSeq` below 1 reads from 1.
   */
  readonly readRunFrom: (
    runId: RunId,
    fromSeq: number,
    limit: number
  ) => Effect.Effect<ReadonlyArray<CommittedRow>, RunNotFound | ReadError>
  /** The run's committed high-water (from its tail state; `readRun` verifies the chain behind it). */
  readonly highWater: (runId: RunId) => Effect.Effect<HighWater, RunNotFound | ReadError>
  /** Every run with a committed event, in order of its first commit. */
  readonly listRuns: () => Effect.Effect<ReadonlyArray<RunId>, ReadError>
  /** Every committed row of every run, in commit order, as `export` writes them; verified as it streams. */
  readonly exportRows: () => Stream.Stream<CommittedRow, ReadError>
  /**
   * Every run read and verified in one pass where the store can (JSONL: one read of the file whatever the number of
   * runs), each with its verdict; a store's derived rows (SQLite: run tails, call index, projections) are proven
   * against the events of their run. Without it, readers go run by run (`ScanRuns.scanRuns`). With `runId`, only
   * that run's items (its derived rows proven too).
   */
  readonly scanRuns?: (pageSize: number, runId?: RunId) => Stream.Stream<RunScanItem, ReadError | RunNotFound>
  /** The store's own check of its file (SQLite's `PRAGMA quick_check`); stores without one have none. */
  readonly integrityCheck?: () => Effect.Effect<IntegrityReport, StoreReadFailed>
  /**
   * The store's check of the files kept beside its ledger (JSONL: every record of `run-headers.jsonl`, a torn last
   * line included, docs/spec/01-ledger.md "Torn tails"): fails with what and where, as their own store would. `verify`, `inspect` and
   * `export` run it with `integrityCheck` (`ScanRuns.checkIntegrity`). Stores with nothing beside the ledger lack it.
   */
  readonly sidecarCheck?: () => Effect.Effect<void, RunHeaderCorruption | StoreReadFailed>
  /**
   * Rebuilds every derived row from the verified events, in one transaction, never touching an event; refuses
   * (`LedgerCorruption`) when the events themselves do not verify. Stores that keep nothing derived on disk lack it.
   */
  readonly rebuildDerived?: () => Effect.Effect<DerivedRebuild, LedgerCorruption | StoreWriteFailed | OwnershipLost>
}

/**
 * The ledger service. Its layers are re-exported under this name: `layerSqlite`, `layerJsonl`, `layerMemory`.
 *
 * @since 0.1.0
 * @category tags
 */
export class RuntimeEventStore extends Context.Tag("runtime-resume/RuntimeEventStore")<
  RuntimeEventStore,
  RuntimeEventStoreShape
>() {}
