// The narrow driver one SQL dialect gives the shared ledger core (`makeSqlStore`): where and how it reads (statement
// text, parameter style, page and parameter limits), how a planned commit runs, and the few verbs that differ.
import type { SqlError } from "@effect/sql/SqlError"
import type * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type { LedgerCorruption, RunNotFound, StoreReadFailed } from "../../../Domain/Errors.js"
import type { RunId } from "../../../Domain/Ids.js"
import type { CommittedRow, RuntimeEvent } from "../../../Domain/RuntimeEvent.js"
import type { RunReader, RunRow } from "../sqlRows.js"
import type { ArgsHashes } from "../sqlDerived.js"
import type { SyncToolWrites } from "../../../Services/internal/syncToolWrites.js"
import type {
  AppendError,
  AppendOptions,
  RunBatch,
  RuntimeEventStoreShape
} from "../../../Services/RuntimeEventStore.js"
import type * as Either from "effect/Either"
import type * as Stream from "effect/Stream"
import type * as Option from "effect/Option"

/**
 * What a complete read of one run proves besides its events: its derived rows. `keep` sees each verified row in
 * order; `finish` compares the run's derived rows with what its rows give.
 *
 * @since 0.1.0
 * @category models
 */
export interface DerivedCheck {
  readonly keep: (row: CommittedRow) => void
  /** The check records every call's args hash itself: the run's reader may defer them (a driver that defers). */
  readonly hashesArgs?: boolean
  readonly finish: (reader: RunReader) => Effect.Effect<LedgerCorruption | undefined, StoreReadFailed>
}

/**
 * The core's own reads, as a driver's scan and index reads use them (`via`: a scan's snapshot connection).
 *
 * @since 0.1.0
 * @category models
 */
export interface SqlCore<Via> {
  /** The `runs` rows of some runs (at most `inLimit`) by run id; a row that does not decode is its run's corruption. */
  readonly loadRunRows: (runIds: ReadonlyArray<string>, via?: Via) => Effect.Effect<Map<string, RunRow>, LedgerCorruption | StoreReadFailed>
  readonly readRun: RuntimeEventStoreShape["readRun"]
  readonly runRows: (
    runId: RunId,
    pageSize: number,
    upToSeq?: number,
    known?: Option.Option<RunRow>,
    via?: Via,
    derived?: DerivedCheck
  ) => Stream.Stream<CommittedRow, LedgerCorruption | RunNotFound | StoreReadFailed>
}

/**
 * One `scanRuns` pass as a driver opens it: its moment of the ledger, its runs, and its derived-row proofs.
 *
 * @since 0.1.0
 * @category models
 */
export interface ScanSession<Via> {
  /** The connection every read of the pass goes through (a snapshot), or `undefined` for the driver's default. */
  readonly via: Via | undefined
  /** The runs of the pass, in listing order. */
  readonly listRuns: Effect.Effect<ReadonlyArray<RunId>, LedgerCorruption | StoreReadFailed>
  /** A fresh derived-row check for one run's read. */
  readonly derivedCheck: () => DerivedCheck
  /** The last good row up to `seq` (`ScanRuns.scanRunsWith`'s `rowAt`). */
  readonly rowAt: (runId: RunId, seq: number) => Effect.Effect<CommittedRow | undefined>
  /** The derived rows no listed run accounts for, each reported against the run it names. */
  readonly stray: (listed: ReadonlySet<string>) => Effect.Effect<ReadonlyArray<LedgerCorruption>, StoreReadFailed>
}

/**
 * What an export proves at its end besides every run being whole (the derived rows, for a driver that checks them).
 *
 * @since 0.1.0
 * @category models
 */
export interface ExportCheck {
  /** Whether a verified row is kept for `finish` (a row that can change the projection). */
  readonly keeps: (row: CommittedRow) => boolean
  readonly finish: (
    readers: ReadonlyMap<string, RunReader>,
    kept: ReadonlyMap<string, ReadonlyArray<CommittedRow>>,
    /** Each run's args hashes, when its reader deferred them (a driver that defers). */
    hashes?: ReadonlyMap<string, ArgsHashes>
  ) => Effect.Effect<void, LedgerCorruption | StoreReadFailed>
}

