// Fencing of the workspace owner lock (docs/stores.md "Fencing"): every exclusive acquisition bumps a durable owner
// epoch in the workspace; a hold records the epoch it was taken under; every write checks, inside its own transaction,
// that the epoch has not moved since. This module holds what the owners and the stores share: the epoch this process
// holds each workspace under, the typed refusal, and the epoch's place on a Node workspace (SQLite table, JSONL file).
import { globalValue } from "effect/GlobalValue"
import * as fs from "node:fs"
import * as NodePath from "node:path"
import { OwnershipLost } from "../../Domain/Errors.js"
import { kindOf, openChecked, readFileChecked } from "./safeFiles.js"

// The epoch each workspace is held under by this process, by key (a Node workspace's real path, or a PostgreSQL
// `server#workspace`), and how many holds of this process are open on it: the newest epoch this process set by an
// exclusive acquisition or read at a shared one. Process-wide on purpose, as the owner locks are: the stores consult
// it at every write.
const held = globalValue(
  Symbol.for("runtime-resume/ownerFence/held/v2"),
  () => new Map<string, { epoch: number; holds: number }>()
)

/**
 * Records that this process now holds `key` under `epoch` (an exclusive acquisition's bump, or a shared one's read);
 * `releaseHold` when that hold ends. While an older hold of this process is still open under another epoch, that
 * older epoch is kept: the older holder lost its ownership, and this process's writes stay refused until it ends.
 *
 * @since 0.1.0
 * @category layers
 */
export const recordEpoch = (key: string, epoch: number): void => {
  const entry = held.get(key)
  if (entry !== undefined && entry.holds > 0) entry.holds++
  else held.set(key, { epoch, holds: 1 })
}

/**
 * A hold recorded by `recordEpoch` ended.
 *
 * @since 0.1.0
 * @category layers
 */
export const releaseHold = (key: string): void => {
  const entry = held.get(key)
  if (entry !== undefined && entry.holds > 0) entry.holds--
}

/**
 * The epoch a store's write must find: while this process holds the workspace's owner lock (any hold open), the epoch
 * it holds it under; otherwise `undefined`, and the write checks nothing: a process outside every hold has no
 * ownership to lose (docs/spec/04-continuation.md's hosts hold the lock shared for their whole life).
 *
 * @since 0.1.0
 * @category layers
 */
export const expectedEpoch = (key: string): number | undefined => {
  const entry = held.get(key)
  return entry !== undefined && entry.holds > 0 ? entry.epoch : undefined
}

/**
 * The refusal of a write whose owner epoch moved: what happened, and what the host should do.
 *
 * @since 0.1.0
 * @category layers
 */
export const ownershipLost = (
  where: string,
  expected: number,
  found: number | undefined,
  reachedDisk = false
): OwnershipLost =>
  new OwnershipLost({
    where,
    expected,
    ...(found !== undefined ? { found } : {}),
    message: `${where}: this process no longer owns the workspace: it holds the owner lock under epoch ${expected}, but ` +
      (found === undefined
        ? "the workspace's owner epoch record is gone"
        : `another process has since taken the owner lock exclusively (a repair, reconcile, continuation or resolve; ` +
          `the owner epoch is now ${found})`) +
      (reachedDisk
        ? ". The epoch moved while this write was on its way: its bytes reached the ledger but it is NOT acknowledged " +
          "(the exclusive holder reads it as any other event)"
        : ". Nothing of this write was written") +
      ", and no later write of this process will be accepted. Stop the turn; the " +
      "run is left for that process or the next `runtime-resume repair` to close; start the host again to take a new hold"
  })

/**
 * The key of a Node workspace: its real path (the SQLite ledger's `path` is under it).
 *
 * @since 0.1.0
 * @category layers
 */
export const nodeKey = (workspace: string): string => {
  try {
    return fs.realpathSync(workspace)
  } catch {
    return NodePath.resolve(workspace)
  }
}

/**
 * The file that holds a JSONL workspace's owner epoch (one decimal line; missing means 0).
 *
 * @since 0.1.0
 * @category constants
 */
export const EPOCH_FILE_NAME = "runtime-owner.epoch"

/** The SQLite ledger file whose `owner_epoch` table holds a SQLite workspace's epoch. */
const SQLITE_FILE_NAME = "runtime.sqlite"

/**
 * The `owner_epoch` table of a SQLite workspace (one row), created by every writer open and by the first exclusive
 * acquisition (an existing workspace is migrated so; readers of older versions ignore the table).
 *
 * @since 0.1.0
 * @category constants
 */
export const SQLITE_EPOCH_TABLE = "CREATE TABLE IF NOT EXISTS owner_epoch (id INTEGER PRIMARY KEY CHECK (id = 1), epoch INTEGER NOT NULL)"

/**
 * The statement a SQLite write transaction reads the epoch with.
 *
 * @since 0.1.0
 * @category constants
 */
export const SQLITE_EPOCH_READ = "SELECT epoch FROM owner_epoch WHERE id = 1"

/**
 * Reads a JSONL workspace's epoch file: 0 when missing, `undefined` when it is not one decimal line (or not a file).
 *
 * @since 0.1.0
 * @category layers
 */
