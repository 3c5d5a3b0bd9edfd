// What the crash harness (Harness.ts) and the tool harness (ToolHarness.ts) share: the step error and the on-disk
// ledger snapshots. Neither harness imports the other; both import this module.
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import Sqlite from "better-sqlite3"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import { createHash } from "node:crypto"
import { isDeepStrictEqual } from "node:util"
import { LEDGER_FILES } from "../src/Layers/NodeRuntimeEventStore.js"
import type { HarnessStore } from "./Child.js"

/** A step of a row that could not be carried out (spawn, readiness, snapshot); the row fails with it. */
export class HarnessStepFailed extends Data.TaggedError("HarnessStepFailed")<{
  readonly message: string
}> {}

/** The ledger as it lies on disk: the JSONL file's hash, or every row of every SQLite table. */
export type LedgerSnapshot =
  | { readonly kind: "jsonl"; readonly bytes: number; readonly sha256: string }
  | {
    readonly kind: "sqlite"
    readonly userVersion: number
    readonly tables: ReadonlyArray<{ readonly name: string; readonly rows: ReadonlyArray<string> }>
  }

/** The message of an unknown error: its `message` when it has one, else its text. */
export const errorMessage = (error: unknown): string =>
  typeof error === "object" && error !== null && "message" in error && typeof error.message === "string"
    ? error.message
    : String(error)

const failed = (message: string) => new HarnessStepFailed({ message })

// ---------------------------------------------------------------------------------------------------------------
// Steps 6 and 9: snapshots of the ledger, taken without any store.

const sha256 = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex")

// Exact, comparable text for a SQLite cell (blobs as hex, integers exactly).
const cellText = (cell: unknown): unknown =>
  cell instanceof Uint8Array ? { blob: Buffer.from(cell).toString("hex") } : typeof cell === "bigint" ? `${cell}n` : cell

// Every row of every table through a raw read-only connection; the event rows (run, seq, digest, bytes) are among them.
const dumpSqlite = (db: Sqlite.Database): LedgerSnapshot => {
  const names = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all() as Array<
    string
  >
  const tables = names.map((name) => {
    const rows = db.prepare(`SELECT * FROM "${name.replaceAll("\"", "\"\"")}"`).raw().safeIntegers().all() as Array<
      Array<unknown>
    >
    return { name, rows: rows.map((row) => JSON.stringify(row.map(cellText))).sort() }
  })
  const userVersion = Number(db.pragma("user_version", { simple: true }))
  return { kind: "sqlite", userVersion, tables }
}

/** Snapshots a workspace's ledger as it lies on disk: JSONL by its SHA-256, SQLite row by row (read-only). */
export const snapshotLedger = (store: HarnessStore, workspace: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const file = path.join(workspace, LEDGER_FILES[store])
    if (store === "jsonl") {
      const bytes = yield* fs.readFile(file).pipe(
        Effect.mapError((error) => failed(`could not read the JSONL ledger ${file}: ${error.message}`))
      )
      const snapshot: LedgerSnapshot = { kind: "jsonl", bytes: bytes.length, sha256: sha256(bytes) }
      return snapshot
    }
    // better-sqlite3 would create a missing file even read-only: check first.
    if (!(yield* fs.exists(file).pipe(Effect.orElseSucceed(() => false)))) {
      return yield* failed(`the SQLite ledger ${file} does not exist`)
    }
    return yield* Effect.acquireUseRelease(
      Effect.try({
        try: () => new Sqlite(file, { readonly: true, fileMustExist: true }),
        catch: (error) => failed(`could not open ${file} read-only: ${errorMessage(error)}`)
      }),
      (db) =>
        Effect.try({
          try: () => dumpSqlite(db),
          catch: (error) => failed(`could not read the rows of ${file}: ${errorMessage(error)}`)
        }),
      (db) => Effect.sync(() => db.close())
    )
  })

/** How two snapshots differ, in words; `undefined` when they are equal. */
export const snapshotDifference = (before: LedgerSnapshot, after: LedgerSnapshot): string | undefined => {
  if (isDeepStrictEqual(before, after)) return undefined
  if (before.kind === "jsonl" && after.kind === "jsonl") {
    return `the JSONL ledger changed: ${before.bytes} bytes, sha256 ${before.sha256} before; ` +
      `${after.bytes} bytes, sha256 ${after.sha256} after`
  }
  if (before.kind === "sqlite" && after.kind === "sqlite") {
    if (before.userVersion !== after.userVersion) {
      return `the SQLite user_version changed from ${before.userVersion} to ${after.userVersion}`
    }
    const names = [...new Set([...before.tables, ...after.tables].map((t) => t.name))].sort()
    for (const name of names) {
      const a = before.tables.find((t) => t.name === name)?.rows
      const b = after.tables.find((t) => t.name === name)?.rows
      if (a === undefined) return `the SQLite table ${name} appeared`
      if (b === undefined) return `the SQLite table ${name} disappeared`
      if (!isDeepStrictEqual(a, b)) {
        const gone = a.filter((row) => !b.includes(row))
        const added = b.filter((row) => !a.includes(row))
        return `the rows of SQLite table ${name} changed (${a.length} before, ${b.length} after; ` +
          `first removed: ${gone[0] ?? "none"}; first added: ${added[0] ?? "none"})`
      }
    }
  }
  return `the ledger snapshot changed from ${before.kind} to ${after.kind}`
}
