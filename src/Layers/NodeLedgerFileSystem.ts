// Node's FileSystem for ledgers: NodeFileSystem, except that opening never follows a link to write, never blocks on a FIFO
// and lands only on a regular file (safeFiles), and an opened file's reads, writes, truncate and fsync are synchronous.
import * as Error from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import { openChecked, type OpenFlag } from "./internal/safeFiles.js"

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
    case "EFTYPE":
    case "ENXIO":
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

// What `fstat` says, as FileSystem's `File.Info`.
const infoOf = (s: fs.Stats): FileSystem.File.Info => ({
  type: s.isFile()
    ? "File"
    : s.isDirectory()
    ? "Directory"
    : s.isSymbolicLink()
    ? "SymbolicLink"
    : s.isBlockDevice()
    ? "BlockDevice"
    : s.isCharacterDevice()
    ? "CharacterDevice"
    : s.isFIFO()
    ? "FIFO"
    : s.isSocket()
    ? "Socket"
    : "Unknown",
  mtime: Option.fromNullable(s.mtime),
  atime: Option.fromNullable(s.atime),
  birthtime: Option.fromNullable(s.birthtime),
  dev: s.dev,
  ino: Option.fromNullable(s.ino),
  mode: s.mode,
  nlink: Option.fromNullable(s.nlink),
  uid: Option.fromNullable(s.uid),
  gid: Option.fromNullable(s.gid),
  rdev: Option.fromNullable(s.rdev),
  size: FileSystem.Size(s.size),
  blksize: Option.map(Option.fromNullable(s.blksize), FileSystem.Size),
  blocks: Option.fromNullable(s.blocks)
})

// A failure of a call on `path` as the SystemError NodeFileSystem would report.
const pathError = (method: string, path: string, cause: unknown): Error.SystemError => {
  const error = cause as NodeJS.ErrnoException
  return new Error.SystemError({
    reason: reasonOf(error?.code),
    module: "FileSystem",
    method,
    pathOrDescriptor: path,
    ...(error?.syscall !== undefined ? { syscall: error.syscall } : {}),
    description: error?.message ?? String(cause),
    cause
  })
}

// The file over an open descriptor (closed by the scope of the `open` that made it).
const syncFile = (fd: FileSystem.File.Descriptor, append: boolean): FileSystem.File => {
  let position = 0
  const writeAt = (buffer: Uint8Array, offset: number) =>
    fs.writeSync(fd, buffer, offset, buffer.length - offset, append ? null : position)
  return {
    [FileSystem.FileTypeId]: FileSystem.FileTypeId,
    fd,
    stat: call("stat", fd, () => infoOf(fs.fstatSync(fd))),
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

// Opens through `openChecked` (no link followed to write, no FIFO blocking, a regular file only), closed with the scope.
const openFile = (path: string, options?: FileSystem.OpenFileOptions) =>
  Effect.acquireRelease(
    Effect.suspend(() => {
      const flag: OpenFlag = options?.flag ?? "r"
      try {
        return Effect.succeed(syncFile(FileSystem.FileDescriptor(openChecked(path, flag, options?.mode ?? 0o666)), flag.startsWith("a")))
      } catch (cause) {
        return Effect.fail(pathError("open", path, cause))
      }
    }),
    (file) => Effect.sync(() => fs.closeSync(file.fd))
  )

// Reads a whole file through `openFile`.
const readFile = (path: string): Effect.Effect<Uint8Array, Error.PlatformError> =>
  Effect.scoped(Effect.flatMap(openFile(path, { flag: "r" }), (file) =>
    call("readFile", file.fd, () => fs.readFileSync(file.fd) as Uint8Array)))

// Writes a whole file through `openFile` (mode "w" unless told).
const writeFile = (
  path: string,
  data: Uint8Array,
  options?: FileSystem.WriteFileOptions
): Effect.Effect<void, Error.PlatformError> =>
  Effect.scoped(Effect.flatMap(
    openFile(path, { flag: options?.flag ?? "w", ...(options?.mode !== undefined ? { mode: options.mode } : {}) }),
    (file) => file.writeAll(data)
  ))

/**
 * Wraps a FileSystem so that `open` (and `readFile`, `writeFile`, `stream`, `sink` built on it) goes through the
 * project's checked open (safeFiles: a link is never followed to write, a FIFO never blocks, only a regular file or,
 * read-only, a folder is opened; anything else is a `SystemError` naming the path), and the files it opens do
 * synchronous reads, writes, truncate and fsync on their descriptor.
 *
 * @since 0.1.0
 * @category layers
 */
export const make = (base: FileSystem.FileSystem): FileSystem.FileSystem =>
  FileSystem.make({ ...base, open: openFile, readFile, writeFile })

/**
 * Node's FileSystem with synchronous file I/O: use it for the JSONL store on Node. An append then blocks the event
 * loop for its write and fsync, as an SQLite commit through better-sqlite3 does, instead of two thread-pool trips.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<FileSystem.FileSystem> = Layer.effect(
  FileSystem.FileSystem,
  Effect.map(FileSystem.FileSystem, make)
).pipe(Layer.provide(NodeFileSystem.layer))
