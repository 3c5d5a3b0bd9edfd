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
 * Records, while `recording` is set, every statement run by connections whose file `records` accepts. The statements'
 * shared prototype is patched only while recording (and put back when it stops), so the timed cycles run the
 * statements untouched: a wrapper made at `prepare` would cost every timed statement a call through it.
 */
export class StatementRecorder {
  readonly log: Array<Recorded> = []
  private readonly proto: Record<Method, (...args: Array<unknown>) => unknown>
  private readonly originals: Record<Method, (...args: Array<unknown>) => unknown>
  private on = false

  constructor(readonly records: (file: string) => boolean) {
    const probe = new Sqlite(":memory:")
    try {
      this.proto = Object.getPrototypeOf(probe.prepare("SELECT 1")) as Record<Method, (...args: Array<unknown>) => unknown>
    } finally {
      probe.close()
    }
    this.originals = { run: this.proto.run, all: this.proto.all, get: this.proto.get }
  }

  /** Whether statements are being recorded. */
  get recording(): boolean {
    return this.on
  }

  set recording(value: boolean) {
    if (value === this.on) return
    this.on = value
    const recorder = this
    for (const method of METHODS) {
      const original = this.originals[method]
      this.proto[method] = value
        ? function(this: Sqlite.Statement, ...args: Array<unknown>) {
          if (recorder.records(this.database.name)) {
            recorder.log.push({ sql: this.source, method, params: args.map((a) => Array.isArray(a) ? [...a] : a) })
          }
          return original.apply(this, args)
        }
        : original
    }
  }

  /** Stops recording (the statements' prototype is as it was). */
  uninstall(): void {
    this.recording = false
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
