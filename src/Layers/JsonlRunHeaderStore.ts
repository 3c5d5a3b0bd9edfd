// The JSONL RunHeaderStore of docs/spec/04-continuation.md: `<workspace>/run-headers.jsonl`, one canonical record per line (a full header,
// the last record per run wins; a continuation's first record carries its claim), one O_APPEND write and fsync each.
import * as FileSystem from "@effect/platform/FileSystem"
import type { PlatformError } from "@effect/platform/Error"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as NodePath from "node:path"
import { decodeUtf8, encode, encodeParsed, parseJson } from "../Domain/CanonicalJson.js"
import { RunHeaderCorruption, RunHeaderExists, RunHeaderNotFound, type RunHeaderUpdateRefused } from "../Domain/ContinuationErrors.js"
import type { HeaderCorruptionReason } from "../Domain/ContinuationErrors.js"
import { StoreReadFailed, StoreWriteFailed, WorkspaceNotFound } from "../Domain/Errors.js"
import { ContinuationClaim, RunHeader } from "../Domain/RunHeader.js"
import { checkClaim, checkRestore, checkStatusChange, isOnBoundary, RunHeaderStore } from "../Services/RunHeaderStore.js"
import type { ClaimError, RunHeaderStoreShape } from "../Services/RunHeaderStore.js"
import { quarantineHeaderTornTail } from "./internal/headerQuarantine.js"
import { exists, makeDirectoryDurably, readFailed, syncDirectory } from "./internal/jsonlFiles.js"
import { expectedEpoch, nodeKey, ownershipLost, readEpochFile } from "./internal/ownerFence.js"
import { refuseSymlinks } from "./internal/symlinks.js"
import { shellWord } from "../Domain/ShellWord.js"

/**
 * The header file's name inside a workspace.
 *
 * @since 0.1.0
 * @category constants
 */
export const FILE_NAME = "run-headers.jsonl"

/**
 * How to open a JSONL run header store.
 *
 * @since 0.1.0
 * @category models
 */
export interface JsonlRunHeaderStoreOptions {
  /** The workspace folder; a writer creates it (0700) and the file (0600) when missing. */
  readonly workspace: string
  /** Open for reading only: nothing is created; a missing file holds no headers; writes fail with `StoreWriteFailed`. */
  readonly readOnly?: boolean
}

// How often a read that ends in a torn line re-reads, when the file grew meanwhile (another process's append in flight).
const TORN_RETRIES = 3

/**
 * The state the records of the file fold into: each run's last header, and every claim, in file order; and how much
 * of the file that is (the complete lines folded, and their bytes). Never changed once built: a later fold copies it.
 */
interface Folded {
  readonly headers: ReadonlyMap<string, RunHeader>
  readonly claims: ReadonlyArray<ContinuationClaim>
  readonly lines: number
  readonly end: number
}

const EMPTY: Folded = { headers: new Map(), claims: [], lines: 0, end: 0 }


const decodeHeader = Schema.decodeUnknownEither(RunHeader, { onExcessProperty: "error" })
const decodeClaim = Schema.decodeUnknownEither(ContinuationClaim, { onExcessProperty: "error" })
const encodeHeader = Schema.encodeSync(RunHeader)
const encodeClaim = Schema.encodeSync(ContinuationClaim)

// The canonical text of a header without its status fields: what must never change between records of one run.
const immutablePart = (header: RunHeader): string => {
  const { status: _s, statusReason: _r, updatedAt: _u, ...fields } = encodeHeader(header)
  const encoded = encode(fields)
  return encoded._tag === "Ok" ? encoded.text : ""
}

/** One record's line: the canonical JSON of the header's fields, plus `claim` when given, and a newline. */
const recordLine = (header: RunHeader, claim?: ContinuationClaim): string => {
  const encoded = encode({ ...encodeHeader(header), ...(claim !== undefined ? { claim: encodeClaim(claim) } : {}) })
  // Headers and claims are flat, small and strict JSON: they always encode.
  if (encoded._tag === "Fail") throw new Error(`run ${header.runId}: the header has no canonical encoding: ${encoded.failure.message}`)
  return `${encoded.text}\n`
}

/**
 * Folds the file's text into its state, checking every record against the ones before it (the store's rules). A
 * last line without its newline is a torn write: reported as `torn_line`, never skipped (like the ledger's torn tail,
 * it was never acknowledged, but the store does not guess: a person removes it). Returns the state or the first broken line.
 *
 * `from` is the state of the file's first `from.end` bytes, which the caller found byte for byte as they were when
 * `from` was folded: only the lines after them are read (the fold goes line by line, so the result is the same as
 * folding the whole file). A failure is reported by the caller's fold of the whole file, so its wording never
 * depends on what was folded before.
 */
