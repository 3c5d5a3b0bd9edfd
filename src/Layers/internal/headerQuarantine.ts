// `repair --quarantine-torn-tail` for run headers (docs/spec/01-ledger.md, "Torn tails", applied to docs/spec/04-continuation.md's `run-headers.jsonl`):
// under the exclusive owner lock, copy a torn last line aside, cut the file back to its last newline, log it.
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { createHash } from "node:crypto"
import * as NodePath from "node:path"
import * as CanonicalJson from "../../Domain/CanonicalJson.js"
import type { RunHeaderCorruption } from "../../Domain/ContinuationErrors.js"
import { StoreWriteFailed } from "../../Domain/Errors.js"
import type { StoreReadFailed, WorkspaceLocked, WorkspaceNotFound } from "../../Domain/Errors.js"
import { WorkspaceOwner } from "../../Services/WorkspaceOwner.js"
import { exists, readFailed, syncDirectory, writeFailed } from "./jsonlFiles.js"
import { refuseSymlinks } from "./symlinks.js"

/**
 * The header file's name (as `JsonlRunHeaderStore.FILE_NAME`).
 *
 * @since 0.1.0
 * @category constants
 */
export const HEADER_FILE_NAME = "run-headers.jsonl"
/**
 * The log of header quarantines: one canonical `{ts, offset, length, sha256, file}` line each.
 *
 * @since 0.1.0
 * @category constants
 */
export const HEADER_QUARANTINE_LOG_NAME = "run-headers.quarantine.log"
/**
 * The name of the n-th header quarantine file.
 *
 * @since 0.1.0
 * @category layers
 */
export const headerQuarantineFileName = (n: number): string => `${HEADER_FILE_NAME}.quarantine-${n}`

/**
 * What `quarantineHeaderTornTail` did: the torn line's offset (now the file's length), its length, line and copy.
 *
 * @since 0.1.0
 * @category models
 */
export interface HeaderQuarantineResult {
  readonly quarantined: boolean
  /** The quarantine file holding the torn bytes (absent when nothing was quarantined). */
  readonly file?: string
  readonly offset: number
  readonly length: number
  /** The 1-based line the torn bytes started. */
  readonly line?: number
  /** `sha256:<hex>` of the torn bytes. */
  readonly sha256?: string
}

// Opens the first unused `run-headers.jsonl.quarantine-<n>`, created 0600 (never overwriting one).
const openQuarantineFile = (
  fs: FileSystem.FileSystem,
  workspace: string,
  n: number
): Effect.Effect<{ readonly path: string; readonly name: string; readonly file: FileSystem.File }, PlatformError, Scope.Scope> => {
  const name = headerQuarantineFileName(n)
  const path = NodePath.join(workspace, name)
  return fs.open(path, { flag: "wx", mode: 0o600 }).pipe(
    Effect.map((file) => ({ path, name, file })),
    Effect.catchIf((e) => e._tag === "SystemError" && e.reason === "AlreadyExists", () => openQuarantineFile(fs, workspace, n + 1))
  )
}

/**
 * Quarantines a torn last line of `<workspace>/run-headers.jsonl` (bytes after its last newline: a header append that
 * was never acknowledged) under the exclusive owner lock, so no host or verb appends meanwhile: (1) copies the bytes to
 * `run-headers.jsonl.quarantine-<n>` (0600, fsynced); (2) truncates the file to its last newline (fsynced); (3)
 * appends `{ts, offset, length, sha256, file}` to `run-headers.quarantine.log`. `checkComplete` folds the complete
 * lines first: when they break a rule (anything but the torn line), it fails and nothing changes: a person decides.
 *
 * @since 0.1.0
 * @category layers
 */
export const quarantineHeaderTornTail = (
  workspace: string,
  checkComplete: Effect.Effect<void, RunHeaderCorruption | StoreReadFailed | WorkspaceNotFound, FileSystem.FileSystem>
): Effect.Effect<
  HeaderQuarantineResult,
  WorkspaceNotFound | WorkspaceLocked | RunHeaderCorruption | StoreReadFailed | StoreWriteFailed,
  FileSystem.FileSystem | WorkspaceOwner