/**
 * One dialect of the SQL ledger (SQLite, PostgreSQL). `Via` is the connection a scan's snapshot reads through
 * (PostgreSQL's REPEATABLE READ transaction); reads given no `via` use the driver's own.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqlDriver<Via = never> {
  readonly kind: "sqlite" | "postgres"
  /** What messages name the ledger by: `SQLite ledger <path>`, `PostgreSQL workspace <location>`. */
  readonly label: string
  /** A read-only open that found no ledger: it holds no runs. */
  readonly uninitialised: boolean
  /** Rows per page of the core's own reads (`readRun`, `exportRows`). */
  readonly readPage: number
  /** The most rows one statement of a run's read returns, whatever page size the caller asked. */
  readonly pageCap: number
  /** Run ids per statement when the export loads the `runs` rows of the runs a page begins. */
  readonly inLimit: number
  /** Whether a plain read (no derived check, or one that hashes args itself) defers the verifier's args hashes. */
  readonly defersArgsHash: boolean
  /** The `StoreReadFailed` for a failed read of `what`. */
  readonly readFailed: (what: string) => (error: SqlError) => StoreReadFailed
  /** The `runs` rows of some runs (at most `inLimit`), as raw rows. */
  readonly runRowsById: (runIds: ReadonlyArray<string>, via?: Via) => Effect.Effect<ReadonlyArray<unknown>, SqlError>
  /** At most `limit` rows of a run after seq `after`, in seq order, as `accept` takes them. */
  readonly eventPage: (
    runId: string,
    after: number,
    limit: number,
    via?: Via
  ) => Effect.Effect<ReadonlyArray<unknown>, StoreReadFailed>
  /** Verifies one row of a run's read with the run's reader. */
  readonly accept: (reader: RunReader, raw: unknown) => CommittedRow | LedgerCorruption
  /** At most `count` rows of a run from seq `firstSeq` on (`readRunFrom`), with `EVENT_COLUMNS`. */
  readonly eventsFrom: (runId: string, firstSeq: number, count: number) => Effect.Effect<ReadonlyArray<unknown>, SqlError>
  /** At most `limit` rows after commit position `after`, in commit order, with `pos` and `EVENT_COLUMNS`. */
  readonly eventsAfterPos: (after: number, limit: number) => Effect.Effect<ReadonlyArray<unknown>, SqlError>
  /** The export's derived-row proof, when the driver makes one. */
  readonly exportCheck?: ExportCheck
  /** Opens one `scanRuns` pass (scoped: a snapshot closes with it). */
  readonly openScan: (core: SqlCore<Via>) => Effect.Effect<ScanSession<Via>, StoreReadFailed | LedgerCorruption, Scope.Scope>
  /** The rows at some seqs (`readRowsAt`), when the driver reads them by index; else picked from `readRun`. */
  readonly readRowsAt?: (core: SqlCore<Via>) => RuntimeEventStoreShape["readRowsAt"]

  // ---- writes ------------------------------------------------------------------------------------------

  /** A planned commit of plain appends: SQLite's BEGIN IMMEDIATE, PostgreSQL's row-locked transaction. */
  readonly appendBatch: RuntimeEventStoreShape["appendBatch"]
  /**
   * A dedicated writer's commit (T1, T2, a recovery bundle): an exact retry of the run's committed tail returns its
   * rows and writes nothing; `beforeCommit` (the inside_t2 failpoint) runs inside the transaction; `pick` makes the
   * answer from the rows.
   */
  readonly writeTool: <A>(
    runId: RunId,
    events: ReadonlyArray<RuntimeEvent>,
    mode: "t1" | "t2" | "recovery",
    options: AppendOptions | undefined,
    beforeCommit: Effect.Effect<void> | undefined,
    pick: (rows: ReadonlyArray<CommittedRow>) => A
  ) => Effect.Effect<A, AppendError>

  // ---- what only a dialect's tables answer -------------------------------------------------------------

  readonly listRuns: RuntimeEventStoreShape["listRuns"]
  readonly toolCallState: RuntimeEventStoreShape["toolCallState"]
  readonly unsettledCalls: RuntimeEventStoreShape["unsettledCalls"]
  readonly unsettledOperations: RuntimeEventStoreShape["unsettledOperations"]
  readonly integrityCheck: NonNullable<RuntimeEventStoreShape["integrityCheck"]>
  readonly rebuildDerived: NonNullable<RuntimeEventStoreShape["rebuildDerived"]>
  readonly restoreStream?: RuntimeEventStoreShape["restoreStream"]
  readonly restoreProven?: RuntimeEventStoreShape["restoreProven"]
  readonly restoreChecked?: RuntimeEventStoreShape["restoreChecked"]
  readonly appendRecoveryBatch?: RuntimeEventStoreShape["appendRecoveryBatch"]
  /** T1 with the call state read in its transaction (SQLite; PostgreSQL leaves it out). */
  readonly dispatchUnsettled?: RuntimeEventStoreShape["dispatchUnsettled"]
  /**
   * One plain append's batch written in the caller's synchronous step (SQLite): its rows, or `undefined` when another
   * write of this process holds the file (nothing was run: `appendBatch` waits for it).
   */
  readonly appendNow?: (batch: RunBatch) => Either.Either<ReadonlyArray<CommittedRow>, AppendError> | undefined
  /** T1 and T2 run in the caller's synchronous step (SQLite), registered on the store for the tool runtime. */
  readonly toolWritesNow?: SyncToolWrites
}

/**
 * `items` cut into arrays of at most `size`.
 *
 * @since 0.1.0
 * @category layers
 */
export const chunksOf = <A>(items: ReadonlyArray<A>, size: number): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}
