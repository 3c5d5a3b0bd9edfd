// The typed errors a caller of runtime-resume can see (docs/spec/01-ledger.md, "Errors").
// Every error is a Schema.TaggedError with the fields a program needs and a message a person can act on.
import * as Schema from "effect/Schema"

/**
 * The closed list of reasons a committed ledger can be corrupt (docs/spec/01-ledger.md, "Reading").
 *
 * @since 0.1.0
 * @category schemas
 */
export const CorruptionReason = Schema.Literal(
  "torn_row",
  "invalid_json",
  "non_canonical",
  "schema_invalid",
  "seq_gap",
  "digest_mismatch",
  "identity_mismatch",
  "opener_invalid",
  "duplicate_event_id",
  "duplicate_call",
  "orphan_response",
  "duplicate_response",
  "name_mismatch",
  "event_after_terminal",
  "orphan_dispatch",
  "duplicate_dispatch",
  "args_hash_mismatch",
  "dispatch_order",
  "recovery_fact_invalid",
  "derived_mismatch"
)
/**
 * One of the closed list of corruption reasons.
 *
 * @since 0.1.0
 * @category models
 */
export type CorruptionReason = typeof CorruptionReason.Type

/**
 * Why an append was refused: a corruption reason it would create, or a limit, or a reserved fact.
 *
 * @since 0.1.0
 * @category schemas
 */
export const AppendRejectReason = Schema.Union(CorruptionReason, Schema.Literal("too_large", "too_deep", "reserved_fact"))
/**
 * One reason an append can be refused for.
 *
 * @since 0.1.0
 * @category models
 */
export type AppendRejectReason = typeof AppendRejectReason.Type

/**
 * A `{ seq, digest }` pair as it appears inside errors.
 *
 * @since 0.1.0
 * @category schemas
 */
export const HighWaterFields = Schema.Struct({ seq: Schema.Number, digest: Schema.String })

/**
 * A caller's expectation of a high-water: the seq, and the digest when given.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ExpectedHighWaterFields = Schema.Struct({
  seq: Schema.Number,
  digest: Schema.optionalWith(Schema.String, { exact: true })
})

/**
 * The committed ledger breaks a rule of docs/spec/01-ledger.md; the reader never repairs or skips.
 *
 * @since 0.1.0
 * @category errors
 */
export class LedgerCorruption extends Schema.TaggedError<LedgerCorruption>()("LedgerCorruption", {
  runId: Schema.String,
  seq: Schema.optionalWith(Schema.Number, { exact: true }),
  line: Schema.optionalWith(Schema.Number, { exact: true }),
  eventId: Schema.optionalWith(Schema.String, { exact: true }),
  reason: CorruptionReason,
  message: Schema.String
}) {}

/**
 * The ledger file itself is damaged where no run's rows show it: its header (SQLite's `user_version` against the
 * tables it holds) or its own integrity check (SQLite's `quick_check`: a broken index or page). Nothing reads it as clean.
 *
 * @since 0.1.0
 * @category errors
 */
export class LedgerDamaged extends Schema.TaggedError<LedgerDamaged>()("LedgerDamaged", {
  path: Schema.String,
  /** What found it: `header` or the integrity check's name. */
  check: Schema.String,
  detail: Schema.Array(Schema.String),
  message: Schema.String
}) {}

/**
 * An append was refused because it would corrupt the ledger, break a limit, or write a reserved fact; nothing was written.
 *
 * @since 0.1.0
 * @category errors
 */
export class AppendRejected extends Schema.TaggedError<AppendRejected>()("AppendRejected", {
  runId: Schema.String,
  eventId: Schema.optionalWith(Schema.String, { exact: true }),
  reason: AppendRejectReason,
  message: Schema.String
}) {}

/**
 * The run's committed high-water is not the one the caller expected.
 *
 * @since 0.1.0
 * @category errors
 */
export class RuntimeOffsetMismatch extends Schema.TaggedError<RuntimeOffsetMismatch>()("RuntimeOffsetMismatch", {
  runId: Schema.String,
  expected: ExpectedHighWaterFields,
  actual: HighWaterFields,
  message: Schema.String
}) {}

/**
 * The run already has its `RunTerminated` event; generic appends are refused.
 *
 * @since 0.1.0
 * @category errors
 */
export class RunSealed extends Schema.TaggedError<RunSealed>()("RunSealed", {
  runId: Schema.String,
  terminalSeq: Schema.Number,
  message: Schema.String
}) {}

/**
 * The recovery writer (docs/spec/05-reconciliation.md) settles operations of sealed runs only: this run has no `RunTerminated` yet
 * (reported as `not_sealed`; repair seals a managed run, the run's own host writes the terminal of an unmanaged one).
 *
 * @since 0.1.0
 * @category errors
 */
export class RunNotSealed extends Schema.TaggedError<RunNotSealed>()("RunNotSealed", {
  runId: Schema.String,
  message: Schema.String
}) {}

/**
 * No committed event of this run exists in the store.
 *
 * @since 0.1.0
 * @category errors
 */
