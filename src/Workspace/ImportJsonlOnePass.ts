// `import` into a JSONL workspace that holds no ledger yet, in one pass (docs/spec/06-cli.md, docs/stores.md "JSONL"): the
// file is checked exactly as `ImportLedger.prepareImport` checks it while its ledger lines go to a draft, published at the end.
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as NodePath from "node:path"
import { jsonlLine } from "../Domain/RuntimeEvent.js"
import { FILE_NAME } from "../Layers/internal/jsonlFiles.js"
import { openDraft } from "../Layers/internal/jsonlImportDraft.js"
import type { JsonlImportDraft } from "../Layers/internal/jsonlImportDraft.js"
import type { LedgerImport, RunImport } from "../Programs/ImportLedger.js"
import { ledgerImportOf } from "../Programs/internal/importSummary.js"
import { StreamCheck } from "../Programs/internal/importChecks.js"
import type { ImportEntry } from "../Programs/internal/importLine.js"
import { FileParser } from "../Programs/internal/importParser.js"
import { guard, unreadable } from "../Programs/internal/importRefusal.js"

// How this stays what the two-pass import is. The check is `prepareImport`'s own (the same `FileParser` and
// `StreamCheck`), and a line is written only once the check has stepped over it with no failure, with the seq and
// digest that check reached: for a line whose event text it proved canonical as written (`FileParser.written`), its own
// bytes (a store-format line whose `end` is already the run's count, verbatim); else the canonical text. Each run is
// one group whose `end` is its event count (docs/wire-format.md, "an import writes each run as one group"), which the
// write needs before the run's first line: a first, light read of the file counts each run's lines (`predictRuns`),
// and the check's own counts must agree at the end. Anything else (a refusal, a file the streaming check cannot hold,
// a recovery fact, run headers, a count that differs, a ledger that appeared meanwhile) discards the draft and
// answers `None`: the caller then imports as before (`prepareImport`, which words any refusal, then the store).

// Bytes per read of the import file.
const CHUNK_SIZE = 1024 * 1024

const RUN_ID_KEY = Buffer.from(`,"runId":"`)

/** One run of the file as the light read counts it: its id and how many lines name it, in file order. */
interface PredictedRun {
  readonly runId: string
  count: number
}

// Calls `line(chunk, start, nl)` for each line chunk[start, nl) of FILE (the last one too, without its newline), and
// `chunkEnd(chunk)` after each chunk's lines: a line is searched in place, never sliced.
const eachLine = (
  fs: FileSystem.FileSystem,
  file: string,
  line: (chunk: Buffer, start: number, nl: number) => void,
  chunkEnd: (chunk: Buffer) => void = () => {}
): Effect.Effect<void, PlatformError> =>
  Effect.suspend(() => {
    let carry: Buffer | undefined
    return fs.stream(file, { chunkSize: CHUNK_SIZE }).pipe(
      Stream.runForEach((bytes) =>
        Effect.sync(() => {
          let chunk = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
          if (carry !== undefined) {
            chunk = Buffer.concat([carry, chunk])
            carry = undefined
          }
          let start = 0
          for (;;) {
            const nl = chunk.indexOf(0x0a, start)
            if (nl < 0) break
            line(chunk, start, nl)
            start = nl + 1
          }
          chunkEnd(chunk)
          if (start < chunk.length) carry = Buffer.from(chunk.subarray(start))
        })
      ),
      Effect.map(() => {
        if (carry === undefined) return
        line(carry, 0, carry.length)
        chunkEnd(carry)
      })
    )
  })

// The run id of the line chunk[start, nl), read after its last `,"runId":"` (in a canonical event text, the top-level
// member: only `sessionId`, `ts`, `turnId` follow it, and inside a string every quote is escaped): [from, to), or
// `undefined` when the line has none.
const runIdSpan = (chunk: Buffer, start: number, nl: number): readonly [number, number] | undefined => {
  const at = chunk.lastIndexOf(RUN_ID_KEY, nl - RUN_ID_KEY.length)
  if (at < start) return undefined
  const from = at + RUN_ID_KEY.length
  const to = chunk.indexOf(0x22, from)
  return to < 0 || to >= nl ? undefined : [from, to]
}

// Whether the line chunk[start, nl) opens as an event line does: `{"body":` (a canonical bare event) or `{"digest":`
// (a store-format line); a version 2 export's other records open otherwise.
const opensAsEvent = (chunk: Buffer, start: number, nl: number): boolean =>
  nl - start > 10 && chunk[start] === 0x7b && chunk[start + 1] === 0x22 &&
  (chunk[start + 2] === 0x62 || chunk[start + 2] === 0x64)

