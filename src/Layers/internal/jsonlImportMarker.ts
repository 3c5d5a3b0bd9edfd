// The interrupted-import marker of the JSONL store: before an import's (restore-mode) write, the writer records where
// it starts, how long it is and a hash of every chunk; a torn tail that this marker proves is that import's own.
import type { PlatformError } from "@effect/platform/Error"
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { createHash } from "node:crypto"
import { StoreReadFailed } from "../../Domain/Errors.js"
import * as NodePath from "node:path"
import type { JsonlPaths } from "./jsonlFiles.js"
import { syncDirectory } from "./jsonlFiles.js"
import type { TornTail } from "./jsonlScan.js"

// Why a torn tail can be proven an import's own. A writer holds the exclusive writer lock from before the marker is
// written until after its write is fsynced and the marker removed, and no writer opens over a torn tail. So when a
// writer opens (holding the lock) and finds a torn tail inside the span a marker says an import's write covers,
// with every whole chunk from the marker's offset on hashing as the marker says, the tail is the unacknowledged
// part of that write: nothing after the marker's offset was ever acknowledged. A writer that opens
// with no torn tail removes any marker left behind (a finished write, or a tail already quarantined), so a marker
// never outlives the write it describes into another one. The tail is then quarantined (moved aside, never deleted).

/**
 * The marker's file name inside a workspace.
 *
 * @since 0.1.0
 * @category constants
 */
export const IMPORT_MARKER_NAME = "runtime-events.import-pending"

/**
 * Bytes per chunk of an import's write: each is one `write`, and the marker holds each chunk's hash.
 *
 * @since 0.1.0
 * @category constants
 */
export const IMPORT_CHUNK_BYTES = 1024 * 1024

/**
 * What the marker records about the import's write.
 *
 * @since 0.1.0
 * @category models
 */
export interface ImportMarker {
  readonly version: 1
  /** The ledger's acknowledged length when the write started. */
  readonly offset: number
  readonly length: number
  readonly chunkBytes: number
  /** `sha256:<hex>` of each chunk of the write, in order (the last one may be short). */
  readonly chunks: ReadonlyArray<string>
}

/**
 * The marker's path in a workspace.
 *
 * @since 0.1.0
 * @category layers
 */
export const markerPath = (paths: JsonlPaths): string => NodePath.join(paths.workspace, IMPORT_MARKER_NAME)

const sha256 = (bytes: Uint8Array): string => `sha256:${createHash("sha256").update(bytes).digest("hex")}`

const notFound = (e: PlatformError): boolean => e._tag === "SystemError" && e.reason === "NotFound"

/**
 * Removes the marker; a missing one is fine.
 *
 * @since 0.1.0
 * @category layers
 */
export const removeMarker = (fs: FileSystem.FileSystem, paths: JsonlPaths): Effect.Effect<void, PlatformError> =>
  fs.remove(markerPath(paths)).pipe(Effect.catchIf(notFound, () => Effect.void))

/**
 * Writes the marker of a write of `bytes` at `offset`: created 0600 and exclusively (never through a link), fsynced,
 * and the folder fsynced, before the write starts.
 *
 * @since 0.1.0
 * @category layers
 */
export const writeMarker = (
  fs: FileSystem.FileSystem,
  paths: JsonlPaths,
  offset: number,
  bytes: Uint8Array
): Effect.Effect<void, PlatformError> =>
  Effect.gen(function*() {
    const chunks: Array<string> = []
    for (let at = 0; at < bytes.length; at += IMPORT_CHUNK_BYTES) {
      chunks.push(sha256(bytes.subarray(at, at + IMPORT_CHUNK_BYTES)))
    }
    const marker: ImportMarker = { version: 1, offset, length: bytes.length, chunkBytes: IMPORT_CHUNK_BYTES, chunks }
    yield* removeMarker(fs, paths)
    yield* Effect.scoped(Effect.gen(function*() {
      const file = yield* fs.open(markerPath(paths), { flag: "wx", mode: 0o600 })
      yield* file.writeAll(new TextEncoder().encode(`${JSON.stringify(marker)}\n`))
      yield* file.sync
    }))
    yield* syncDirectory(fs, paths.workspace)
  })

