// The SQL floor of a store operation: the statements a better-sqlite3 connection ran, recorded with their parameters,
// then replayed with nothing around them on a copy of the database taken just before (the same statements on the same state).
import Sqlite from "better-sqlite3"
import * as fs from "node:fs"

/** One statement a connection ran: its text, how it was run, and a copy of its parameters. */
export interface Recorded {
  readonly sql: string
  readonly method: "run" | "all" | "get"
  readonly params: ReadonlyArray<unknown>
}

type Method = Recorded["method"]
const METHODS: ReadonlyArray<Method> = ["run", "all", "get"]

/**
 * Records, while `recording` is set, every statement run through statements prepared (after it was made) by
 * connections whose file `records` accepts. Other connections (the baselines, the replay copy) are never recorded.
 */
export class StatementRecorder {
  recording = false
  readonly log: Array<Recorded> = []
  private readonly original: Sqlite.Database["prepare"]

  constructor(readonly records: (file: string) => boolean) {
    const proto = Sqlite.prototype as unknown as { prepare: Sqlite.Database["prepare"] }
    this.original = proto.prepare
    const recorder = this
    const original = this.original
    proto.prepare = function(this: Sqlite.Database, source: string) {
      const statement = original.call(this, source)
      if (!recorder.records(this.name)) return statement
      for (const method of METHODS) {
        const run = (statement as unknown as Record<Method, (...args: Array<unknown>) => unknown>)[method].bind(statement)
        Object.defineProperty(statement, method, {
          value: (...args: Array<unknown>) => {
            if (recorder.recording) recorder.log.push({ sql: source, method, params: args.map((a) => Array.isArray(a) ? [...a] : a) })
            return run(...args)
          }
        })
      }
      return statement
    } as Sqlite.Database["prepare"]
  }

  /** Puts `prepare` back (statements prepared meanwhile keep recording while `recording` is set). */
  uninstall(): void {
    ;(Sqlite.prototype as unknown as { prepare: Sqlite.Database["prepare"] }).prepare = this.original
  }

  /** The statements recorded since the last `take`, and forgets them. */
  take(): Array<Recorded> {
    return this.log.splice(0, this.log.length)
  }
}

/** A raw connection to a copy of a database, with the store's pragmas, that replays recorded statements. */
export class Replayer {
  readonly db: Sqlite.Database
  private readonly prepared = new Map<string, Sqlite.Statement>()

  /** Copies the database at `source` (a consistent snapshot, through `VACUUM INTO`) to `target` and opens the copy. */
  constructor(source: string, target: string) {
    for (const suffix of ["", "-wal", "-shm"]) fs.rmSync(target + suffix, { force: true })
    const reader = new Sqlite(source, { readonly: true })
    try {
      reader.prepare("VACUUM INTO ?").run(target)
    } finally {
      reader.close()
    }
    this.db = new Sqlite(target)
    this.db.pragma("journal_mode = WAL")
    this.db.pragma("synchronous = FULL")
    this.db.pragma("foreign_keys = ON")
  }

  /** Runs the statements, in order, exactly as they were run. */
  replay(statements: ReadonlyArray<Recorded>): void {
    for (const s of statements) {
      let statement = this.prepared.get(s.sql)
      if (statement === undefined) this.prepared.set(s.sql, statement = this.db.prepare(s.sql))
      ;(statement as unknown as Record<Method, (...args: ReadonlyArray<unknown>) => unknown>)[s.method](...s.params)
    }
  }

  /** Closes the copy. */
  close(): void {
    this.db.close()
  }
}
