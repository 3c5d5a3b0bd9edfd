// The Node implementation of WorkspaceLock: SQLite's fcntl locks on a separate lock database, via better-sqlite3.
// The OS drops those locks when the holding process dies, so a crashed holder never leaves the workspace locked.
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import Sqlite from "better-sqlite3"
import * as Clock from "effect/Clock"
import * as DateTime from "effect/DateTime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as fs from "node:fs"
import * as NodePath from "node:path"
import { StoreReadFailed, WorkspaceLocked } from "../Domain/Errors.js"
import {
  holderFilePath,
  WorkspaceLock,
  type WorkspaceLatch,
  type WorkspaceLockHandle,
  type WorkspaceLockMode,
  type WorkspaceLockOptions,
  type WorkspaceLockProbe,
  type WorkspaceLockService
} from "../Services/WorkspaceLock.js"
import { describeKind, kindOf, openChecked, readFileChecked, writeFileChecked } from "./internal/safeFiles.js"

// Busy timeout of one attempt. Not 0: a reader's instant probe must not make a writer's attempt fail.
const ATTEMPT_BUSY_TIMEOUT_MS = 100
// Pause between two attempts, so other fibers get the event loop (each attempt blocks it while busy).
const RETRY_PAUSE_MS = 10

// The informational holder file, `<lock>.holder`.
const HolderJson = Schema.parseJson(Schema.Struct({ pid: Schema.Int, acquiredAt: Schema.String }))

// POSIX drops ALL of a process's fcntl locks on a file when the process closes ANY descriptor of it.
// Creating the lock file opens and closes a descriptor, so in one process, creation and lock attempts
// never interleave. Process-wide on purpose: the hazard is process-wide.
const lockFileGate = Effect.unsafeMakeSemaphore(1)

const isBusy = (error: unknown): boolean =>
  error instanceof Sqlite.SqliteError && (error.code === "SQLITE_BUSY" || error.code.startsWith("SQLITE_BUSY_"))

// A lock file's identity: the device and inode its path names.
interface Identity {
  readonly dev: number
  readonly ino: number
}

// The identity of what `path` names now (not following a link), or undefined when nothing (or not a file) is there.
const identityOf = (path: string): Identity | undefined => {
  try {
    const s = fs.lstatSync(path)
    return s.isFile() ? { dev: s.dev, ino: s.ino } : undefined
  } catch {
    return undefined
  }
}

const sameIdentity = (a: Identity | undefined, b: Identity | undefined): boolean =>
  a !== undefined && b !== undefined && a.dev === b.dev && a.ino === b.ino

/**
 * The processes that still have a REMOVED file of this lock's path open (Linux: `/proc/<pid>/fd/*` reads
 * `<path> (deleted)`): holders of a lock whose file an operator deleted. A new file at the path would lock nothing
 * against them, so an acquirer treats them as holders. Empty where `/proc` cannot be read (best-effort elsewhere).
 *
 * @since 0.1.0
 * @category layers
 */
export const removedLockHolders = (path: string): ReadonlyArray<number> => {
  if (process.platform !== "linux") return []
  let wanted: string
  try {
    wanted = `${NodePath.join(fs.realpathSync(NodePath.dirname(NodePath.resolve(path))), NodePath.basename(path))} (deleted)`
  } catch {
    return []
  }
  const pids: Array<number> = []
  let entries: Array<string>
  try {
    entries = fs.readdirSync("/proc")
  } catch {
    return []
  }
  for (const pid of entries) {
    if (!/^[0-9]+$/.test(pid)) continue
    let fds: Array<string>
    try {
      fds = fs.readdirSync(`/proc/${pid}/fd`)
    } catch {
      continue
    }
    for (const fd of fds) {
      try {
        if (fs.readlinkSync(`/proc/${pid}/fd/${fd}`) === wanted) {
          pids.push(Number(pid))
          break
        }
      } catch {
        // The descriptor closed meanwhile.
      }
    }
  }
  return pids
}

const messageOf = (error: unknown): string => error instanceof Error ? error.message : String(error)

