// `export` (docs/spec/06-cli.md): every committed row in commit order as store-format lines, with the run headers and claims that
// recovery needs, as a version 2 export file (docs/wire-format.md, "Export file"), to a file or as a stream of text.
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as NodePath from "node:path"
import { ExportFailed } from "../Domain/Errors.js"
import type { LedgerDamaged } from "../Domain/Errors.js"
import * as ExportFormat from "../Domain/ExportFormat.js"
import type { ContinuationClaim, RunHeader } from "../Domain/RunHeader.js"
import { RunHeaderStore } from "../Services/RunHeaderStore.js"
import type { HeaderReadError } from "../Services/RunHeaderStore.js"
import type { CommittedRow } from "../Domain/RuntimeEvent.js"
import { canonicalText, jsonlLine } from "../Domain/RuntimeEvent.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type { ReadError } from "../Services/RuntimeEventStore.js"
import { checkIntegrity } from "../Services/ScanRuns.js"

/**
 * What an export wrote.
 *
 * @since 0.1.0
 * @category models
 */
export interface LedgerExport {
  readonly rows: number
  readonly runs: number
  /** The run header and claim records written (0 when no RunHeaderStore was provided). */
  readonly runHeaders: number
  readonly claims: number
}

/**
 * The run headers and claims of the workspace, read BEFORE its rows: a terminal header always follows its terminal
 * event (docs/spec/04-continuation.md), so every header read then matches rows read after it. Claims are those on the source runs the
 * headers name as parents, first claims before the claims that supersede them. None without a RunHeaderStore.
 */
const recoveryRecords = Effect.gen(function*() {
  const found = yield* Effect.serviceOption(RunHeaderStore)
  if (Option.isNone(found)) return { headers: [] as ReadonlyArray<RunHeader>, claims: [] as ReadonlyArray<ContinuationClaim> }
  const store = found.value
  const headers = yield* store.list()
  const claims: Array<ContinuationClaim> = []
  for (const parent of new Set(headers.flatMap((h) => h.parentRunId !== undefined ? [h.parentRunId] : []))) {
    for (const claim of yield* store.claims(parent)) if (!claims.some((c) => c.claimId === claim.claimId)) claims.push(claim)
  }
  claims.sort((a, b) => (a.supersedes === undefined ? 0 : 1) - (b.supersedes === undefined ? 0 : 1))
  return { headers, claims }
})

// The store-format line of a committed row. Rows come verified from the store, so their events always encode.
const lineOf = (row: CommittedRow): string => {
  const text = canonicalText(row.event)
  if (Either.isLeft(text)) throw new Error(`committed event ${row.event.id} has no canonical text: ${text.left.message}`)
  return jsonlLine(row.seq, row.end, row.digest, text.right)
}

/**
 * A version 2 export (docs/wire-format.md, "Export file"): the marker line; every committed row in commit order, after
 * the store's own integrity check (a damaged file is `LedgerDamaged`: an export never backs up what `verify` refuses),
 * one chunk of store-format lines (each ending in a newline) per page; the run headers and claims (when a
 * RunHeaderStore is provided); the trailer counting them. `onSection` is told how many headers and claims it wrote.
 *
 * @since 0.1.0
 * @category programs
 */
export const exportText = (
  onRow: (row: CommittedRow) => void = () => {},
  onSection: (runHeaders: number, claims: number) => void = () => {}
): Stream.Stream<string, ReadError | LedgerDamaged | HeaderReadError, RuntimeEventStore> =>
  Stream.unwrap(Effect.gen(function*() {
    const store = yield* Effect.tap(RuntimeEventStore, checkIntegrity)
    const { claims, headers } = yield* recoveryRecords
    let rows = 0
    const body = store.exportRows().pipe(
      Stream.mapChunks((chunk) => {
        let text = ""
        for (const row of chunk) {
          onRow(row)
          rows++
          text += lineOf(row)
        }
        return text === "" ? Chunk.empty() : Chunk.of(text)
      })
    )
    const tail = Stream.suspend(() => {
      onSection(headers.length, claims.length)
      return Stream.make(
        headers.map(ExportFormat.headerLine).join("") + claims.map(ExportFormat.claimLine).join("") +
          ExportFormat.trailerLine({ rows, runHeaders: headers.length, claims: claims.length })
      )
    })
    return Stream.make(ExportFormat.markerLine()).pipe(Stream.concat(body), Stream.concat(tail))
  }))

/**
 * Counts rows and distinct runs as they stream past.
 *
 * @since 0.1.0
 * @category programs
 */
export const makeCounter = () => {
  const runs = new Set<string>()
  let rows = 0
  let section = { runHeaders: 0, claims: 0 }
  return {
    onRow: (row: CommittedRow) => {
      rows++
      runs.add(row.event.runId)
    },
    onSection: (runHeaders: number, claims: number) => {
      section = { runHeaders, claims }
    },
    result: (): LedgerExport => ({ rows, runs: runs.size, ...section })
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
 *
 * @since 0.1.0
 * @category programs
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
    yield* exportText(counter.onRow, counter.onSection).pipe(
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