// The runs of FILE in order of their lines, each with its count of event lines. Only a guess, which the check's own
// counts must confirm. Most files hold one run: when the first and the last event line name the same run, the file
// is that run's alone (or its runs interleave, which the streaming check refuses to hold), and counting event lines
// is the whole read. Otherwise each line's run id is read (`runIdSpan`). `undefined` when a run id holds an escape.
const predictRuns = (
  fs: FileSystem.FileSystem,
  file: string
): Effect.Effect<ReadonlyArray<PredictedRun> | undefined, PlatformError> =>
  Effect.gen(function*() {
    let events = 0
    let first: Buffer | undefined
    let last: Buffer | undefined
    let lastStart = -1
    let lastEnd = -1
    yield* eachLine(fs, file, (chunk, start, nl) => {
      if (!opensAsEvent(chunk, start, nl)) return
      events++
      if (first === undefined) first = Buffer.from(chunk.subarray(start, nl))
      lastStart = start
      lastEnd = nl
    }, (chunk) => {
      if (lastStart >= 0) last = Buffer.from(chunk.subarray(lastStart, lastEnd))
      lastStart = -1
    })
    if (first === undefined || last === undefined) return []
    const a = runIdSpan(first, 0, first.length)
    const b = runIdSpan(last, 0, last.length)
    if (a !== undefined && b !== undefined && first.subarray(a[0], a[1]).equals(last.subarray(b[0], b[1]))) {
      const id = first.subarray(a[0], a[1])
      return id.includes(0x5c) ? undefined : [{ runId: id.toString("utf8"), count: events }]
    }
    return yield* predictEachLine(fs, file)
  })

// `predictRuns` for a file of several runs: each event line's run id, counted run by run.
const predictEachLine = (
  fs: FileSystem.FileSystem,
  file: string
): Effect.Effect<ReadonlyArray<PredictedRun> | undefined, PlatformError> =>
  Effect.suspend(() => {
    const runs: Array<PredictedRun> = []
    let current: Buffer | undefined
    let run: PredictedRun | undefined
    let failed = false
    return eachLine(fs, file, (chunk, start, nl) => {
      if (!opensAsEvent(chunk, start, nl)) return
      const at = chunk.lastIndexOf(RUN_ID_KEY, nl - RUN_ID_KEY.length)
      const from = at + RUN_ID_KEY.length
      if (
        current !== undefined && at >= start && from + current.length < nl && chunk[from + current.length] === 0x22 &&
        current.compare(chunk, from, from + current.length) === 0
      ) {
        run!.count++
        return
      }
      const span = runIdSpan(chunk, start, nl)
      if (span === undefined) return
      const id = chunk.subarray(span[0], span[1])
      if (id.includes(0x5c)) failed = true
      current = Buffer.from(id)
      run = { runId: current.toString("utf8"), count: 1 }
      runs.push(run)
    }).pipe(Effect.map(() => (failed ? undefined : runs)))
  })

// The ledger lines of the checked entries, as the check steps over them (see the top of this file).
class DraftLines {
  ok = true
  // The lines held since the last `take`, in one growing buffer.
  private out = Buffer.allocUnsafe(2 * CHUNK_SIZE)
  private at = 0
  private next = 0
  private end = 0
  private endText = ""

  constructor(
    private readonly predicted: ReadonlyArray<PredictedRun>,
    private readonly check: StreamCheck,
    private readonly parser: FileParser
  ) {}

  entry(entry: ImportEntry): void {
    if (!this.ok) return
    const check = this.check
    const run = check.runs.get(entry.event.runId)
    if (check.needsMemory || check.duplicate !== undefined || !check.restoreChecked || run === undefined || run.failure !== undefined) {
      return this.stop()
    }
    if (run.events === 1) {
      const predicted = this.predicted[this.next++]
      if (predicted === undefined || predicted.runId !== run.runId) return this.stop()
      this.end = predicted.count
      this.endText = String(predicted.count)
    }
    const { digest, seq } = run.tail
    if (seq !== run.events || seq > this.end) return this.stop()
    const bytes = this.parser.lineBytes
    if (this.parser.written.has(entry.line)) {
      const row = entry.row
      if (row === undefined) return this.line(digest, bytes, 0, bytes.length, seq)
      if (row.seq !== seq || row.digest !== digest) return this.stop()
      this.room(bytes.length + this.endText.length + 1)
      const out = this.out
      if (row.end === this.end) this.at += bytes.copy(out, this.at)
      else {
        // The line with its `end` replaced: `{"digest":"sha256:<64 hex>","end":` is its first 90 bytes.
        this.at += bytes.copy(out, this.at, 0, 90)
        this.at += out.write(this.endText, this.at, "latin1")
        this.at += bytes.copy(out, this.at, 90 + String(row.end).length)
      }
      out[this.at++] = 0x0a
      return
    }
    const text = jsonlLine(seq, this.end, digest, entry.text)
    this.room(text.length * 3)
    this.at += this.out.write(text, this.at, "utf8")
  }

