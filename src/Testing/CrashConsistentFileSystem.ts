// A test FileSystem that simulates power loss: an in-memory disk that keeps, per file, what was fsynced and what
// was only written, per directory, which entries were fsynced, and can cut the power at any operation.
import * as PlatformError from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as NodePath from "node:path"
import {
  applyNameOp,
  contentOf,
  crashPages,
  crashPrefix,
  dirsOf,
  DiskCheckpoint,
  durableOf,
  PAGE_SIZE,
  pathsOfOp,
  pickCount,
  sameBytes,
  seeded,
  setContent,
  truncateInode,
  writeInode
} from "./internal/crashDisk.js"
import type { Inode, InodeCopy, NameOp } from "./internal/crashDisk.js"

export { PAGE_SIZE } from "./internal/crashDisk.js"

/**
 * The defect every operation dies with once the power is cut (after the armed crash point).
 *
 * @since 0.1.0
 * @category errors
 */
export class PowerCut extends Data.TaggedError("PowerCut")<{
  /** The 0-based index of the operation that found the power cut. */
  readonly operation: number
  /** What it was, for example `File.sync /ws/runtime-events.jsonl`. */
  readonly what: string
}> {
  override get message(): string {
    return `power cut: operation ${this.operation} (${this.what}) did not run`
  }
}

/**
 * Whether a defect is the simulated power cut.
 *
 * @since 0.1.0
 * @category testing
 */
export const isPowerCut = (u: unknown): u is PowerCut => u instanceof PowerCut

/**
 * A random source in [0, 1), or a seed for the built-in deterministic one.
 *
 * @since 0.1.0
 * @category models
 */
export type Random = number | (() => number)

/**
 * How a crash treats what was not made durable.
 *
 * @since 0.1.0
 * @category models
 */
export interface CrashOptions {
  /**
   * Off (default): each file keeps its synced content plus a prefix of the bytes (and truncates) issued since its
   * last fsync, and the directory operations since the last directory fsync survive as a prefix, in order.
   * On: each unsynced page (4096 B) of a file persists or not on its own (a lost page reads as its synced bytes, or
   * NULs past the synced length), the file's length is anything between its synced and its current length, and the
   * unsynced directory operations survive as an arbitrary subset.
   */
  readonly reorderPages?: boolean
}

/**
 * What a crash did, for statistics: per file, how many unsynced bytes existed and whether any were lost.
 *
 * @since 0.1.0
 * @category models
 */
export interface CrashReport {
  /** Files (by path after the crash) whose unsynced changes were not all kept. */
  readonly filesTorn: ReadonlyArray<string>
  /** Paths whose unsynced directory entry (create, rename target, unlink) was undone. */
  readonly entriesLost: ReadonlyArray<string>
  /** Paths whose unsynced entry operations were kept. */
  readonly entriesKept: ReadonlyArray<string>
}

/**
 * One operation as counted by the crash-point counter.
 *
 * @since 0.1.0
 * @category models
 */
export interface OperationRecord {
  readonly index: number
  readonly what: string
}

/**
 * A durable/volatile view of one file, from `snapshot`.
 *
 * @since 0.1.0
 * @category models
 */
export interface FileSnapshot {
  /** What a reader sees now. */
  readonly volatile: Uint8Array
  /** What survives a crash for sure (the content at its last fsync). */
  readonly durable: Uint8Array
  /** Whether the entry itself is durable (its directory was fsynced after it was created or renamed). */
  readonly entryDurable: boolean
}

/**
 * A copy of a whole disk (contents, synced contents, the writes and entry operations not yet durable), from
 * `checkpoint`; `make({ from })` builds a disk in exactly that state, so one recorded workload yields a disk for
 * every one of its crash points without running it again. Opaque; immutable.
 *
 * @since 0.1.0
 * @category models
 */