export const readEpochFile = (workspace: string): number | undefined => {
  const path = NodePath.join(workspace, EPOCH_FILE_NAME)
  let text: string
  try {
    text = readFileChecked(path).toString("utf8")
  } catch (error) {
    return (error as NodeJS.ErrnoException)?.code === "ENOENT" ? 0 : undefined
  }
  return /^[0-9]{1,15}\n$/.test(text) ? Number(text.slice(0, -1)) : undefined
}

// Writes the epoch file atomically: a new file beside it, fsynced, renamed over it, the folder fsynced.
const writeEpochFile = (workspace: string, epoch: number): void => {
  const path = NodePath.join(workspace, EPOCH_FILE_NAME)
  const temp = `${path}.tmp`
  fs.rmSync(temp, { force: true })
  const fd = openChecked(temp, "wx", 0o600)
  try {
    fs.writeFileSync(fd, `${epoch}\n`)
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
  fs.renameSync(temp, path)
  const dir = fs.openSync(workspace, "r")
  try {
    fs.fsyncSync(dir)
  } finally {
    fs.closeSync(dir)
  }
}

// The epoch a new `owner_epoch` table starts from: the epoch file's (a workspace whose first exclusive acquisition came
// before its SQLite ledger existed), else 0.
const seed = (workspace: string): number => readEpochFile(workspace) ?? 0

/**
 * Creates the `owner_epoch` table and its row if missing, on a connection inside its write transaction.
 *
 * @since 0.1.0
 * @category layers
 */
export const ensureSqliteEpoch = (run: (sql: string, params: ReadonlyArray<unknown>) => unknown, workspace: string): void => {
  run(SQLITE_EPOCH_TABLE, [])
  run("INSERT INTO owner_epoch (id, epoch) VALUES (1, ?) ON CONFLICT (id) DO NOTHING", [seed(workspace)])
}

/**
 * A minimal synchronous SQLite connection (better-sqlite3's), for the owner's own short transactions.
 *
 * @since 0.1.0
 * @category models
 */
export interface EpochConnection {
  readonly exec: (sql: string) => void
  readonly run: (sql: string, params: ReadonlyArray<unknown>) => void
  readonly get: (sql: string) => unknown
  readonly close: () => void
}

// The SQLite ledger and its side files must be regular files (or missing) before the owner opens it: SQLite would
// block for ever on a FIFO `-journal`, and must never write through a link (as the store's own open refuses them).
const requirePlainSqlite = (ledger: string): void => {
  for (const name of [ledger, `${ledger}-wal`, `${ledger}-shm`, `${ledger}-journal`]) {
    const kind = kindOf(name)
    if (kind !== "File" && kind !== "Missing") {
      throw new Error(`${name} is ${kind === "SymbolicLink" ? "a symbolic link" : `a ${kind}`}, not a regular file; move it away`)
    }
  }
}

/**
 * Moves a Node workspace's owner epoch on by one and returns it, durably, before the exclusive holder writes anything:
 * in the SQLite ledger's `owner_epoch` table in one `BEGIN IMMEDIATE` transaction (so it is ordered with every append
 * of the file), else in the epoch file. `connect` opens the SQLite ledger (the caller's driver).
 *
 * @since 0.1.0
 * @category layers
 */
export const bumpNodeEpoch = (workspace: string, connect: (path: string) => EpochConnection): number => {
  const ledger = NodePath.join(workspace, SQLITE_FILE_NAME)
  if (kindOf(ledger) === "File") {
    requirePlainSqlite(ledger)
    const db = connect(ledger)
    try {
      db.exec("BEGIN IMMEDIATE")
      try {
        ensureSqliteEpoch(db.run, workspace)
        db.run("UPDATE owner_epoch SET epoch = epoch + 1 WHERE id = 1", [])
        const row = db.get(SQLITE_EPOCH_READ) as { epoch?: unknown } | undefined
        db.exec("COMMIT")
        return Number(row?.epoch)
      } catch (error) {
        try {
          db.exec("ROLLBACK")
        } catch {
          // No transaction left open.
        }
        throw error
      }
    } finally {
      db.close()
    }
  }
  const current = readEpochFile(workspace)
  if (current === undefined) {
    throw new Error(`${NodePath.join(workspace, EPOCH_FILE_NAME)} is not one decimal line (or not a regular file); restore it from a backup`)
  }
  const next = current + 1
  writeEpochFile(workspace, next)
  return next
}

/**
 * A Node workspace's owner epoch now (what a shared hold records): from the SQLite table, else the epoch file.
 *
 * @since 0.1.0
 * @category layers
 */
export const readNodeEpoch = (workspace: string, connect: (path: string) => EpochConnection): number => {
  const ledger = NodePath.join(workspace, SQLITE_FILE_NAME)
  if (kindOf(ledger) === "File") {
    requirePlainSqlite(ledger)
    const db = connect(ledger)
    try {
      const table = db.get("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'owner_epoch'")
      if (table === undefined) return seed(workspace)
      const row = db.get(SQLITE_EPOCH_READ) as { epoch?: unknown } | undefined
      return row === undefined ? seed(workspace) : Number(row.epoch)
    } finally {
      db.close()
    }
  }
  return readEpochFile(workspace) ?? 0
}
