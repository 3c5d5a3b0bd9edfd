// `import`'s one pass into a store that has `restoreChecked` (docs/stores.md): the file is read once, each line parsed,
// checked (everything `prepareImport` checks) and handed to the store's one transaction in the same pass.
import * as FileSystem from "@effect/platform/FileSystem"
import * as Chunk from "effect/Chunk"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type { ImportInvalid } from "../Domain/Errors.js"
import { RunId } from "../Domain/Ids.js"
import type { CheckedPiece } from "../Services/RuntimeEventStore.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type { RunImport } from "./ImportLedger.js"
import { ledgerImportOf } from "./internal/importSummary.js"
import { StreamCheck } from "./internal/importChecks.js"
import { FileParser } from "./internal/importParser.js"
import { guard, unreadable } from "./internal/importRefusal.js"

// Bytes per read of the import file (as `ImportLedger`'s passes read it), and events per piece handed to the store.
const CHUNK_SIZE = 1024 * 1024
const PIECE_EVENTS = 2_000

/**
 * The one pass did not import the file, and rolled back whatever it wrote: the file is refused, or is of a shape
 * only the two-pass import takes (a run that does not open in the file, interleaved runs, an id used twice, a
 * recovery fact in store-format lines, run headers), or the store refused it. The caller imports it as before
 * (`ImportLedger.prepareImport` then `importPrepared`), which refuses or writes exactly what it always did.
 *
 * @since 0.1.0
 * @category errors
 */
export class OnePassDeclined extends Data.TaggedError("OnePassDeclined")<{ readonly why: string }> {}

interface PieceBuilder {
  readonly runId: string
  readonly first: boolean
  readonly firstSeq: number
  readonly invocationId: string
  readonly ids: Array<string>
  readonly digests: Array<string>
  readonly texts: Array<string | Uint8Array>
}

// Bytes read from the file's end for `lastRowHint`.
const TAIL_BYTES = 64 * 1024

// The run and seq of the file's last store-format line (read from its last `TAIL_BYTES`), so that run's rows can be
// written with their group end at once (`CheckedPiece.end`). Only a hint: the store sets the end again when the run
// ends elsewhere, and any failure here is no hint.
const lastRowHint = (fs: FileSystem.FileSystem, file: string): Effect.Effect<{ readonly runId: string; readonly seq: number } | undefined> =>
  Effect.scoped(Effect.gen(function*() {
    const handle = yield* fs.open(file, { flag: "r" })
    const size = Number((yield* handle.stat).size)
    const from = Math.max(0, size - TAIL_BYTES)
    yield* handle.seek(from, "start")
    const bytes = yield* handle.readAlloc(size - from)
    if (bytes._tag === "None") return undefined
    const lines = Buffer.from(bytes.value).toString("utf8").split("\n")
    // The first piece may be cut inside a line: only whole lines count.
    for (let i = lines.length - 1; i >= (from === 0 ? 0 : 1); i--) {
      const line = lines[i]!.trim()
      if (line === "") continue
      let value: unknown
      try {
        value = JSON.parse(line)
      } catch {
        return undefined
      }
      if (typeof value !== "object" || value === null || !("event" in value)) {
        if (typeof value === "object" && value !== null && "trailer" in value) continue
        return undefined
      }
      const { event, seq } = value as { readonly event: unknown; readonly seq: unknown }
      const runId = typeof event === "object" && event !== null ? (event as { readonly runId?: unknown }).runId : undefined
      return typeof runId === "string" && typeof seq === "number" && Number.isSafeInteger(seq) && seq >= 1 ? { runId, seq } : undefined
    }
    return undefined
  })).pipe(Effect.orElseSucceed(() => undefined))

/**
 * Imports FILE in one pass into a store with `restoreChecked`, inside the store's one transaction: each line is
 * parsed and checked as `prepareImport` checks it, and each checked event written with the digest its check chained.
 * Anything else than a clean file of runs that all open in it ends in `OnePassDeclined`, the transaction rolled back
 * (nothing written). Meant for a target that holds no ledger yet: the caller removes what opening the store created
 * before importing the file the two-pass way.
 *
 * @since 0.1.0
 * @category programs
 */