// What to do next after a failure of the lock layer, from its error.
const nextStep = (error: unknown): string => {
  const code = (error as { code?: unknown })?.code
  const text = messageOf(error)
  if (code === "EROFS" || code === "SQLITE_READONLY" || /read-only/i.test(text)) {
    return "the folder is on a read-only file system: the read verbs (verify, inspect, export) need no lock file; " +
      "to write, copy the workspace to a writable disk"
  }
  if (code === "ENOSPC" || code === "SQLITE_FULL" || /disk is full|no space/i.test(text)) {
    return "the disk is full: free some space, then run the command again"
  }
  if (code === "EACCES" || code === "EPERM" || code === "SQLITE_PERM") {
    return "permission denied: run as the workspace's owner, or fix the folder's permissions"
  }
  return "check that the path is a regular file in a writable folder, then run the command again"
}

/** A lock-layer failure (not a busy lock) as a typed error naming the path and the next step. */
const lockFailed = (path: string, what: string, error: unknown): StoreReadFailed =>
  new StoreReadFailed({
    path,
    cause: messageOf(error),
    message: `could not ${what} the lock ${path}: ${messageOf(error)}; ${nextStep(error)}`
  })

// Fails unless `path` (and its folder) can hold a lock file: the folder not a link (a workspace reached through a link
// is refused before anything is created in it), the path missing or a regular file (never a link, folder or FIFO).
const checkLockPath = (path: string): StoreReadFailed | undefined => {
  try {
    const folder = NodePath.dirname(NodePath.resolve(path))
    const folderKind = kindOf(folder)
    if (folderKind === "SymbolicLink") {
      return new StoreReadFailed({
        path,
        cause: "symbolic link",
        message: `refusing to use the lock ${path}: its folder ${folder} is a symbolic link; a workspace must be a ` +
          "real folder (nothing was created). Point runtime-resume at the real location instead"
      })
    }
    const holder = kindOf(holderFilePath(path))
    if (holder !== "File" && holder !== "Missing") {
      return new StoreReadFailed({
        path: holderFilePath(path),
        cause: holder === "SymbolicLink" ? "symbolic link" : "not a regular file",
        message: `refusing to use the lock ${path}: its holder file ${holderFilePath(path)} is ${describeKind(holder)}, ` +
          "not a regular file; runtime-resume never writes through a link nor opens a special file in a workspace. " +
          "Move it away, then run the command again"
      })
    }
    // SQLite opens a journal it finds beside a lock database that has a header (the append lock's): never a link or a
    // special file (a FIFO would block the open).
    const journal = kindOf(`${path}-journal`)
    if (journal !== "File" && journal !== "Missing") {
      return new StoreReadFailed({
        path: `${path}-journal`,
        cause: journal === "SymbolicLink" ? "symbolic link" : "not a regular file",
        message: `refusing to use the lock ${path}: its journal ${path}-journal is ${describeKind(journal)}, not a ` +
          "regular file; runtime-resume never follows a link nor opens a special file in a workspace. Move it away " +
          "(make sure no runtime-resume process is running on this workspace), then run the command again"
      })
    }
    const kind = kindOf(path)
    if (kind !== "File" && kind !== "Missing") {
      return new StoreReadFailed({
        path,
        cause: kind === "SymbolicLink" ? "symbolic link" : "not a regular file",
        message: `refusing to use the lock ${path}: it is ${describeKind(kind)}, not a regular file; runtime-resume ` +
          "never follows a link nor opens a special file in a workspace. Move it away (make sure no runtime-resume " +
          "process is running on this workspace), then run the command again"
      })
    }
    return undefined
  } catch (error) {
    return lockFailed(path, "inspect", error)
  }
}

// One attempt; true when taken, false when busy. Any other SQLite error is thrown.
const tryLock = (db: Sqlite.Database, mode: WorkspaceLockMode): boolean => {
  try {
    const journalMode: unknown = db.pragma("journal_mode = DELETE", { simple: true })
    if (journalMode !== "delete") {
      throw new Error(`lock database ${db.name} refuses journal_mode=DELETE (it is ${String(journalMode)})`)
    }
    if (mode === "exclusive") {
      db.exec("BEGIN EXCLUSIVE")
    } else {
      // A deferred transaction holds SHARED from its first read until it ends. The lock file stays
      // empty (0 bytes): reading sqlite_master needs no table and writes nothing.
      db.exec("BEGIN")
      db.prepare("SELECT count(*) FROM sqlite_master").get()
    }
    return true
  } catch (error) {
    if (db.inTransaction) db.exec("ROLLBACK")
    if (isBusy(error)) return false
    throw error
  }
}