> =>
  Effect.scoped(Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const owner = yield* WorkspaceOwner
    const path = NodePath.join(workspace, HEADER_FILE_NAME)
    const none: HeaderQuarantineResult = { quarantined: false, offset: 0, length: 0 }
    yield* refuseSymlinks(fs, workspace, [HEADER_FILE_NAME, HEADER_QUARANTINE_LOG_NAME])
    if (!(yield* exists(fs, path))) return none
    // A file that ends in a newline has nothing to move: no lock taken (a running host keeps its shared hold).
    const seen = yield* fs.readFile(path).pipe(Effect.mapError(readFailed(path, "read")))
    if (seen.length === 0 || seen[seen.length - 1] === 0x0a) return { ...none, offset: seen.length }
    yield* owner.acquire(workspace, "exclusive")
    const bytes = yield* fs.readFile(path).pipe(Effect.mapError(readFailed(path, "read")))
    const offset = bytes.lastIndexOf(0x0a) + 1
    if (offset === bytes.length) return { ...none, offset }
    // The complete lines must hold (the fold stops at the first broken one, the torn line only after them all).
    yield* checkComplete
    const tail = bytes.subarray(offset)
    let line = 1
    for (let i = 0; i < offset; i++) if (bytes[i] === 0x0a) line++
    const sha256 = `sha256:${createHash("sha256").update(tail).digest("hex")}`
    const failed = (what: string, at: string) => writeFailed("", at, what)

    // 1. Copy the torn bytes aside.
    const target = yield* openQuarantineFile(fs, workspace, 1).pipe(Effect.mapError(failed("create a quarantine file in", workspace)))
    yield* target.file.writeAll(tail).pipe(
      Effect.zipRight(target.file.sync),
      Effect.zipRight(syncDirectory(fs, workspace)),
      Effect.mapError(failed("copy the torn line to", target.path))
    )

    // 2. Cut the file back to its last newline, only if it is still exactly what was read (nobody appended).
    yield* Effect.scoped(Effect.gen(function*() {
      const file = yield* fs.open(path, { flag: "r+" })
      const now = yield* fs.readFile(path)
      if (now.length !== bytes.length || Buffer.compare(Buffer.from(now), Buffer.from(bytes)) !== 0) {
        return yield* new StoreWriteFailed({
          runId: "",
          cause: "changed under the lock",
          message: `${path} changed while its torn line was copied to ${target.path}; it was not truncated. Run ` +
            "`runtime-resume repair --quarantine-torn-tail` again once no runtime-resume process is writing"
        })
      }
      yield* file.truncate(offset)
      yield* file.sync
    })).pipe(Effect.mapError((e) => e._tag === "StoreWriteFailed" ? e : failed("truncate", path)(e)))

    // 3. Log it.
    const ts = yield* Clock.currentTimeMillis
    const entry = CanonicalJson.encode({ ts, offset, length: tail.length, sha256, file: target.name })
    if (entry._tag === "Fail") return yield* Effect.dieMessage(`header quarantine log entry: ${entry.failure.message}`)
    const logPath = NodePath.join(workspace, HEADER_QUARANTINE_LOG_NAME)
    const logExisted = yield* exists(fs, logPath)
    yield* Effect.scoped(
      fs.open(logPath, { flag: "a", mode: 0o600 }).pipe(
        Effect.flatMap((file) => Effect.zipRight(file.writeAll(Buffer.from(`${entry.text}\n`, "utf8")), file.sync))
      )
    ).pipe(
      Effect.zipRight(logExisted ? Effect.void : syncDirectory(fs, workspace)),
      Effect.mapError(failed("append to", logPath))
    )
    const result: HeaderQuarantineResult = { quarantined: true, file: target.path, offset, length: tail.length, line, sha256 }
    return result
  }))