/**
 * Writes `bytes` at the file's current position in chunks of `IMPORT_CHUNK_BYTES`, one `write` each.
 *
 * @since 0.1.0
 * @category layers
 */
export const writeChunked = (file: FileSystem.File, bytes: Uint8Array): Effect.Effect<void, PlatformError> =>
  Effect.gen(function*() {
    for (let at = 0; at < bytes.length; at += IMPORT_CHUNK_BYTES) {
      yield* file.writeAll(bytes.subarray(at, at + IMPORT_CHUNK_BYTES))
    }
  })

// ---- The marker of a streamed import (`restoreStream`) --------------------------------------------------------
// Its write is not known in advance, so the marker grows with it: a header line `{"version":2,"offset":…,
// "chunkBytes":…}`, then, before each chunk is written, a line `sha256:<hex> <length>` appended and fsynced. A last
// line cut short (no newline) was never followed by its chunk's write, so it is left out. Read back, it is the same
// proof as a version 1 marker: every chunk but the last is whole, and the write's length is the sum of theirs.

const STREAM_CHUNK_LINE = /^(sha256:[0-9a-f]{64}) ([0-9]+)$/

// A version 2 marker as a version 1 one; `undefined` when the text is not one (a version 1 marker, or garbage);
// a malformed version 2 marker is a value `isMarker` refuses.
const parseStreamMarker = (text: string): ImportMarker | { readonly version: -1 } | undefined => {
  const lines = text.split("\n")
  const header: unknown = JSON.parse(lines[0] ?? "")
  if (typeof header !== "object" || header === null || (header as { version?: unknown }).version !== 2) return undefined
  const { offset, chunkBytes } = header as { offset?: unknown; chunkBytes?: unknown }
  if (typeof offset !== "number" || typeof chunkBytes !== "number") return { version: -1 }
  // Complete lines only: the text after the last newline was cut short.
  const complete = lines.slice(1, lines.length - 1)
  const chunks: Array<string> = []
  let length = 0
  for (let i = 0; i < complete.length; i++) {
    const m = STREAM_CHUNK_LINE.exec(complete[i]!)
    if (m === null) return { version: -1 }
    const bytes = Number(m[2])
    if (bytes < 1 || bytes > chunkBytes || (i < complete.length - 1 && bytes !== chunkBytes)) return { version: -1 }
    chunks.push(m[1]!)
    length += bytes
  }
  return { version: 1, offset, length, chunkBytes, chunks }
}

/**
 * The marker of a streamed import's write, growing with it (see above).
 *
 * @since 0.1.0
 * @category models
 */
export interface StreamMarker {
  /** Records the next chunk (fsynced) before it is written. */
  readonly announce: (chunk: Uint8Array) => Effect.Effect<void, PlatformError>
}

/**
 * Creates the marker of a streamed write at `offset` (0600, exclusively, fsynced, the folder fsynced) for the life
 * of the scope; each chunk of at most `IMPORT_CHUNK_BYTES` is announced before it is written.
 *
 * @since 0.1.0
 * @category layers
 */
export const openStreamMarker = (
  fs: FileSystem.FileSystem,
  paths: JsonlPaths,
  offset: number
): Effect.Effect<StreamMarker, PlatformError, Scope.Scope> =>
  Effect.gen(function*() {
    yield* removeMarker(fs, paths)
    const file = yield* fs.open(markerPath(paths), { flag: "wx", mode: 0o600 })
    const encoder = new TextEncoder()
    yield* file.writeAll(encoder.encode(`${JSON.stringify({ version: 2, offset, chunkBytes: IMPORT_CHUNK_BYTES })}\n`))
    yield* file.sync
    yield* syncDirectory(fs, paths.workspace)
    return {
      announce: (chunk) =>
        Effect.zipRight(file.writeAll(encoder.encode(`${sha256(chunk)} ${chunk.length}\n`)), file.sync)
    }
  })

