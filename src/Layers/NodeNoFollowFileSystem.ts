// NoFollowFileSystem on Node: lstat, open with O_NOFOLLOW | O_NONBLOCK (FileSystem has no flag for it), and walks
// confined under a root (internal/confinedPaths). The one place the tools use node:fs.
import * as PlatformError from "@effect/platform/Error"
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import { NoFollowFileSystem, type NoFollowFileSystemShape } from "../Services/NoFollowFileSystem.js"
import * as Confined from "./internal/confinedPaths.js"

// The reasons NodeFileSystem gives the same error codes.
const reasonOf = (code: unknown): PlatformError.SystemErrorReason => {
  switch (code) {
    case "ENOENT":
      return "NotFound"
    case "EACCES":
    case "EPERM":
      return "PermissionDenied"
    case "EEXIST":
      return "AlreadyExists"
    case "EISDIR":
    case "ENOTDIR":
    case "ELOOP":
      return "BadResource"
    case "EBUSY":
      return "Busy"
    case "EAGAIN":
      return "WouldBlock"
    default:
      return "Unknown"
  }
}

const systemError = (method: string, path: string, cause: unknown): PlatformError.PlatformError => {
  const error = cause as NodeJS.ErrnoException
  return new PlatformError.SystemError({
    reason: reasonOf(error?.code),
    module: "FileSystem",
    method,
    pathOrDescriptor: path,
    syscall: error?.syscall,
    description: error?.message,
    cause
  })
}

// The kind of a stats record, as the confined walk names it (one definition: confinedPaths.kindOf).
const typeOf = (stats: fs.Stats): FileSystem.File.Type => Confined.kindOf(stats)

// Synchronous system calls: each is a few microseconds of CPU on a local file, where the promise API costs tens
// (a thread-pool hop and a promise per call), and `reconcile` makes five to seven of them per operation.
const attempt = <A>(method: string, path: string, f: () => A): Effect.Effect<A, PlatformError.PlatformError> =>
  Effect.suspend(() => {
    try {
      return Effect.succeed(f())
    } catch (cause) {
      return Effect.fail(systemError(method, path, cause))
    }
  })

const READ_CHUNK = 64 * 1024

// Reads the whole file behind `fd` (its size from fstat is a hint: the file may grow or shrink while it is read).
const readAll = (fd: number, size: number): Uint8Array => {
  let buffer = Buffer.allocUnsafe(Math.max(size + 1, 1))
  let length = 0
  for (;;) {
    if (length === buffer.length) {
      const bigger = Buffer.allocUnsafe(buffer.length * 2 + READ_CHUNK)
      buffer.copy(bigger, 0, 0, length)
      buffer = bigger
    }
    const n = fs.readSync(fd, buffer, length, buffer.length - length, null)
    if (n === 0) break
    length += n
  }
  return new Uint8Array(buffer.buffer, buffer.byteOffset, length)
}

/**
 * Builds the Node implementation.
 *
 * @since 0.1.0
 * @category layers
 */
export const make: NoFollowFileSystemShape = {
  realPath: (path) => attempt("realPath", path, () => fs.realpathSync.native(path)),
  entry: (path) =>
    attempt("lstat", path, () => {
      const stats = fs.lstatSync(path, { throwIfNoEntry: false })
      return stats === undefined
        ? { _tag: "Absent" as const }
        : { _tag: "Present" as const, type: typeOf(stats), mode: stats.mode & 0o7777 }
    }),
  readRegular: (path) =>
    attempt("readRegular", path, () => {
      const stats = fs.lstatSync(path, { throwIfNoEntry: false })
      if (stats === undefined) return { _tag: "Absent" as const }
      if (!stats.isFile()) return { _tag: "NotRegular" as const, type: typeOf(stats) }
      let fd: number
      try {
        fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK)
      } catch (cause) {
        const code = (cause as NodeJS.ErrnoException).code
        // Changed since the lstat: gone, or a link swapped in (O_NOFOLLOW refuses it with ELOOP).
        if (code === "ENOENT") return { _tag: "Absent" as const }
        if (code === "ELOOP") return { _tag: "NotRegular" as const, type: "SymbolicLink" as const }
        throw cause
      }
      try {
        const opened = fs.fstatSync(fd)
        if (!opened.isFile()) return { _tag: "NotRegular" as const, type: typeOf(opened) }
        return { _tag: "Regular" as const, bytes: readAll(fd, opened.size), mode: opened.mode & 0o7777 }
      } finally {
        fs.closeSync(fd)
      }
    }),
  readUnder: (root, path) => attempt("readUnder", `${root}/${path}`, () => Confined.readUnder(root, path, readAll)),
  removeUnder: (root, path) => attempt("removeUnder", `${root}/${path}`, () => Confined.removeUnder(root, path))
}

/**
 * The Node layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<NoFollowFileSystem> = Layer.succeed(NoFollowFileSystem, make)
