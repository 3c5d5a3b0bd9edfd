// NoFollowFileSystem on Node: lstat, and open with O_NOFOLLOW | O_NONBLOCK, which @effect/platform's FileSystem has no
// flag for (its `stat` follows links and its `open` takes only string flags). The one place the tools use node:fs.
import * as PlatformError from "@effect/platform/Error"
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import { NoFollowFileSystem, type NoFollowFileSystemShape } from "../Services/NoFollowFileSystem.js"

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

const typeOf = (stats: fs.Stats): FileSystem.File.Type =>
  stats.isFile()
    ? "File"
    : stats.isDirectory()
    ? "Directory"
    : stats.isSymbolicLink()
    ? "SymbolicLink"
    : stats.isFIFO()
    ? "FIFO"
    : stats.isSocket()
    ? "Socket"
    : stats.isBlockDevice()
    ? "BlockDevice"
    : stats.isCharacterDevice()
    ? "CharacterDevice"
    : "Unknown"

const lstat = (path: string) =>
  Effect.tryPromise({ try: () => fs.promises.lstat(path), catch: (cause) => cause as NodeJS.ErrnoException })

/** Builds the Node implementation. */
export const make: NoFollowFileSystemShape = {
  realPath: (path) =>
    Effect.tryPromise({ try: () => fs.promises.realpath(path), catch: (cause) => systemError("realPath", path, cause) }),
  entry: (path) =>
    lstat(path).pipe(
      Effect.map((stats) => ({ _tag: "Present" as const, type: typeOf(stats), mode: stats.mode & 0o7777 })),
      Effect.catchAll((cause) =>
        cause?.code === "ENOENT" ? Effect.succeed({ _tag: "Absent" as const }) : Effect.fail(systemError("lstat", path, cause))
      )
    ),
  readRegular: (path) =>
    Effect.tryPromise({
      try: async () => {
        let stats: fs.Stats
        try {
          stats = await fs.promises.lstat(path)
        } catch (cause) {
          if ((cause as NodeJS.ErrnoException).code === "ENOENT") return { _tag: "Absent" as const }
          throw cause
        }
        if (!stats.isFile()) return { _tag: "NotRegular" as const, type: typeOf(stats) }
        let handle: fs.promises.FileHandle
        try {
          handle = await fs.promises.open(path, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK)
        } catch (cause) {
          const code = (cause as NodeJS.ErrnoException).code
          // Changed since the lstat: gone, or a link swapped in (O_NOFOLLOW refuses it with ELOOP).
          if (code === "ENOENT") return { _tag: "Absent" as const }
          if (code === "ELOOP") return { _tag: "NotRegular" as const, type: "SymbolicLink" as const }
          throw cause
        }
        try {
          const opened = await handle.stat()
          if (!opened.isFile()) return { _tag: "NotRegular" as const, type: typeOf(opened) }
          const bytes = new Uint8Array(await handle.readFile())
          return { _tag: "Regular" as const, bytes, mode: opened.mode & 0o7777 }
        } finally {
          await handle.close()
        }
      },
      catch: (cause) => systemError("readRegular", path, cause)
    })
}

/** The Node layer. */
export const layer: Layer.Layer<NoFollowFileSystem> = Layer.succeed(NoFollowFileSystem, make)