const fold = (bytes: Uint8Array, file: string, from: Folded = EMPTY): Either.Either<Folded, RunHeaderCorruption> => {
  const headers = new Map(from.headers)
  const claims = from.claims.slice()
  // The complete lines end at the last newline; what follows it is a torn write, judged after them.
  const end = bytes.lastIndexOf(0x0a) + 1
  // `from.end` follows a newline byte, which is never inside a UTF-8 sequence: the rest decodes on its own.
  const text = decodeUtf8(bytes.subarray(from.end, end))
  const corrupt = (line: number, reason: HeaderCorruptionReason, why: string, runId?: string) =>
    Either.left(
      new RunHeaderCorruption({
        file,
        line,
        ...(runId !== undefined ? { runId } : {}),
        reason,
        message: `${file} line ${line}${runId !== undefined ? ` (run ${runId})` : ""}: ${why}; nothing was changed`
      })
    )
  if (text === undefined) return corrupt(1, "invalid_json", "the file is not valid UTF-8 (the line is the first of the file)")
  const lines = text.split("\n")
  lines.pop()
  for (let i = 0; i < lines.length; i++) {
    const line = from.lines + i + 1
    const parsed = parseJson(lines[i]!)
    if (parsed === undefined || typeof parsed.value !== "object" || parsed.value === null || Array.isArray(parsed.value)) {
      return corrupt(line, "invalid_json", "the line is not a JSON object")
    }
    const canonical = encodeParsed(parsed.value)
    if (canonical._tag === "Fail" || canonical.text !== lines[i]) return corrupt(line, "non_canonical", "the line is not canonical JSON")
    const { claim: rawClaim, ...rawHeader } = parsed.value as { readonly claim?: unknown }
    const header = decodeHeader(rawHeader)
    if (Either.isLeft(header)) return corrupt(line, "schema_invalid", `not a run header: ${header.left.message}`)
    const runId = header.right.runId
    let claim: ContinuationClaim | undefined
    if (rawClaim !== undefined) {
      const decoded = decodeClaim(rawClaim)
      if (Either.isLeft(decoded)) return corrupt(line, "schema_invalid", `not a continuation claim: ${decoded.left.message}`, runId)
      claim = decoded.right
    }
    const earlier = headers.get(runId)
    if (earlier === undefined) {
      if (claim !== undefined) {
        const checked = checkClaim(claim, header.right, {
          atBoundary: claims.filter((c) => isOnBoundary(c, claim!)),
          headerOf: (r) => headers.get(r),
          claimIdTaken: (claimId) => claims.some((c) => c.claimId === claimId)
        })
        if (Either.isLeft(checked)) return corrupt(line, "claim_invalid", `the claim breaks the claim rules: ${checked.left.message}`, runId)
        claims.push(claim)
      }
      headers.set(runId, header.right)
      continue
    }
    if (claim !== undefined) return corrupt(line, "claim_invalid", "a claim on a later record of a run (only its first record may carry one)", runId)
    if (immutablePart(earlier) !== immutablePart(header.right)) {
      return corrupt(line, "immutable_field_changed", "a field other than status, statusReason and updatedAt changed", runId)
    }
    const { status, statusReason, updatedAt } = header.right
    const changed = checkStatusChange(earlier, status, { at: updatedAt, ...(statusReason !== undefined ? { reason: statusReason } : {}) })
    if (Either.isLeft(changed)) {
      return corrupt(line, changed.left.reason === "header_terminal" ? "terminal_changed" : "status_backwards", changed.left.message, runId)
    }
    headers.set(runId, header.right)
  }
  if (end < bytes.length) {
    return corrupt(
      from.lines + lines.length + 1,
      "torn_line",
      `the last line (${bytes.length - end} bytes at offset ${end}) has no newline: a write that was interrupted and ` +
        "never acknowledged. The store never drops it itself; move it aside (its bytes are kept) with: " +
        `runtime-resume repair --quarantine-torn-tail ${shellWord(NodePath.dirname(file))}`
    )
  }
  return Either.right({ headers, claims, lines: from.lines + lines.length, end })
}

/**
 * Folds `bytes` reusing `cached` (the last state folded by this instance, and the bytes it was folded from) when the
 * file still starts with exactly those bytes: then only what was appended since is read. Anything else (a file that
 * shrank or changed before its end) is folded whole again, as is any failure, so that its report is the whole file's.
 */