const isMarker = (u: unknown): u is ImportMarker => {
  if (typeof u !== "object" || u === null) return false
  const m = u as Record<string, unknown>
  const int = (v: unknown) => typeof v === "number" && Number.isSafeInteger(v) && v >= 0
  return m["version"] === 1 && int(m["offset"]) && int(m["length"]) && int(m["chunkBytes"]) &&
    (m["chunkBytes"] as number) > 0 && Array.isArray(m["chunks"]) &&
    (m["chunks"] as Array<unknown>).every((c) => typeof c === "string") &&
    (m["chunks"] as Array<unknown>).length === Math.ceil((m["length"] as number) / (m["chunkBytes"] as number))
}

/**
 * The marker, when there is one that parses; a malformed marker proves nothing (`None`). Anything but a regular file
 * at its name (a folder, a FIFO, a device) is `StoreReadFailed`, found before any open.
 *
 * @since 0.1.0
 * @category layers
 */
export const readMarker = (
  fs: FileSystem.FileSystem,
  paths: JsonlPaths
): Effect.Effect<Option.Option<ImportMarker>, StoreReadFailed> => {
  const path = markerPath(paths)
  const failed = (error: PlatformError) =>
    new StoreReadFailed({ path, cause: error.message, message: `could not read ${path}: ${error.message}` })
  return fs.stat(path).pipe(
    Effect.map(Option.some),
    Effect.catchIf(notFound, () => Effect.succeed(Option.none())),
    Effect.mapError(failed),
    Effect.flatMap((info) => {
      if (Option.isNone(info)) return Effect.succeed(Option.none())
      if (info.value.type !== "File") {
        return Effect.fail(
          new StoreReadFailed({
            path,
            cause: `not a regular file (${info.value.type})`,
            message: `${path} is not a regular file (${info.value.type}); it should be the interrupted-import marker ` +
              "or absent: move it out of the workspace"
          })
        )
      }
      return fs.readFileString(path).pipe(
        Effect.mapError(failed),
        Effect.map((text) => {
          try {
            const streamed = parseStreamMarker(text)
            if (streamed !== undefined) return isMarker(streamed) ? Option.some(streamed) : Option.none()
            const value: unknown = JSON.parse(text)
            return isMarker(value) ? Option.some(value) : Option.none()
          } catch {
            return Option.none()
          }
        })
      )
    })
  )
}

/**
 * Whether `marker` proves `tail` to be the unacknowledged part of its import's write (see the top of this file):
 * the bytes from the marker's offset to the end of the tail lie within the write, and each of their whole chunks
 * hashes as recorded. (The complete groups of the write before the tail stay: they read as committed, and the
 * next import skips them as stored.)
 *
 * @since 0.1.0
 * @category layers
 */
export const provesTail = (
  fs: FileSystem.FileSystem,
  paths: JsonlPaths,
  marker: ImportMarker,
  tail: TornTail
): Effect.Effect<boolean, PlatformError> => {
  const written = tail.offset + tail.length - marker.offset
  if (tail.length === 0 || tail.offset < marker.offset || written > marker.length) return Effect.succeed(false)
  const whole = Math.floor(written / marker.chunkBytes)
  if (whole === 0) return Effect.succeed(true)
  return Effect.suspend(() => {
    let index = 0
    let filled = 0
    let hash = createHash("sha256")
    let proven = true
    return fs.stream(paths.ledger, { offset: marker.offset, bytesToRead: whole * marker.chunkBytes }).pipe(
      Stream.runForEach((bytes) =>
        Effect.sync(() => {
          let at = 0
          while (at < bytes.length && proven) {
            const take = Math.min(bytes.length - at, marker.chunkBytes - filled)
            hash.update(bytes.subarray(at, at + take))
            filled += take
            at += take
            if (filled === marker.chunkBytes) {
              if (`sha256:${hash.digest("hex")}` !== marker.chunks[index]) proven = false
              index++
              filled = 0
              hash = createHash("sha256")
            }
          }
        })
      ),
      Effect.map(() => proven && index === whole)
    )
  })
}