export interface Checkpoint {
  readonly _tag: "Checkpoint"
  /** Whether anything is not durable yet (a crash may change something). */
  readonly volatile: boolean
  /** The disk's change counter when it was taken (see `changes`). */
  readonly changes: number
}

/**
 * The handle of a crash-consistent filesystem: its layer, its crash point and its crash.
 *
 * @since 0.1.0
 * @category models
 */
export interface CrashConsistentFileSystem {
  /** The FileSystem service over this disk. */
  readonly fileSystem: FileSystem.FileSystem
  /** The FileSystem service as a layer (every use shares this disk). */
  readonly layer: Layer.Layer<FileSystem.FileSystem>
  /** How many operations ran so far (the crash-point counter). */
  readonly operations: () => number
  /** The last operations run, oldest first (at most `traceLimit` of them). */
  readonly trace: () => ReadonlyArray<OperationRecord>
  /**
   * Arms the crash point: operations are counted from 0 since `make` (or the last `crash`); every operation whose
   * index is `>= k` dies with `PowerCut` instead of running. `undefined` disarms it.
   */
  readonly crashAfter: (k: number | undefined) => void
  /** The operation that met the power cut, once one did. */
  readonly cutAt: () => OperationRecord | undefined
  /**
   * Cuts the power: replaces the disk with a state a real disk may hold after the power loss (see `CrashOptions`),
   * resets the counter, disarms the crash point, and invalidates every open file (using one is a defect).
   */
  readonly crash: (random: Random, options?: CrashOptions) => CrashReport
  /** Every file with its volatile and durable content; directories listed apart. Counts no operation. */
  readonly snapshot: () => { readonly files: ReadonlyMap<string, FileSnapshot>; readonly directories: ReadonlyArray<string> }
  /** Whether `path` is a directory right now. Counts no operation. */
  readonly isDirectory: (path: string) => boolean
  /** A copy of the disk's whole state, for `make({ from })`. Counts no operation. */
  readonly checkpoint: () => Checkpoint
  /** How many times the disk's state changed (a write, truncate, fsync or entry operation); equal counts, same state. */
  readonly changes: () => number
}

/**
 * Options of `make`.
 *
 * @since 0.1.0
 * @category models
 */
export interface MakeOptions {
  /** Directories that exist, durably, from the start (with their parents); `/` always does. */
  readonly directories?: ReadonlyArray<string>
  /** How many operation records `trace` keeps; default 64. */
  readonly traceLimit?: number
  /** Start from this state instead of an empty disk (`directories` is then ignored). */
  readonly from?: Checkpoint
  /** Called before each counted operation runs (not once the power is cut), e.g. to take a `checkpoint`. */
  readonly onOperation?: (index: number, what: string) => void
}

// ---------------------------------------------------------------------------------------------------------------
// Errors

// Built without validation (the fields are ours) and without a stack trace (it would only show this module): both
// dominated the cost of a failed `stat` or `readLink`, which a store does on every open.
const systemError = (
  method: string,
  path: string,
  reason: PlatformError.SystemErrorReason,
  description: string
): PlatformError.PlatformError => {
  const limit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  try {
    return new PlatformError.SystemError({ module: "FileSystem", method, reason, description, pathOrDescriptor: path }, true)
  } finally {
    Error.stackTraceLimit = limit
  }
}

const dieNotImplemented = (method: string) => () => Effect.die(new Error(`FileSystem.${method} is not implemented in CrashConsistentFileSystem`))

// ---------------------------------------------------------------------------------------------------------------

/**
 * Builds a crash-consistent disk, empty but for `options.directories` or as `options.from` left it, and its FileSystem.
 *
 * @since 0.1.0
 * @category testing
 */