export const importInOnePass = Effect.fn("ImportOnePass.importInOnePass")(function*(file: string) {
  const fs = yield* FileSystem.FileSystem
  const store = yield* RuntimeEventStore
  const restore = store.restoreChecked
  if (restore === undefined) return yield* new OnePassDeclined({ why: `the ${store.kind} store has no one-pass restore` })
  const hint = yield* lastRowHint(fs, file)
  // No set of the file's ids: an id used twice fails the store's insert (`UNIQUE(event_id)`), and the two passes then
  // refuse the file as they always did.
  const check = new StreamCheck({ keepIds: false })
  let declined: string | undefined
  let out: Array<CheckedPiece> = []
  let piece: PieceBuilder | undefined
  const order: Array<string> = []
  const builder = (runId: string, first: boolean, firstSeq: number, invocationId: string): PieceBuilder => ({
    runId,
    first,
    firstSeq,
    invocationId,
    ids: [],
    digests: [],
    texts: []
  })
  const flush = (done: boolean) => {
    const p = piece!
    const run = check.runs.get(p.runId)!
    out.push({
      runId: RunId.make(p.runId, true),
      first: p.first,
      firstSeq: p.firstSeq,
      invocationId: p.invocationId,
      end: hint !== undefined && hint.runId === p.runId ? hint.seq : undefined,
      ids: p.ids,
      digests: p.digests,
      texts: p.texts,
      tail: run.tail,
      done: done ? { tail: run.tail, calls: [...(run.verifier?.calls ?? run.calls).values()] } : undefined
    })
    piece = done ? undefined : builder(p.runId, false, p.firstSeq + p.ids.length, p.invocationId)
  }
  const parser = new FileParser((entry) => {
    check.add(entry)
    if (declined !== undefined) return
    const runId = entry.event.runId
    const run = check.runs.get(runId)!
    if (check.duplicate !== undefined || check.needsMemory || !check.restoreChecked || run.failure !== undefined) {
      declined = "the check refused or set the file aside"
      out = []
      return
    }
    if (piece !== undefined && piece.runId !== runId) flush(true)
    if (piece === undefined) {
      order.push(runId)
      piece = builder(runId, true, 1, entry.event.invocationId)
    }
    piece.ids.push(entry.event.id)
    piece.digests.push(run.tail.digest)
    piece.texts.push(entry.bytes ?? entry.text)
    if (piece.ids.length >= PIECE_EVENTS) flush(false)
  })
  parser.keepBytes = true
  const take = () => {
    const chunk = Chunk.unsafeFromArray(out)
    out = []
    return chunk
  }
  const pieces: Stream.Stream<CheckedPiece, ImportInvalid | OnePassDeclined> = fs.stream(file, {
    chunkSize: CHUNK_SIZE
  }).pipe(
    Stream.mapError(unreadable(file)),
    // A file the one pass does not take is given up at once: the two passes read it again from the start.
    Stream.mapChunksEffect((chunks) =>
      Effect.flatMap(guard(file, () => {
        for (const chunk of chunks) parser.push(chunk)
        return take()
      }), (pieces) => declined === undefined ? Effect.succeed(pieces) : Effect.fail(new OnePassDeclined({ why: declined })))
    ),
    Stream.concat(Stream.suspend(() =>
      Stream.fromEffect(Effect.flatMap(guard(file, () => parser.end()), (): Effect.Effect<Chunk.Chunk<CheckedPiece>, ImportInvalid | OnePassDeclined> => {
        if (declined === undefined && parser.section.headers.length > 0) declined = "the file holds run headers"
        if (declined === undefined && order.length === 0) declined = "the file holds no event"
        if (declined !== undefined) return Effect.fail(new OnePassDeclined({ why: declined }))
        return Effect.map(guard(file, () => check.finish()), () => {
          flush(true)
          return take()
        })
      })).pipe(Stream.flattenChunks)
    ))
  )
  const reached = yield* restore(pieces).pipe(
    Effect.catchAll((error) =>
      Effect.fail(error._tag === "OnePassDeclined" ? error : new OnePassDeclined({ why: error.message }))
    )
  )
  const runs: Array<RunImport> = order.map((runId, i) => ({
    runId,
    added: check.runs.get(runId)!.events,
    skipped: 0,
    highWater: reached[i]!
  }))
  return ledgerImportOf(file, parser.format, runs)
})
