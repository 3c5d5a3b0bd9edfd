// `export` (spec 06): every committed row in commit order as store-format lines, to a file or as a stream of text.
// The output imports into an empty workspace of either store with identical high-waters.
import * as FileSystem from "@effect/platform/FileSystem"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Stream from "effect/Stream"
import { ExportFailed } from "../Domain/Errors.js"
import type { LedgerDamaged } from "../Domain/Errors.js"
import type { CommittedRow } from "../Domain/RuntimeEvent.js"
import { canonicalText, jsonlLine } from "../Domain/RuntimeEvent.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type { ReadError } from "../Services/RuntimeEventStore.js"
import { checkIntegrity } from "./ScanRuns.js"

/** What an export wrote. */
export interface LedgerExport {
  readonly rows: number
  readonly runs: number
}

// The store-format line of a committed row. Rows come verified from the store, so their events always encode.
const lineOf = (row: CommittedRow): string => {
  const text = canonicalText(row.event)
  if (Either.isLeft(text)) throw new Error(`committed event ${row.event.id} has no canonical text: ${text.left.message}`)
  return jsonlLine(row.seq, row.end, row.digest, text.right)
}

/**
 * Every committed row in commit order, after the store's own integrity check (a damaged file is `LedgerDamaged`: an
 * export never backs up what `verify` refuses), one chunk of store-format lines (each ending in a newline) per page. */
export const exportText = (
  onRow: (row: CommittedRow) => void = () => {}
): Stream.Stream<string, ReadError | LedgerDamaged, RuntimeEventStore> =>
  Stream.unwrap(Effect.map(Effect.tap(RuntimeEventStore, checkIntegrity), (store) =>
    store.exportRows().pipe(
      Stream.mapChunks((rows) => {
        let text = ""
        for (const row of rows) {
          onRow(row)
          text += lineOf(row)
        }
        return text === "" ? Chunk.empty() : Chunk.of(text)
      })
    )))

/** Counts rows and distinct runs as they stream past. */
export const makeCounter = () => {
  const runs = new Set<string>()
  let rows = 0
  return {
    onRow: (row: CommittedRow) => {
      rows++
      runs.add(row.event.runId)
    },
    result: (): LedgerExport => ({ rows, runs: runs.size })
  }
}

/**
 * Writes the export to `file`, created 0600 and never over an existing file; it writes only that file and syncs it.
 * On any failure the file it created is removed, so a partial export is never left to be imported.
 */
export const exportToFile = Effect.fn("ExportLedger.exportToFile")(function*(file: string) {
  const fs = yield* FileSystem.FileSystem
  const failed = (what: string) => (error: { readonly message: string }) =>
    new ExportFailed({ file, cause: error.message, message: `could not ${what} ${file}: ${error.message}` })
  const counter = makeCounter()
  let created = false
  const write = Effect.gen(function*() {
    const handle = yield* fs.open(file, { flag: "wx", mode: 0o600 }).pipe(Effect.mapError(failed("create")))
    created = true
    const encoder = new TextEncoder()
    yield* exportText(counter.onRow).pipe(
      Stream.runForEach((text) => handle.writeAll(encoder.encode(text)).pipe(Effect.mapError(failed("write"))))
    )
    yield* handle.sync.pipe(Effect.mapError(failed("sync")))
    return counter.result()
  })
  // Closed first (the scope), then removed: only a file this export created, never one that was there before.
  return yield* Effect.scoped(write).pipe(
    Effect.onError(() => created ? fs.remove(file).pipe(Effect.ignore) : Effect.void)
  )
})