const foldReusing = (
  bytes: Uint8Array,
  file: string,
  cached: { readonly bytes: Uint8Array; readonly folded: Folded } | undefined
): Either.Either<Folded, RunHeaderCorruption> => {
  if (cached === undefined) return fold(bytes, file)
  const { end } = cached.folded
  const same = bytes.length >= end && Buffer.compare(bytes.subarray(0, end), cached.bytes.subarray(0, end)) === 0
  if (!same) return fold(bytes, file)
  if (bytes.length === end) return Either.right(cached.folded)
  const folded = fold(bytes, file, cached.folded)
  return Either.isRight(folded) ? folded : fold(bytes, file)
}

/** What became of a failed append's bytes: cut back (none left), none written, or left (a torn line may remain). */
type CutBack = "cut" | "none" | "left" | "unknown"

const writeFailed = (runId: string, path: string, cut: CutBack) => (error: PlatformError) =>
  new StoreWriteFailed({
    runId,
    cause: error.message,
    message: `could not append run ${runId}'s header record to ${path}: ${error.message}. ` + (
      cut === "cut"
        ? "Its partial bytes were cut back: the file holds every earlier record and nothing of this one"
        : cut === "none"
        ? "Nothing of it was written"
        : "It may be on disk as a torn last line, which the next read reports; move it aside (its bytes are kept) " +
          `with: runtime-resume repair --quarantine-torn-tail ${shellWord(NodePath.dirname(path))}`
    )
  })

/**
 * After a failed append that started at `start`: truncates the file back to `start` (and fsyncs) when everything after
 * `start` is a prefix of `bytes`, this append's own bytes; anything else (another process appended after it) is left.
 */
const truncateBack = (
  fs: FileSystem.FileSystem,
  path: string,
  file: FileSystem.File,
  start: number,
  bytes: Uint8Array
): Effect.Effect<CutBack> =>
  Effect.gen(function*() {
    const size = Number((yield* file.stat).size)
    if (size === start) return "none" as const
    if (size < start || size > start + bytes.length) return "left" as const
    const now = yield* fs.readFile(path)
    const after = now.subarray(start)
    if (after.length !== size - start || Buffer.compare(Buffer.from(after), Buffer.from(bytes.subarray(0, after.length))) !== 0) {
      return "left" as const
    }
    yield* file.truncate(start)
    yield* file.sync
    return "cut" as const
  }).pipe(Effect.orElseSucceed(() => "left" as const))

/**
 * Opens the JSONL run header store over `options.workspace`. Every operation reads the whole file, so records other
 * processes appended are seen, and checks it: the lines this instance folded before are compared byte for byte, the
 * lines after them are folded onto the state it kept (a file changed anywhere else is folded whole again). Several processes
 * may append (`create`, `setStatus`); `claim` checks against every earlier record and must run under the
 * exclusive workspace lock, which the caller holds (this layer takes no lock).
 *
 * @since 0.1.0
 * @category layers
 */