// A shared read in autocommit: taken and released at once.
const probeOnce = (db: Sqlite.Database): WorkspaceLockProbe => {
  try {
    db.prepare("SELECT count(*) FROM sqlite_master").get()
    return "free"
  } catch (error) {
    if (isBusy(error)) return "held"
    throw error
  }
}

// Idempotent: used both by the scope finalizer and when an acquisition gives up.
const closeConnection = (db: Sqlite.Database): Effect.Effect<void> =>
  Effect.sync(() => {
    if (!db.open) return
    try {
      if (db.inTransaction) db.exec("ROLLBACK")
    } catch {
      // Closing ends the transaction and drops its locks anyway.
    } finally {
      db.close()
    }
  })

/**
 * Builds the WorkspaceLock service over better-sqlite3; the holder pid is this process's.
 *
 * @since 0.1.0
 * @category layers
 */
export const make: Effect.Effect<WorkspaceLockService, never, FileSystem.FileSystem> = Effect.gen(function*() {
  // Kept in the signature for the layers' sake: the lock's own files go through safeFiles (no link, no FIFO).
  yield* FileSystem.FileSystem
  const pid = process.pid

  // Creates the lock file 0600 (better-sqlite3 would create it 0644); an existing regular file is kept. A link, a
  // folder or a special file there, or a workspace that is a link, is refused before anything is created.
  const ensureLockFile = (path: string): Effect.Effect<void, StoreReadFailed> =>
    Effect.suspend(() => {
      const refused = checkLockPath(path)
      if (refused !== undefined) return Effect.fail(refused)
      try {
        fs.closeSync(openChecked(path, "ax", 0o600))
      } catch (error) {
        if ((error as NodeJS.ErrnoException)?.code !== "EEXIST") return Effect.fail(lockFailed(path, "create", error))
        const again = checkLockPath(path)
        if (again !== undefined) return Effect.fail(again)
      }
      return Effect.void
    }).pipe(lockFileGate.withPermits(1))

  const readHolderPid = (path: string): Effect.Effect<Option.Option<number>> =>
    Effect.try(() => readFileChecked(holderFilePath(path)).toString("utf8")).pipe(
      Effect.flatMap(Schema.decodeUnknown(HolderJson)),
      Effect.map((holder) => holder.pid),
      Effect.option
    )

  // The holder file is informational: an I/O failure is only logged, but a link or special file in its place is
  // refused (it is never written through).
  const writeHolder = (path: string): Effect.Effect<void, StoreReadFailed> =>
    Clock.currentTimeMillis.pipe(
      Effect.flatMap((now) =>
        Schema.encode(HolderJson)({ pid, acquiredAt: DateTime.formatIso(DateTime.unsafeMake(now)) })
      ),
      Effect.flatMap((text) => Effect.try(() => writeFileChecked(holderFilePath(path), `${text}\n`, 0o600))),
      Effect.catchAll((error) => {
        const cause = (error as { error?: unknown })?.error ?? error
        const code = (cause as { code?: unknown })?.code
        return code === "ELOOP" || code === "EFTYPE"
          ? Effect.fail(
            new StoreReadFailed({
              path: holderFilePath(path),
              cause: messageOf(cause),
              message: `${messageOf(cause)} (the lock ${path} was released again)`
            })
          )
          : Effect.logWarning(`could not write the lock holder file of ${path}`, cause)
      })
    )

  const removeHolder = (path: string): Effect.Effect<void> =>
    Effect.sync(() => {
      // unlink never follows a link; a folder there is left alone.
      if (kindOf(holderFilePath(path)) !== "Directory") fs.rmSync(holderFilePath(path), { force: true })
    }).pipe(Effect.ignore)

  const locked = (options: WorkspaceLockOptions, removedHolder?: number): Effect.Effect<never, WorkspaceLocked> =>
    removedHolder !== undefined
      ? Effect.fail(
        new WorkspaceLocked({
          path: options.path,
          holderPid: removedHolder,
          message: `Could not take the ${options.mode} workspace lock ${options.path} within ${options.timeoutMs} ms: ` +
            `process ${removedHolder} still holds a lock file of that name that was removed (deleted while held), so ` +
            "a new lock file would not keep it out. Wait for that process to finish, or stop it; never delete a lock " +
            "file by hand (a dead holder's lock is released by the OS)."
        })
      )
      : readHolderPid(options.path).pipe(
      Effect.flatMap((holderPid) =>
        Effect.fail(
          new WorkspaceLocked({
            path: options.path,
            ...(Option.isSome(holderPid) ? { holderPid: holderPid.value } : {}),
            message: `Could not take the ${options.mode} workspace lock ${options.path} within ${options.timeoutMs} ms: ` +
              (Option.isSome(holderPid)
                ? `it is held by process ${holderPid.value}.`
                : "another process holds it.") +
              " Wait for that process to finish, or stop it."
          })
        )
      )
    )

  // Opens a connection to the lock file that the path names now, and its identity (checked before and after the open,
  // so the connection is known to be on that inode unless the file was swapped twice in between).
  const connect = (path: string): Effect.Effect<{ readonly db: Sqlite.Database; readonly id: Identity } | undefined, StoreReadFailed> =>
    Effect.suspend(() => {
      const refused = checkLockPath(path)
      if (refused !== undefined) return Effect.fail(refused)
      const before = identityOf(path)
      if (before === undefined) return Effect.succeed(undefined)
      let db: Sqlite.Database
      try {
        db = new Sqlite(path, { timeout: ATTEMPT_BUSY_TIMEOUT_MS, fileMustExist: true })
      } catch (error) {
        return Effect.fail(lockFailed(path, "open", error))
      }
      if (!sameIdentity(before, identityOf(path))) {
        db.close()
        return Effect.succeed(undefined)
      }
      return Effect.succeed({ db, id: before })
    })

  // Takes the lock on a connection to the file the path names, retrying until the timeout. Returns the open connection
  // and the identity it locked; the path still names that file when this returns (else it tries again on the new one).
  const waitForLock = (options: WorkspaceLockOptions) =>
    Effect.gen(function*() {
      const start = yield* Clock.currentTimeMillis
      let removedHolder: number | undefined
      while (true) {
        yield* ensureLockFile(options.path)
        const attempt = yield* connect(options.path).pipe(
          Effect.flatMap((conn) => {
            if (conn === undefined) return Effect.succeed(undefined)
            try {
              if (tryLock(conn.db, options.mode) && sameIdentity(conn.id, identityOf(options.path))) {
                // A holder of a removed lock file of this path is still a holder (docs/reliability.md, "File hygiene": an operator "clearing a
                // stale lock" must not let a second writer or a repair in). Our own descriptors are the new file's.
                removedHolder = removedLockHolders(options.path)[0]
                if (removedHolder === undefined) return Effect.succeed(conn)
              }
            } catch (error) {
              return Effect.zipRight(closeConnection(conn.db), Effect.fail(lockFailed(options.path, "take", error)))
            }
            return Effect.as(closeConnection(conn.db), undefined)
          }),
          lockFileGate.withPermits(1)
        )
        if (attempt !== undefined) return attempt
        const now = yield* Clock.currentTimeMillis
        if (now - start >= options.timeoutMs) return yield* locked(options, removedHolder)
        yield* Effect.sleep(RETRY_PAUSE_MS)
      }
    })

  const acquire = Effect.fn("WorkspaceLock.acquire")(function*(options: WorkspaceLockOptions) {
    // On failure or interruption inside, the connection is closed at once; once taken, it lives as long as the scope.
    // The wait itself stays interruptible (a signal ends a verb waiting for a lock); each attempt closes its own
    // connection before it yields, so an interruption between attempts leaks nothing.
    const { db, id } = yield* Effect.acquireRelease(Effect.interruptible(waitForLock(options)), (conn) => closeConnection(conn.db))
    if (options.mode === "exclusive") {
      // Registered after the connection, so it is removed while the lock is still held.
      yield* Effect.acquireRelease(writeHolder(options.path), () => removeHolder(options.path))
    } else {
      // While we hold shared, nobody holds exclusive: any holder file is a crashed holder's leftover.
      yield* removeHolder(options.path)
    }
    const lost = (): string | undefined => {
      if (!db.open) return `the lock ${options.path} is no longer held (its connection is closed)`
      const now = identityOf(options.path)
      return sameIdentity(id, now) ? undefined : `the lock file ${options.path} was ${
        now === undefined ? "removed" : "replaced"
      } while this process held it, so another process may have taken a new lock there; nothing more is written or ` +
        "decided under it. Stop every runtime-resume process on this workspace, then run the command again"
    }
    const handle: WorkspaceLockHandle = { path: options.path, mode: options.mode, lost }
    return handle
  })

  const probe = Effect.fn("WorkspaceLock.probe")(function*(path: string) {
    // Never create anything: better-sqlite3 would create a missing file, so check, then open with fileMustExist.
    const refused = checkLockPath(path)
    if (refused !== undefined) return yield* refused
    if (kindOf(path) === "Missing") return "free" as const
    return yield* Effect.acquireUseRelease(
      Effect.try({
        try: () => new Sqlite(path, { timeout: 0, fileMustExist: true }),
        catch: (error) => lockFailed(path, "open", error)
      }),
      (db) =>
        Effect.try({
          try: () => probeOnce(db),
          catch: (error) => lockFailed(path, "probe", error)
        }),
      closeConnection
    )
  })

  // The JSONL append lock: one connection for the scope, a `BEGIN EXCLUSIVE` … `ROLLBACK` round trip per hold (the lock
  // database is never written, so no journal and no fsync). No holder file: a hold lasts one write.
  const latch = Effect.fn("WorkspaceLock.latch")(function*(path: string) {
    const options: WorkspaceLockOptions = { path, mode: "exclusive", timeoutMs: 0 }
    const { db, id } = yield* Effect.acquireRelease(
      Effect.gen(function*() {
        for (let attempt = 0;; attempt++) {
          yield* ensureLockFile(path)
          const conn = yield* connect(path).pipe(lockFileGate.withPermits(1))
          if (conn !== undefined) return conn
          // The file was swapped while we opened it: open the new one (a bounded number of times).
          if (attempt >= 3) return yield* lockFailed(path, "open", new Error("the lock file keeps being replaced"))
        }
      }),
      (conn) => closeConnection(conn.db)
    )
    // A holder of a removed lock file of this path is still a holder: a new file would not keep it out.
    const removed = removedLockHolders(path)[0]
    if (removed !== undefined) return yield* locked(options, removed)
    const lost = (): StoreReadFailed | undefined => {
      const now = identityOf(path)
      if (db.open && sameIdentity(id, now)) return undefined
      return new StoreReadFailed({
        path,
        cause: now === undefined ? "lock file removed" : "lock file replaced",
        message: `the lock file ${path} was ${now === undefined ? "removed" : "replaced"} while this process had it ` +
          "open, so another process may hold a new lock there; nothing more is written under it. Stop every " +
          "runtime-resume process on this workspace, then run the command again"
      })
    }
    // The lock database keeps journal_mode=DELETE (set once here, not per hold), so a hold is BEGIN EXCLUSIVE … ROLLBACK.
    // A holder busy right now leaves it as it is (a new lock database is in DELETE mode; nothing here sets another).
    yield* Effect.try({
      try: () => {
        let journalMode: unknown = "delete"
        try {
          journalMode = db.pragma("journal_mode = DELETE", { simple: true })
        } catch (error) {
          if (!isBusy(error)) throw error
        }
        if (journalMode !== "delete") throw new Error(`lock database ${path} refuses journal_mode=DELETE (it is ${String(journalMode)})`)
      },
      catch: (error) => lockFailed(path, "open", error)
    })
    // A lock database of 0 bytes makes every BEGIN re-read its (missing) header: about five times the cost of a hold on
    // one with a header. So the latch's database gets one (user_version 1, written once, by whoever comes first; a
    // busy database, or one with anything at its journal's path, is left as it is, only slower).
    yield* Effect.try({
      try: () => {
        try {
          // Never written while anything is at its journal's path (a leftover, a link, a FIFO): the write would open it.
          if (kindOf(`${path}-journal`) === "Missing" && db.pragma("user_version", { simple: true }) === 0) {
            db.pragma("user_version = 1")
          }
        } catch (error) {
          if (!isBusy(error)) throw error
        }
      },
      catch: (error) => lockFailed(path, "open", error)
    })
    const begin = db.prepare("BEGIN EXCLUSIVE")
    const rollback = db.prepare("ROLLBACK")
    // One attempt: true when taken, false when busy; any other SQLite error is thrown.
    const attempt = (): boolean => {
      try {
        begin.run()
      } catch (error) {
        if (db.inTransaction) rollback.run()
        if (isBusy(error)) return false
        throw error
      }
      return true
    }
    const release = (): void => {
      try {
        if (db.open && db.inTransaction) rollback.run()
      } catch {
        // Closing the connection (at the end of the scope) releases it anyway.
      }
    }
    // Once taken, the path must still name the file the connection holds (else let go: another process may hold a
    // new lock there).
    const confirm = (): StoreReadFailed | undefined => {
      const gone = lost()
      if (gone !== undefined) release()
      return gone
    }
    // The latch's database has a header, so SQLite opens a journal it finds at `<path>-journal` to roll it back: a link
    // there would be followed and a FIFO would block. Checked before every hold (one lstat); refused, nothing taken.
    const journal = `${path}-journal`
    const journalRefused = (): StoreReadFailed | undefined => {
      const kind = kindOf(journal)
      if (kind === "Missing" || kind === "File") return undefined
      return new StoreReadFailed({
        path: journal,
        cause: kind === "SymbolicLink" ? "symbolic link" : "not a regular file",
        message: `refusing to use the lock ${path}: its journal ${journal} is ${describeKind(kind)}, not a regular ` +
          "file; runtime-resume never follows a link nor opens a special file in a workspace. Move it away (make sure " +
          "no runtime-resume process is running on this workspace), then run the command again"
      })
    }
    // Taken at once (the common case: nothing else is writing) without a fiber hop; else retried until `timeoutMs`.
    const take = (timeoutMs: number): Effect.Effect<void, WorkspaceLocked | StoreReadFailed> =>
      Effect.suspend(() => {
        let taken: boolean
        try {
          const refused = journalRefused()
          if (refused !== undefined) return Effect.fail(refused)
          taken = attempt()
        } catch (error) {
          return Effect.fail(lockFailed(path, "take", error))
        }
        if (taken) {
          const gone = confirm()
          return gone === undefined ? Effect.void : Effect.fail(gone)
        }
        return Effect.gen(function*() {
          const start = yield* Clock.currentTimeMillis
          while (true) {
            const now = yield* Clock.currentTimeMillis
            if (now - start >= timeoutMs) return yield* locked({ ...options, timeoutMs })
            yield* Effect.sleep(RETRY_PAUSE_MS)
            const refused = journalRefused()
            if (refused !== undefined) return yield* refused
            const again = yield* Effect.try({ try: attempt, catch: (error) => lockFailed(path, "take", error) })
            if (again) {
              const gone = confirm()
              if (gone === undefined) return
              return yield* gone
            }
          }
        })
      })
    const result: WorkspaceLatch = {
      path,
      hold: (timeoutMs, effect) => Effect.acquireUseRelease(take(timeoutMs), () => effect, () => Effect.sync(release))
    }
    return result
  })

  return WorkspaceLock.of({ acquire, probe, latch })
})

/**
 * WorkspaceLock over better-sqlite3, given a FileSystem.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<WorkspaceLock, never, FileSystem.FileSystem> = Layer.effect(WorkspaceLock, make)

/**
 * WorkspaceLock over better-sqlite3 with Node's FileSystem.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerNode: Layer.Layer<WorkspaceLock> = layer.pipe(Layer.provide(NodeFileSystem.layer))