export class RunNotFound extends Schema.TaggedError<RunNotFound>()("RunNotFound", {
  runId: Schema.String,
  message: Schema.String
}) {}

/**
 * The folder holds no ledger of the requested kind (or no folder exists).
 *
 * @since 0.1.0
 * @category errors
 */
export class WorkspaceNotFound extends Schema.TaggedError<WorkspaceNotFound>()("WorkspaceNotFound", {
  workspace: Schema.String,
  message: Schema.String
}) {}

/**
 * The folder holds both a SQLite and a JSONL ledger, and no store was named.
 *
 * @since 0.1.0
 * @category errors
 */
export class WorkspaceAmbiguous extends Schema.TaggedError<WorkspaceAmbiguous>()("WorkspaceAmbiguous", {
  workspace: Schema.String,
  message: Schema.String
}) {}

/**
 * Another live process holds the workspace's writer lock.
 *
 * @since 0.1.0
 * @category errors
 */
export class WorkspaceLocked extends Schema.TaggedError<WorkspaceLocked>()("WorkspaceLocked", {
  path: Schema.String,
  holderPid: Schema.optionalWith(Schema.Number, { exact: true }),
  message: Schema.String
}) {}

/**
 * This process's hold on the workspace's owner lock is no longer the current one (docs/stores.md "Fencing"):
 * since the epoch it recorded (`expected`), another process took the owner lock exclusively (a repair, reconcile,
 * continuation or resolve), which moved the workspace's durable owner epoch to `found`. The write was refused inside
 * its own transaction, so nothing of it was written, and no later write of this hold will be accepted. What to do: stop
 * the turn (do not retry the write, do not continue the run); the run is left open for the exclusive holder or the next
 * `runtime-resume repair`, which closes it as `interrupted_run_closed`; start the host again to take a new hold.
 *
 * @since 0.1.0
 * @category errors
 */
export class OwnershipLost extends Schema.TaggedError<OwnershipLost>()("OwnershipLost", {
  /** The ledger or workspace the write was refused on. */
  where: Schema.String,
  /** The owner epoch this process holds its ownership under. */
  expected: Schema.Number,
  /** The workspace's owner epoch now (absent when the epoch record itself is gone). */
  found: Schema.optionalWith(Schema.Number, { exact: true }),
  message: Schema.String
}) {}

/**
 * A write or its fsync failed; the append may or may not be on disk after a reopen.
 *
 * @since 0.1.0
 * @category errors
 */
export class StoreWriteFailed extends Schema.TaggedError<StoreWriteFailed>()("StoreWriteFailed", {
  runId: Schema.String,
  cause: Schema.String,
  message: Schema.String
}) {}

/**
 * The store could not be opened or read for a reason outside the ledger's content (permissions, I/O).
 *
 * @since 0.1.0
 * @category errors
 */
export class StoreReadFailed extends Schema.TaggedError<StoreReadFailed>()("StoreReadFailed", {
  path: Schema.String,
  cause: Schema.String,
  message: Schema.String
}) {}

/**
 * Any error a store operation can fail with.
 *
 * @since 0.1.0
 * @category models
 */
export type StoreError =
  | LedgerCorruption
  | AppendRejected
  | RuntimeOffsetMismatch
  | RunSealed
  | RunNotFound
  | WorkspaceNotFound
  | WorkspaceAmbiguous
  | WorkspaceLocked
  | StoreWriteFailed
  | StoreReadFailed

/**
 * Why `import` refused a file: a ledger rule or limit, or a problem of the file itself (docs/spec/06-cli.md, `import`).
 *
 * @since 0.1.0
 * @category schemas
 */
export const ImportInvalidReason = Schema.Union(
  AppendRejectReason,
  Schema.Literal("unreadable", "invalid_utf8", "mixed_formats", "group_invalid", "stored_conflict"),
  // The recovery section of a version 2 export (docs/wire-format.md, "Export file").
  Schema.Literal(
    "version_unsupported",
    "export_truncated",
    "record_invalid",
    "header_invalid",
    "duplicate_header",
    "claim_invalid",
    "duplicate_claim",
    "header_conflict"
  )
)
/**
 * One reason `import` can refuse a file for.
 *
 * @since 0.1.0
 * @category models
 */
export type ImportInvalidReason = typeof ImportInvalidReason.Type

/**
 * `import` refused its file, naming the line (1-based, physical) when there is one; nothing was written.
 *
 * @since 0.1.0
 * @category errors
 */
export class ImportInvalid extends Schema.TaggedError<ImportInvalid>()("ImportInvalid", {
  file: Schema.String,
  line: Schema.optionalWith(Schema.Number, { exact: true }),
  runId: Schema.optionalWith(Schema.String, { exact: true }),
  eventId: Schema.optionalWith(Schema.String, { exact: true }),
  reason: ImportInvalidReason,
  message: Schema.String
}) {}

/**
 * `export` could not write its output file; a partial file it had created is removed.
 *
 * @since 0.1.0
 * @category errors
 */
export class ExportFailed extends Schema.TaggedError<ExportFailed>()("ExportFailed", {
  file: Schema.String,
  cause: Schema.String,
  message: Schema.String
}) {}