export const make = (options: MakeOptions = {}): CrashConsistentFileSystem => {
  const traceLimit = options.traceLimit ?? 64
  const onOperation = options.onOperation
  let changes = 0
  let nextIno = 1
  let nextFd = 3
  let generation = 0
  const inodes = new Map<number, Inode>()
  // The namespace a reader sees, the namespace as last made durable, and the unsynced operations between them.
  let names = new Map<string, number>()
  let durableNames = new Map<string, number>()
  let nameLog: Array<NameOp> = []

  let counter = 0
  let armed: number | undefined
  let cut: OperationRecord | undefined
  let records: Array<OperationRecord> = []

  const newInode = (kind: "file" | "dir", mode: number): Inode => {
    const inode: Inode = {
      ino: nextIno++,
      kind,
      mode,
      buffer: new Uint8Array(0),
      size: 0,
      durableSize: 0,
      durableCopy: undefined,
      ops: [],
      mtime: 0
    }
    inodes.set(inode.ino, inode)
    return inode
  }

  const from = options.from
  if (from !== undefined) {
    if (!(from instanceof DiskCheckpoint)) throw new Error("CrashConsistentFileSystem.make: `from` is not a checkpoint of this module")
    for (const c of from.inodes) {
      inodes.set(c.ino, {
        ino: c.ino,
        kind: c.kind,
        mode: c.mode,
        buffer: c.content.slice(),
        size: c.content.length,
        durableSize: c.durableSize,
        durableCopy: c.durableCopy,
        ops: c.ops.slice(),
        mtime: c.mtime
      })
    }
    names = new Map(from.names)
    durableNames = new Map(from.durableNames)
    nameLog = from.nameLog.slice()
    nextIno = from.nextIno
  }
  const root = from === undefined ? newInode("dir", 0o755) : undefined
  if (root !== undefined) {
    names.set("/", root.ino)
    durableNames.set("/", root.ino)
  }
  for (const dir of from === undefined ? options.directories ?? [] : []) {
    let path = "/"
    for (const part of NodePath.posix.resolve("/", dir).split("/").filter((s) => s.length > 0)) {
      path = NodePath.posix.join(path, part)
      if (!names.has(path)) {
        const inode = newInode("dir", 0o755)
        names.set(path, inode.ino)
        durableNames.set(path, inode.ino)
      }
    }
  }

  const norm = (path: string): string => NodePath.posix.resolve("/", path)

  // Counts one operation, or dies with the power cut.
  const step = (what: string): Effect.Effect<void> =>
    Effect.suspend(() => {
      const index = counter
      if (cut !== undefined || (armed !== undefined && index >= armed)) {
        const record = { index, what }
        cut ??= record
        return Effect.die(new PowerCut({ operation: index, what }))
      }
      onOperation?.(index, what)
      counter++
      records.push({ index, what })
      if (records.length > traceLimit) records.shift()
      return Effect.void
    })

  // Runs `f` as one counted operation; `f` may throw a PlatformError to fail.
  const op = <A>(what: string, f: () => A): Effect.Effect<A, PlatformError.PlatformError> =>
    Effect.zipRight(
      step(what),
      Effect.suspend(() => {
        try {
          return Effect.succeed(f())
        } catch (error) {
          if (PlatformError.isPlatformError(error)) return Effect.fail(error)
          return Effect.die(error)
        }
      })
    )

  const lookup = (method: string, path: string): Inode => {
    const ino = names.get(path)
    if (ino === undefined) throw systemError(method, path, "NotFound", "No such file or directory")
    return inodes.get(ino)!
  }

  const parentDir = (method: string, path: string): Inode => {
    const parent = names.get(NodePath.posix.dirname(path))
    if (parent === undefined) throw systemError(method, path, "NotFound", "No such file or directory (parent missing)")
    const inode = inodes.get(parent)!
    if (inode.kind !== "dir") throw systemError(method, path, "BadResource", "Not a directory (parent)")
    return inode
  }

  const link = (path: string, inode: Inode) => {
    changes++
    names.set(path, inode.ino)
    nameLog.push({ _tag: "Link", path, ino: inode.ino })
  }

  const unlink = (path: string, inode: Inode) => {
    changes++
    names.delete(path)
    nameLog.push({ _tag: "Unlink", path, ino: inode.ino })
  }

  // A directory fsync: the entry operations touching `dir` become durable, in order.
  const syncDirectory = (dir: string) => {
    changes++
    const rest: Array<NameOp> = []
    for (const o of nameLog) {
      if (dirsOf(o).includes(dir)) applyNameOp(durableNames, o)
      else rest.push(o)
    }
    nameLog = rest
  }

  const syncFile = (inode: Inode) => {
    changes++
    inode.durableSize = inode.size
    inode.durableCopy = undefined
    inode.ops = []
  }

  const fileWrite = (inode: Inode, offset: number, bytes: Uint8Array) => {
    changes++
    const copy = bytes.slice()
    writeInode(inode, offset, copy)
    inode.ops.push({ _tag: "Write", offset, bytes: copy })
  }

  const fileTruncate = (inode: Inode, length: number) => {
    changes++
    truncateInode(inode, length)
    inode.ops.push({ _tag: "Truncate", length })
  }

  const info = (inode: Inode): FileSystem.File.Info => ({
    type: inode.kind === "dir" ? "Directory" : "File",
    mtime: Option.some(new Date(inode.mtime)),
    atime: Option.some(new Date(inode.mtime)),
    birthtime: Option.some(new Date(inode.mtime)),
    dev: 1,
    ino: Option.some(inode.ino),
    mode: (inode.kind === "dir" ? 0o040000 : 0o100000) | inode.mode,
    nlink: Option.some(1),
    uid: Option.some(0),
    gid: Option.some(0),
    rdev: Option.some(0),
    size: FileSystem.Size(inode.kind === "dir" ? PAGE_SIZE : inode.size),
    blksize: Option.some(FileSystem.Size(PAGE_SIZE)),
    blocks: Option.some(Math.ceil(inode.size / 512))
  })

  const makeFile = (path: string, inode: Inode, readable: boolean, writable: boolean, append: boolean): FileSystem.File => {
    const fd = FileSystem.FileDescriptor(nextFd++)
    const born = generation
    let position = 0
    const live = (method: string) => {
      if (born !== generation) throw new Error(`File.${method} on ${path}: this file was opened before a simulated crash`)
    }
    const readInto = (method: string, buffer: Uint8Array): number => {
      live(method)
      if (!readable) throw systemError(method, path, "BadResource", "Bad file descriptor (not open for reading)")
      if (inode.kind === "dir") throw systemError(method, path, "BadResource", "Is a directory")
      const n = Math.max(0, Math.min(buffer.length, inode.size - position))
      buffer.set(inode.buffer.subarray(position, position + n), 0)
      position += n
      return n
    }
    const write = (method: string, buffer: Uint8Array): number => {
      live(method)
      if (!writable) throw systemError(method, path, "BadResource", "Bad file descriptor (not open for writing)")
      if (append) position = inode.size
      fileWrite(inode, position, buffer)
      position += buffer.length
      return buffer.length
    }
    return {
      [FileSystem.FileTypeId]: FileSystem.FileTypeId,
      fd,
      stat: op(`File.stat ${path}`, () => {
        live("stat")
        return info(inode)
      }),
      seek: (offset, from) =>
        step(`File.seek ${path}`).pipe(Effect.zipRight(Effect.sync(() => {
          live("seek")
          position = from === "start" ? Number(offset) : position + Number(offset)
        }))),
      sync: op(`File.sync ${path}`, () => {
        live("sync")
        if (inode.kind === "dir") syncDirectory(path)
        else syncFile(inode)
      }),
      read: (buffer) => op(`File.read ${path}`, () => FileSystem.Size(readInto("read", buffer))),
      readAlloc: (size) =>
        op(`File.readAlloc ${path}`, () => {
          const buffer = new Uint8Array(Number(size))
          const n = readInto("readAlloc", buffer)
          return n === 0 ? Option.none() : Option.some(n === buffer.length ? buffer : buffer.slice(0, n))
        }),
      truncate: (length) =>
        op(`File.truncate ${path}`, () => {
          live("truncate")
          if (!writable) throw systemError("truncate", path, "BadResource", "Bad file descriptor (not open for writing)")
          const n = Number(length ?? 0)
          fileTruncate(inode, n)
          if (!append && position > n) position = n
        }),
      write: (buffer) => op(`File.write ${path}`, () => FileSystem.Size(write("write", buffer))),
      writeAll: (buffer) => op(`File.writeAll ${path}`, () => void write("writeAll", buffer))
    }
  }

  const open = (path0: string, options?: FileSystem.OpenFileOptions) =>
    Effect.acquireRelease(
      op(`open ${path0} ${options?.flag ?? "r"}`, () => {
        const path = norm(path0)
        const flag = options?.flag ?? "r"
        const exclusive = flag.includes("x")
        const create = flag.startsWith("w") || flag.startsWith("a")
        const readable = flag.startsWith("r") || flag.includes("+")
        const writable = flag !== "r"
        const append = flag.startsWith("a")
        let inode: Inode
        const ino = names.get(path)
        if (ino !== undefined) {
          if (exclusive) throw systemError("open", path, "AlreadyExists", "File exists")
          inode = inodes.get(ino)!
          if (inode.kind === "dir" && writable) throw systemError("open", path, "BadResource", "Is a directory")
          if (flag.startsWith("w")) fileTruncate(inode, 0)
        } else {
          if (!create) throw systemError("open", path, "NotFound", "No such file or directory")
          parentDir("open", path)
          inode = newInode("file", options?.mode ?? 0o666)
          link(path, inode)
        }
        return makeFile(path, inode, readable, writable, append)
      }),
      () => Effect.void
    )

  const makeDirectory = (path0: string, options?: FileSystem.MakeDirectoryOptions) =>
    op(`makeDirectory ${path0}`, () => {
      const path = norm(path0)
      const mode = options?.mode ?? 0o777
      if (names.has(path)) {
        if (options?.recursive === true && inodes.get(names.get(path)!)!.kind === "dir") return
        throw systemError("makeDirectory", path, "AlreadyExists", "File exists")
      }
      if (options?.recursive === true) {
        let at = "/"
        for (const part of path.split("/").filter((s) => s.length > 0)) {
          at = NodePath.posix.join(at, part)
          const ino = names.get(at)
          if (ino === undefined) link(at, newInode("dir", mode))
          else if (inodes.get(ino)!.kind !== "dir") throw systemError("makeDirectory", at, "BadResource", "Not a directory")
        }
        return
      }
      parentDir("makeDirectory", path)
      link(path, newInode("dir", mode))
    })

  const childrenOf = (dir: string): Array<string> => {
    const out: Array<string> = []
    for (const p of names.keys()) if (p !== dir && NodePath.posix.dirname(p) === dir) out.push(p)
    return out
  }

  const remove = (path0: string, options?: FileSystem.RemoveOptions) =>
    op(`remove ${path0}`, () => {
      const path = norm(path0)
      const ino = names.get(path)
      if (ino === undefined) {
        if (options?.force === true) return
        throw systemError("remove", path, "NotFound", "No such file or directory")
      }
      const removeTree = (p: string) => {
        const inode = inodes.get(names.get(p)!)!
        if (inode.kind === "dir") {
          const kids = childrenOf(p)
          if (kids.length > 0 && options?.recursive !== true) {
            throw systemError("remove", p, "BadResource", "Directory not empty")
          }
          for (const k of kids) removeTree(k)
        }
        unlink(p, inode)
      }
      removeTree(path)
    })

  const rename = (from0: string, to0: string) =>
    op(`rename ${from0} ${to0}`, () => {
      const from = norm(from0)
      const to = norm(to0)
      const inode = lookup("rename", from)
      if (inode.kind === "dir") throw new Error("rename of a directory is not implemented in CrashConsistentFileSystem")
      parentDir("rename", to)
      changes++
      names.delete(from)
      names.set(to, inode.ino)
      nameLog.push({ _tag: "Rename", from, to, ino: inode.ino })
    })

  const fileSystem = FileSystem.make({
    access: (path) => op(`access ${path}`, () => void lookup("access", norm(path))),
    copy: dieNotImplemented("copy"),
    copyFile: dieNotImplemented("copyFile"),
    chmod: (path, mode) =>
      op(`chmod ${path}`, () => {
        lookup("chmod", norm(path)).mode = mode
        changes++
      }),
    chown: dieNotImplemented("chown"),
    // A hard link: a second name for the same file (WorkspaceIdentity publishes its marker this way); directories refused.
    link: (from0, to0) =>
      op(`link ${from0} ${to0}`, () => {
        const from = norm(from0)
        const to = norm(to0)
        const inode = lookup("link", from)
        if (inode.kind === "dir") throw systemError("link", from, "PermissionDenied", "Operation not permitted (a directory)")
        if (names.has(to)) throw systemError("link", to, "AlreadyExists", "File exists")
        parentDir("link", to)
        link(to, inode)
      }),
    makeDirectory,
    makeTempDirectory: dieNotImplemented("makeTempDirectory"),
    makeTempDirectoryScoped: dieNotImplemented("makeTempDirectoryScoped"),
    makeTempFile: dieNotImplemented("makeTempFile"),
    makeTempFileScoped: dieNotImplemented("makeTempFileScoped"),
    open,
    readDirectory: (path) =>
      op(`readDirectory ${path}`, () => {
        const dir = norm(path)
        if (lookup("readDirectory", dir).kind !== "dir") throw systemError("readDirectory", dir, "BadResource", "Not a directory")
        return childrenOf(dir).map((p) => NodePath.posix.basename(p)).sort()
      }),
    readFile: (path) =>
      op(`readFile ${path}`, () => {
        const inode = lookup("readFile", norm(path))
        if (inode.kind === "dir") throw systemError("readFile", path, "BadResource", "Is a directory")
        return contentOf(inode).slice()
      }),
    readLink: (path) => Effect.fail(systemError("readLink", path, "InvalidData", "Not a symbolic link")),
    realPath: (path) =>
      op(`realPath ${path}`, () => {
        lookup("realPath", norm(path))
        return norm(path)
      }),
    remove,
    rename,
    stat: (path) => op(`stat ${path}`, () => info(lookup("stat", norm(path)))),
    symlink: dieNotImplemented("symlink"),
    truncate: (path, length) =>
      op(`truncate ${path}`, () => {
        const inode = lookup("truncate", norm(path))
        if (inode.kind === "dir") throw systemError("truncate", path, "BadResource", "Is a directory")
        fileTruncate(inode, Number(length ?? 0))
      }),
    utimes: dieNotImplemented("utimes"),
    watch: () => Stream.die(new Error("FileSystem.watch is not implemented in CrashConsistentFileSystem")),
    writeFile: (path0, data, options) =>
      op(`writeFile ${path0}`, () => {
        const path = norm(path0)
        const flag = options?.flag ?? "w"
        const ino = names.get(path)
        let inode: Inode
        if (ino === undefined) {
          parentDir("writeFile", path)
          inode = newInode("file", options?.mode ?? 0o666)
          link(path, inode)
        } else {
          if (flag.includes("x")) throw systemError("writeFile", path, "AlreadyExists", "File exists")
          inode = inodes.get(ino)!
          if (inode.kind === "dir") throw systemError("writeFile", path, "BadResource", "Is a directory")
        }
        if (flag.startsWith("a")) fileWrite(inode, inode.size, data)
        else {
          fileTruncate(inode, 0)
          fileWrite(inode, 0, data)
        }
      })
  })

  const crash = (random: Random, crashOptions: CrashOptions = {}): CrashReport => {
    const rng = typeof random === "number" ? seeded(random) : random
    const reorder = crashOptions.reorderPages === true
    changes++
    // The namespace: the durable one plus a prefix (or, reordering, a subset) of the unsynced entry operations.
    const survivors = new Map(durableNames)
    const keepCount = pickCount(rng, nameLog.length)
    const entriesLost: Array<string> = []
    const entriesKept: Array<string> = []
    nameLog.forEach((o, i) => {
      const keep = reorder ? rng() < 0.5 : i < keepCount
      if (keep && applyNameOp(survivors, o)) entriesKept.push(...pathsOfOp(o))
      else entriesLost.push(...pathsOfOp(o))
    })
    // An entry whose parent directory did not survive is gone with it.
    const sorted = [...survivors.keys()].sort((a, b) => a.split("/").length - b.split("/").length)
    for (const p of sorted) {
      if (p === "/") continue
      const parent = survivors.get(NodePath.posix.dirname(p))
      if (parent === undefined || inodes.get(parent)?.kind !== "dir") {
        survivors.delete(p)
        entriesLost.push(p)
      }
    }
    // File contents: synced bytes plus what the model keeps of the rest.
    const filesTorn: Array<string> = []
    const alive = new Set(survivors.values())
    for (const [path, ino] of survivors) {
      const inode = inodes.get(ino)!
      if (inode.kind !== "file" || inode.ops.length === 0) continue
      const after = reorder ? crashPages(inode, rng) : crashPrefix(inode, rng)
      if (!sameBytes(after, contentOf(inode))) filesTorn.push(path)
      setContent(inode, after)
    }
    for (const ino of [...inodes.keys()]) if (!alive.has(ino)) inodes.delete(ino)
    for (const inode of inodes.values()) syncFile(inode)
    names = survivors
    durableNames = new Map(survivors)
    nameLog = []
    generation++
    counter = 0
    armed = undefined
    cut = undefined
    records = []
    return { filesTorn, entriesLost, entriesKept }
  }

  const snapshot = () => {
    const files = new Map<string, FileSnapshot>()
    const directories: Array<string> = []
    for (const [path, ino] of names) {
      const inode = inodes.get(ino)!
      if (inode.kind === "dir") directories.push(path)
      else {
        files.set(path, {
          volatile: contentOf(inode).slice(),
          durable: durableOf(inode).slice(),
          entryDurable: durableNames.get(path) === ino && !nameLog.some((o) => pathsOfOp(o).includes(path))
        })
      }
    }
    return { files, directories: directories.sort() }
  }

  const checkpoint = (): Checkpoint => {
    const copies: Array<InodeCopy> = []
    let volatile = nameLog.length > 0
    for (const inode of inodes.values()) {
      if (inode.ops.length > 0) volatile = true
      const content = contentOf(inode).slice()
      copies.push({
        ino: inode.ino,
        kind: inode.kind,
        mode: inode.mode,
        content,
        // The synced content is a prefix of the content unless it has a copy of its own (never changed later).
        durableSize: inode.durableSize,
        durableCopy: inode.durableCopy,
        ops: inode.ops.slice(),
        mtime: inode.mtime
      })
    }
    return new DiskCheckpoint(volatile, changes, copies, [...names], [...durableNames], nameLog.slice(), nextIno)
  }

  return {
    fileSystem,
    layer: Layer.succeed(FileSystem.FileSystem, fileSystem),
    operations: () => counter,
    trace: () => records.slice(),
    crashAfter: (k) => {
      armed = k
    },
    cutAt: () => cut,
    crash,
    snapshot,
    isDirectory: (path) => {
      const ino = names.get(norm(path))
      return ino !== undefined && inodes.get(ino)!.kind === "dir"
    },
    checkpoint,
    changes: () => changes
  }
}