export const make = (
  options: JsonlRunHeaderStoreOptions
): Effect.Effect<RunHeaderStoreShape, WorkspaceNotFound | StoreReadFailed | RunHeaderCorruption, Scope.Scope | FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const workspace = options.workspace
    const path = NodePath.join(workspace, FILE_NAME)
    const readOnly = options.readOnly === true
    yield* refuseSymlinks(fs, workspace, [FILE_NAME])

    const readOnce = (): Effect.Effect<Uint8Array | undefined, StoreReadFailed> =>
      fs.readFile(path).pipe(
        Effect.catchIf((e) => e._tag === "SystemError" && e.reason === "NotFound", () => Effect.succeed(undefined)),
        Effect.mapError(readFailed(path, "read"))
      )

    // The last state this instance folded, and the bytes it folded it from (see `foldReusing`).
    let cached: { readonly bytes: Uint8Array; readonly folded: Folded } | undefined

    // Reads and folds the file (every record is checked, but the part folded before is only compared, byte for
    // byte); a torn last line is re-read while the file keeps changing (an append in flight).
    const read = (attempt = 0): Effect.Effect<Folded, StoreReadFailed | RunHeaderCorruption> =>
      Effect.flatMap(readOnce(), (bytes): Effect.Effect<Folded, StoreReadFailed | RunHeaderCorruption> => {
        if (bytes === undefined) return Effect.succeed(EMPTY)
        const folded = foldReusing(bytes, path, cached)
        if (Either.isRight(folded)) {
          cached = { bytes, folded: folded.right }
          return Effect.succeed(folded.right)
        }
        if (folded.left.reason !== "torn_line" || attempt >= TORN_RETRIES) return Effect.fail(folded.left)
        return fs.stat(path).pipe(
          Effect.mapError(readFailed(path, "stat")),
          Effect.flatMap((info) => Number(info.size) === bytes.length ? Effect.fail(folded.left) : read(attempt + 1))
        )
      })

    const refuseReadOnly = (runId: string) =>
      Effect.fail(
        new StoreWriteFailed({
          runId,
          cause: "read-only store",
          message: `the run header store over ${workspace} was opened read-only; open it for writing to change run ${runId}`
        })
      )

    let append: (runId: string, line: string) => Effect.Effect<void, StoreWriteFailed> = refuseReadOnly
    if (!readOnly) {
      if (yield* exists(fs, workspace)) {
        const info = yield* fs.stat(workspace).pipe(Effect.mapError(readFailed(workspace, "stat")))
        if (info.type !== "Directory") {
          return yield* new WorkspaceNotFound({ workspace, message: `${workspace} is not a folder; a workspace must be a folder` })
        }
      } else {
        yield* makeDirectoryDurably(fs, workspace, 0o700).pipe(Effect.mapError(readFailed(workspace, "create the workspace folder")))
      }
      if (!(yield* exists(fs, path))) {
        // Created 0600 and made durable by a directory fsync; "ax": a concurrent creator's file is kept.
        yield* Effect.scoped(fs.open(path, { flag: "ax", mode: 0o600 })).pipe(
          Effect.catchIf((e) => e._tag === "SystemError" && e.reason === "AlreadyExists", () => Effect.void),
          Effect.zipRight(syncDirectory(fs, workspace)),
          Effect.mapError(readFailed(path, "create"))
        )
      }
      // O_APPEND: each record is one write at the end of the file, whoever else appends.
      const file = yield* fs.open(path, { flag: "a", mode: 0o600 }).pipe(Effect.mapError(readFailed(path, "open")))
      append = (runId, line) =>
        Effect.gen(function*() {
          const bytes = Buffer.from(line, "utf8")
          const start = Number((yield* file.stat).size)
          const written = yield* Effect.either(Effect.zipRight(file.writeAll(bytes), file.sync))
          if (written._tag === "Right") return
          // A failed append (a full disk, an I/O error) is cut back, so no torn line is left to block every writer:
          // only when what follows `start` is a prefix of this record (never bytes another process appended).
          const cut = yield* truncateBack(fs, path, file, start, bytes)
          return yield* Effect.fail(writeFailed(runId, path, cut)(written.left))
        }).pipe(Effect.mapError((e) => e._tag === "StoreWriteFailed" ? e : writeFailed(runId, path, "unknown")(e)))
    }
    // Fail fast on a broken file (every operation checks it again).
    yield* read()

    // Writes of this instance are serialized: each reads, checks and appends with nothing of ours in between.
    const permit = yield* Effect.makeSemaphore(1)
    // Fencing (docs/stores.md "Fencing"): while this process holds the owner lock, every write first checks the owner
    // epoch (`runtime-owner.epoch`) against the one it holds the workspace under; moved: `OwnershipLost`, nothing written.
    const fenceKey = nodeKey(workspace)
    const fenced = Effect.suspend(() => {
      const expected = expectedEpoch(fenceKey)
      if (expected === undefined) return Effect.void
      const found = readEpochFile(workspace)
      return found === expected ? Effect.void : Effect.fail(ownershipLost(path, expected, found))
    })
    const locked = <A, E>(effect: Effect.Effect<A, E>) => permit.withPermits(1)(Effect.uninterruptible(Effect.zipRight(fenced, effect)))

    const create: RunHeaderStoreShape["create"] = (header) =>
      readOnly ? refuseReadOnly(header.runId) : locked(Effect.flatMap(read(), (state): Effect.Effect<RunHeader, RunHeaderExists | StoreWriteFailed> =>
        state.headers.has(header.runId)
          ? Effect.fail(new RunHeaderExists({ runId: header.runId, message: `run ${header.runId} already has a header in ${path}; nothing was written` }))
          : Effect.as(append(header.runId, recordLine(header)), header)))

    const setStatus: RunHeaderStoreShape["setStatus"] = (runId, status, setOptions) =>
      readOnly ? refuseReadOnly(runId) : locked(Effect.flatMap(read(), (state): Effect.Effect<RunHeader, RunHeaderNotFound | RunHeaderUpdateRefused | StoreWriteFailed> => {
        const current = state.headers.get(runId)
        if (current === undefined) {
          return Effect.fail(new RunHeaderNotFound({ runId, message: `run ${runId} has no header in ${path} (it is unmanaged); nothing was changed` }))
        }
        return Either.match(checkStatusChange(current, status, setOptions), {
          onLeft: (refused) => Effect.fail(refused),
          onRight: (next) => Effect.as(append(runId, recordLine(next)), next)
        })
      }))

    const claim: RunHeaderStoreShape["claim"] = (claim, header) =>
      readOnly ? refuseReadOnly(header.runId) : locked(Effect.flatMap(read(), (state): Effect.Effect<ContinuationClaim, ClaimError> =>
        Either.match(
          checkClaim(claim, header, {
            atBoundary: state.claims.filter((c) => isOnBoundary(c, claim)),
            headerOf: (runId) => state.headers.get(runId),
            claimIdTaken: (claimId) => state.claims.some((c) => c.claimId === claimId)
          }),
          {
            onLeft: (refused) => Effect.fail(refused),
            // The claim and the continuation's header are one record: one write, one fsync.
            onRight: () => Effect.as(append(header.runId, recordLine(header, claim)), claim)
          }
        )))

    // `import`'s restore: checked against every earlier record, then every record in ONE append and fsync (a claim
    // on its continuation's record, as `claim` writes it).
    const restore: NonNullable<RunHeaderStoreShape["restore"]> = (records) =>
      records.length === 0 ? Effect.void : readOnly ? refuseReadOnly(records[0]!.header.runId) : locked(Effect.flatMap(read(), (state): Effect.Effect<void, ClaimError> =>
        Either.match(
          checkRestore(records, {
            headerOf: (runId) => state.headers.get(runId),
            claimsAt: (boundary) => state.claims.filter((c) => isOnBoundary(c, boundary)),
            claimIdTaken: (claimId) => state.claims.some((c) => c.claimId === claimId)
          }),
          {
            onLeft: (refused) => Effect.fail(refused),
            onRight: () => append(records[0]!.header.runId, records.map((r) => recordLine(r.header, r.claim)).join(""))
          }
        )))

    return RunHeaderStore.of({
      kind: "jsonl",
      restore,
      create,
      get: (runId) => Effect.map(read(), (state) => Option.fromNullable(state.headers.get(runId))),
      list: () => Effect.map(read(), (state) => Array.from(state.headers.values())),
      setStatus,
      claim,
      claimsAt: (boundary) => Effect.map(read(), (state) => state.claims.filter((c) => isOnBoundary(c, boundary))),
      claims: (sourceRunId) => Effect.map(read(), (state) => state.claims.filter((c) => c.sourceRunId === sourceRunId))
    })
  })

