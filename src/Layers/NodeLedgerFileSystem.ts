// Node's FileSystem for ledgers: NodeFileSystem, except that an opened file's reads, writes, truncate and fsync are
// synchronous system calls (as better-sqlite3's are), so a JSONL append is one write and one fsync with no thread-pool trips.
import * as Error from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as fs from "node:fs"

// The reasons NodeFileSystem gives the same error codes (so callers that match on them see no difference).
const reasonOf = (code: unknown): Error.SystemErrorReason => {
  switch (code) {
    case "ENOENT":
      return "NotFound"
    case "EACCES":
      return "PermissionDenied"
    case "EEXIST":
      return "AlreadyExists"
    case "EISDIR":
    case "ENOTDIR":
    case "ELOOP":
      return "BadResource"
    case "EBUSY":
      return "Busy"
    case "WriteZero":
      return "WriteZero"
    default:
      return "Unknown"
  }
}

// A system call on the descriptor; what it throws becomes the SystemError NodeFileSystem would report.
const call = <A>(method: string, fd: FileSystem.File.Descriptor, f: () => A): Effect.Effect<A, Error.PlatformError> =>
  Effect.suspend(() => {
    try {
      return Effect.succeed(f())
    } catch (cause) {
      const error = cause as NodeJS.ErrnoException
      return Effect.fail(
        new Error.SystemError({
          reason: reasonOf(error?.code),
          module: "FileSystem",
          method,
          pathOrDescriptor: fd,
          ...(error?.syscall !== undefined ? { syscall: error.syscall } : {}),
          description: error?.message ?? String(cause),
          cause
        })
      )
    }
  })

// The file over an open descriptor (NodeFileSystem keeps owning it and closes it with the scope).
const syncFile = (base: FileSystem.File, append: boolean): FileSystem.File => {
  const fd = base.fd
  let position = 0
  const writeAt = (buffer: Uint8Array, offset: number) =>
    fs.writeSync(fd, buffer, offset, buffer.length - offset, append ? null : position)
  return {
    [FileSystem.FileTypeId]: FileSystem.FileTypeId,
    fd,
    stat: base.stat,
    seek: (offset, from) =>
      Effect.sync(() => {
        position = from === "start" ? Number(offset) : position + Number(offset)
      }),
    sync: call("sync", fd, () => fs.fsyncSync(fd)),
    read: (buffer) =>
      call("read", fd, () => {
        const n = fs.readSync(fd, buffer, 0, buffer.length, position)
        position += n
        return FileSystem.Size(n)
      }),
    readAlloc: (size) =>
      call("readAlloc", fd, () => {
        const buffer = Buffer.allocUnsafeSlow(Number(size))
        const n = fs.readSync(fd, buffer, 0, buffer.length, position)
        position += n
        return n === 0 ? Option.none() : Option.some(n === buffer.length ? buffer : Uint8Array.prototype.slice.call(buffer, 0, n))
      }),
    truncate: (length) =>
      call("truncate", fd, () => {
        const to = Number(length ?? 0)
        fs.ftruncateSync(fd, to)
        if (!append && position > to) position = to
      }),
    write: (buffer) =>
      call("write", fd, () => {
        const n = writeAt(buffer, 0)
        if (!append) position += n
        return FileSystem.Size(n)
      }),
    writeAll: (buffer) =>
      call("writeAll", fd, () => {
        let done = 0
        while (done < buffer.length) {
          const n = writeAt(buffer, done)
          if (n === 0) throw Object.assign(new globalThis.Error("write returned 0 bytes written"), { code: "WriteZero" })
          done += n
          if (!append) position += n
        }
      })
  }
}

/** Wraps a FileSystem so the files it opens do synchronous reads, writes, truncate and fsync on their descriptor. */
export const make = (base: FileSystem.FileSystem): FileSystem.FileSystem => ({
  ...base,
  open: (path, options) => Effect.map(base.open(path, options), (file) => syncFile(file, options?.flag?.startsWith("a") ?? false))
})

/**
 * Node's FileSystem with synchronous file I/O: use it for the JSONL store on Node. An append then blocks the event
 * loop for its write and fsync, as an SQLite commit through better-sqlite3 does, instead of two thread-pool trips.
 */
export const layer: Layer.Layer<FileSystem.FileSystem> = Layer.effect(
  FileSystem.FileSystem,
  Effect.map(FileSystem.FileSystem, make)
).pipe(Layer.provide(NodeFileSystem.layer))