  // `jsonlLine(seq, end, digest, text)` where `text` is bytes[from, to) (the head and tail are ASCII).
  private line(digest: string, bytes: Buffer, from: number, to: number, seq: number): void {
    this.room(120 + this.endText.length + (to - from))
    const out = this.out
    this.at += out.write(`{"digest":"${digest}","end":${this.endText},"event":`, this.at, "latin1")
    this.at += bytes.copy(out, this.at, from, to)
    this.at += out.write(`,"seq":${seq}}\n`, this.at, "latin1")
  }

  private room(bytes: number): void {
    if (this.at + bytes <= this.out.length) return
    const grown = Buffer.allocUnsafe(Math.max(this.out.length * 2, this.at + bytes))
    this.out.copy(grown, 0, 0, this.at)
    this.out = grown
  }

  /** Whether every run the check counted was guessed with its count (once the file is read and checked). */
  agrees(): boolean {
    if (!this.ok || this.next !== this.predicted.length || this.check.runs.size !== this.predicted.length) return false
    let i = 0
    for (const run of this.check.runs.values()) {
      const predicted = this.predicted[i++]!
      if (predicted.runId !== run.runId || predicted.count !== run.events || run.tail.seq !== run.events) return false
    }
    return true
  }

  /** The bytes held since the last call, valid until the next line is added. */
  take(): Buffer {
    const held = this.out.subarray(0, this.at)
    this.at = 0
    return held
  }

  private stop(): void {
    this.ok = false
    this.at = 0
  }
}

/**
 * `import` of FILE into the JSONL workspace WORKSPACE in one pass, when the workspace holds no ledger yet: the file is
 * checked as `ImportLedger.prepareImport` checks it while its ledger is written to a partial file in the workspace,
 * renamed into place at the end (under the writer lock and the append lock) only when everything was accepted. `None`
 * when the import must go the two-pass way (`prepareImport`, then `importPrepared` through the store): a ledger is
 * there, the file is refused (the two-pass check then words the refusal, before any store is opened), or it is one
 * the one pass does not write (see the top of this file). Either way, nothing it created is left behind.
 *
 * @since 0.1.0
 * @category programs
 */
export const importFreshJsonl = Effect.fn("ImportJsonlOnePass.importFreshJsonl")(function*(file: string, workspace: string) {
  const fs = yield* FileSystem.FileSystem
  const ledger = NodePath.join(workspace, FILE_NAME)
  const there = yield* fs.exists(ledger).pipe(Effect.orElseSucceed(() => true))
  if (there) return Option.none<LedgerImport>()
  const predicted = yield* predictRuns(fs, file).pipe(Effect.orElseSucceed(() => undefined))
  if (predicted === undefined || predicted.length === 0) return Option.none<LedgerImport>()
  return yield* Effect.scoped(Effect.gen(function*() {
    const draft = yield* openDraft(fs, workspace)
    return yield* onePass(fs, file, draft, predicted).pipe(
      Effect.tap((done) => Option.isNone(done) ? draft.discard : Effect.void),
      Effect.onExit((exit) => exit._tag === "Failure" ? draft.discard : Effect.void)
    )
  })).pipe(
    // A refusal, an unreadable file or a failed draft write: the two-pass import says what it is.
    Effect.catchAll(() => Effect.succeed(Option.none<LedgerImport>()))
  )
})

const onePass = (
  fs: FileSystem.FileSystem,
  file: string,
  draft: JsonlImportDraft,
  predicted: ReadonlyArray<PredictedRun>
) =>
  Effect.gen(function*() {
    const check = new StreamCheck()
    let lines: DraftLines | undefined = undefined
    const parser = new FileParser((entry) => {
      check.add(entry)
      lines!.entry(entry)
    })
    lines = new DraftLines(predicted, check, parser)
    const flush = Effect.suspend(() => (lines.ok ? draft.write(lines.take()) : Effect.void))
    yield* fs.stream(file, { chunkSize: CHUNK_SIZE }).pipe(
      Stream.mapError(unreadable(file)),
      Stream.runForEach((chunk) => Effect.zipRight(guard(file, () => parser.push(chunk)), flush))
    )
    yield* guard(file, () => parser.end())
    yield* flush
    if (check.duplicate !== undefined) return Option.none<LedgerImport>()
    yield* guard(file, () => check.finish())
    if (check.needsMemory || !lines.agrees() || parser.section.headers.length > 0) return Option.none<LedgerImport>()
    if (!(yield* draft.publish)) return Option.none<LedgerImport>()
    const runs: Array<RunImport> = [...check.runs.values()].map((run) => ({
      runId: run.runId,
      added: run.events,
      skipped: 0,
      highWater: { seq: run.tail.seq, digest: run.tail.digest }
    }))
    return Option.some(ledgerImportOf(file, parser.format, runs))
  })