/**
 * The JSONL run header store over `options.workspace` as a Layer; its file handle closes with the layer's scope.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: JsonlRunHeaderStoreOptions
): Layer.Layer<RunHeaderStore, WorkspaceNotFound | StoreReadFailed | RunHeaderCorruption, FileSystem.FileSystem> =>
  Layer.scoped(RunHeaderStore, make(options))

/**
 * Folds every record of `<workspace>/run-headers.jsonl` as a read-only store does, and fails as it would
 * (`RunHeaderCorruption`: a torn last line is `torn_line`, with its line, offset and the command that moves it aside).
 * `verify` and `inspect` run it through the JSONL event store's `sidecarCheck`. A missing file holds no headers.
 *
 * @since 0.1.0
 * @category layers
 */
export const checkFile = (workspace: string): Effect.Effect<void, RunHeaderCorruption | StoreReadFailed, FileSystem.FileSystem> =>
  Effect.scoped(make({ workspace, readOnly: true })).pipe(
    Effect.asVoid,
    // A read-only store creates nothing, so a missing workspace is simply no headers.
    Effect.catchTag("WorkspaceNotFound", () => Effect.void)
  )

/**
 * `repair --quarantine-torn-tail` for run headers: moves a torn last line of `run-headers.jsonl` aside under the
 * exclusive owner lock (`internal/headerQuarantine`), after checking that every complete line before it holds.
 *
 * @since 0.1.0
 * @category layers
 */
export const quarantineTornTail = (workspace: string) =>
  quarantineHeaderTornTail(
    workspace,
    checkFile(workspace).pipe(Effect.catchIf((e) => e._tag === "RunHeaderCorruption" && e.reason === "torn_line", () => Effect.void))
  )
