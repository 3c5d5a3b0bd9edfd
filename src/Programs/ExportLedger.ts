// `export` (spec 06): every committed row in commit order as store-format lines, to a file or as a stream of text.
// The output imports into an empty workspace of either store with identical high-waters.
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as NodePath from "node:path"
import { ExportFailed } from "../Domain/Errors.js"
import type { LedgerDamaged } from "../Domain/Errors.js"
import type { CommittedRow } from "../Domain/RuntimeEvent.js"
import { canonicalText, jsonlLine } from "../Domain/RuntimeEvent.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type { ReadError } from "../Services/RuntimeEventStore.js"
import { integrityOnly } from "../Services/ScanRuns.js"

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
  Stream.unwrap(Effect.map(Effect.tap(RuntimeEventStore, integrityOnly), (store) =>
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

// The n-th temporary name of an export to `file`: a hidden sibling in the same folder, so the final link stays
// inside one file system.
const partialPath = (file: string, n: number): string =>
  NodePath.join(NodePath.dirname(file), `.${NodePath.basename(file)}.partial-${n}`)

// Creates the first unused temporary file of an export, 0600 and exclusively (`wx`: never over an existing file,
// never through a link planted at its name).
const openPartial = (
  fs: FileSystem.FileSystem,
  file: string,
  n: number
): Effect.Effect<{ readonly path: string; readonly handle: FileSystem.File }, PlatformError, Scope.Scope> => {
  const path = partialPath(file, n)
  return fs.open(path, { flag: "wx", mode: 0o600 }).pipe(
    Effect.map((handle) => ({ path, handle })),
    Effect.catchIf(
      (e) => e._tag === "SystemError" && e.reason === "AlreadyExists" && n < 1000,
      () => openPartial(fs, file, n + 1)
    )
  )
}

/**
 * Writes the export to `file`, complete or not at all: every row goes to a temporary file beside it
 * (`.<name>.partial-<n>`, created 0600 and exclusively), which is fsynced, then hard-linked as `file` (a link never
 * replaces an existing file), unlinked, and the folder fsynced. A crash or a kill midway leaves no `file`, at most
 * the temporary one; on a failure the temporary file is removed. It never writes over an existing file.
 */
export const exportToFile = Effect.fn("ExportLedger.exportToFile")(function*(file: string) {
  const fs = yield* FileSystem.FileSystem
  const failed = (what: string, path: string = file) => (error: { readonly message: string }) =>
    new ExportFailed({ file, cause: error.message, message: `could not ${what} ${path}: ${error.message}` })
  const taken = () =>
    new ExportFailed({
      file,
      cause: "the file exists",
      message: `${file} already exists; export never writes over a file: name a new one`
    })
  // Refused before reading the store; the link at the end refuses a file that appears meanwhile.
  const present = yield* fs.access(file).pipe(
    Effect.as(true),
    Effect.catchIf((e) => e._tag === "SystemError" && e.reason === "NotFound", () => fs.readLink(file).pipe(
      Effect.as(true),
      Effect.orElseSucceed(() => false)
    )),
    Effect.mapError(failed("look at"))
  )
  if (present) return yield* taken()
  const counter = makeCounter()
  let partial: string | undefined
  const write = Effect.gen(function*() {
    const { handle, path } = yield* openPartial(fs, file, 1).pipe(Effect.mapError(failed("create a temporary file beside")))
    partial = path
    const encoder = new TextEncoder()
    yield* exportText(counter.onRow).pipe(
      Stream.runForEach((text) => handle.writeAll(encoder.encode(text)).pipe(Effect.mapError(failed("write", path))))
    )
    yield* handle.sync.pipe(Effect.mapError(failed("sync", path)))
    return path
  })
  return yield* Effect.gen(function*() {
    // Closed first (the scope), then published under its name.
    const path = yield* Effect.scoped(write)
    yield* fs.link(path, file).pipe(
      Effect.catchIf((e) => e._tag === "SystemError" && e.reason === "AlreadyExists", () => Effect.fail(taken())),
      Effect.mapError((e) => e._tag === "ExportFailed" ? e : failed("create")(e))
    )
    partial = undefined
    yield* fs.remove(path).pipe(Effect.mapError(failed(`remove the temporary file (${file} is complete)`, path)))
    yield* Effect.scoped(Effect.flatMap(fs.open(NodePath.dirname(file), { flag: "r" }), (dir) => dir.sync)).pipe(
      Effect.mapError(failed("sync the folder of"))
    )
    return counter.result()
  }).pipe(
    // Only the temporary file this export created, never `file` or anything that was there before.
    Effect.onError(() => partial !== undefined ? fs.remove(partial).pipe(Effect.ignore) : Effect.void)
  )
})
