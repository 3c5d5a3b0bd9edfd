// Opening a path confined under a root on Node, never following a link (docs/spec/05-reconciliation.md, "Built-in file-write tool"): each
// component is opened from the folder before it by descriptor (openat through /proc/self/fd), with O_NOFOLLOW.
import * as fs from "node:fs"
import { absoluteRootProblem, relativePathProblem } from "../../Domain/FileWriteEvidence.js"

/**
 * A path kind as lstat names it (FileSystem's `File.Type`).
 *
 * @since 0.1.0
 * @category models
 */
export type Kind = "File" | "Directory" | "SymbolicLink" | "FIFO" | "Socket" | "BlockDevice" | "CharacterDevice" | "Unknown"

/**
 * Why a walk stopped before the target (see `NoFollowFileSystem.Confinement`).
 *
 * @since 0.1.0
 * @category models
 */
export type Stop =
  | { readonly _tag: "RootMissing" }
  | { readonly _tag: "RootNotFolder"; readonly type: Kind }
  | { readonly _tag: "FolderMissing"; readonly folder: string }
  | { readonly _tag: "FolderNotFolder"; readonly folder: string; readonly type: Kind }

/**
 * The kind of a stats record.
 *
 * @since 0.1.0
 * @category layers
 */
export const kindOf = (stats: fs.Stats): Kind =>
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

const { O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK, O_RDONLY } = fs.constants
const O_CLOEXEC = (fs.constants as Record<string, number>)["O_CLOEXEC"] ?? 0
/** Flags to open a folder of the walk: read-only, a folder only, never through a link. */
const DIR_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
/**
 * Flags to open the target: read-only, never through a link, never blocking on a FIFO.
 *
 * @since 0.1.0
 * @category constants
 */
export const FILE_FLAGS = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC

const PROC_FD = "/proc/self/fd"
let procUsable: boolean | undefined
// Whether /proc/self/fd resolves a folder descriptor (Linux): `${PROC_FD}/<fd>/<name>` is then openat(fd, name).
const useProc = (): boolean => {
  if (procUsable === undefined) {
    let fd = -1
    try {
      fd = fs.openSync("/", DIR_FLAGS)
      procUsable = fs.statSync(`${PROC_FD}/${fd}/.`).isDirectory()
    } catch {
      procUsable = false
    } finally {
      if (fd >= 0) fs.closeSync(fd)
    }
  }
  return procUsable
}

/** Fails (throws, code `EINVAL`) unless `root` is a normal absolute path and `path` a normal relative one. */
const requireNormal = (root: string, path: string): void => {
  const problem = absoluteRootProblem(root) ?? relativePathProblem(path)
  if (problem !== undefined) {
    throw Object.assign(new Error(`refusing ${JSON.stringify(path)} under ${JSON.stringify(root)}: ${problem}`), {
      code: "EINVAL",
      path
    })
  }
}

/**
 * The folder a walk reached, held open: `child(name)` names an entry of it for open/lstat/unlink (the last component
 * never followed by unlink or lstat, and opened with O_NOFOLLOW by callers), and `stillThere()` says whether the folder
 * is still the one walked (always true when held by descriptor; re-checked by dev/ino on the path fallback).
 *
 * @since 0.1.0
 * @category models
 */
export interface Folder {
  readonly child: (name: string) => string
  readonly stillThere: () => boolean
}

const lstatKind = (path: string): Kind | undefined => {
  const stats = fs.lstatSync(path, { throwIfNoEntry: false })
  return stats === undefined ? undefined : kindOf(stats)
}

/**
 * Walks `root` (absolute) and then `folders` (components under it), every component opened from the folder before it
 * without following a link, and runs `f` on the folder reached; the descriptors are closed afterwards. Where
 * /proc/self/fd is missing (not Linux), each prefix is lstat'ed (never a link, always a folder), remembered by dev/ino,
 * and checked again by `stillThere`, the equivalent check on the opened handle.
 *
 * @since 0.1.0
 * @category layers
 */
export const withFolder = <A>(root: string, folders: ReadonlyArray<string>, f: (folder: Folder) => A): A | Stop => {
  const rootParts = root.split("/").filter((p) => p !== "")
  const all = [...rootParts, ...folders]
  const stopAt = (i: number, type: Kind | undefined): Stop => {
    const isRoot = i < rootParts.length
    const folder = folders.slice(0, i - rootParts.length + 1).join("/")
    if (type === undefined) return isRoot ? { _tag: "RootMissing" } : { _tag: "FolderMissing", folder }
    return isRoot ? { _tag: "RootNotFolder", type } : { _tag: "FolderNotFolder", folder, type }
  }
  if (useProc()) {
    let fd = fs.openSync("/", DIR_FLAGS)
    try {
      for (let i = 0; i < all.length; i++) {
        const entry = `${PROC_FD}/${fd}/${all[i]}`
        let next: number
        try {
          next = fs.openSync(entry, DIR_FLAGS)
        } catch (error) {
          const code = (error as NodeJS.ErrnoException)?.code
          if (code === "ENOENT") return stopAt(i, undefined)
          // O_DIRECTORY | O_NOFOLLOW on a link or a file: ENOTDIR (or ELOOP); lstat says which.
          if (code === "ENOTDIR" || code === "ELOOP") return stopAt(i, lstatKind(entry) ?? "Unknown")
          throw error
        }
        fs.closeSync(fd)
        fd = next
      }
      const held = fd
      return f({ child: (name) => `${PROC_FD}/${held}/${name}`, stillThere: () => true })
    } finally {
      fs.closeSync(fd)
    }
  }
  // Fallback: lstat every prefix (a link or a non-folder stops the walk), then check it again after `f`'s access.
  const seen: Array<{ readonly path: string; readonly dev: number; readonly ino: number }> = []
  let path = ""
  for (let i = 0; i < all.length; i++) {
    path = `${path}/${all[i]}`
    const stats = fs.lstatSync(path, { throwIfNoEntry: false })
    if (stats === undefined) return stopAt(i, undefined)
    if (!stats.isDirectory()) return stopAt(i, kindOf(stats))
    seen.push({ path, dev: stats.dev, ino: stats.ino })
  }
  const base = path === "" ? "" : path
  return f({
    child: (name) => `${base}/${name}`,
    stillThere: () =>
      seen.every((s) => {
        const now = fs.lstatSync(s.path, { throwIfNoEntry: false })
        return now !== undefined && now.isDirectory() && now.dev === s.dev && now.ino === s.ino
      })
  })
}

/**
 * What a confined read found (see `NoFollowFileSystem.ConfinedRead`).
 *
 * @since 0.1.0
 * @category models
 */
export type Read =
  | Stop
  | { readonly _tag: "Absent" }
  | { readonly _tag: "NotRegular"; readonly type: Kind }
  | { readonly _tag: "Regular"; readonly bytes: Uint8Array; readonly mode: number }

const splitPath = (path: string) => {
  const parts = path.split("/")
  return { folders: parts.slice(0, -1), name: parts[parts.length - 1]! }
}

// A folder swapped while the fallback read through it: reported as a link on the path, never the bytes read.
const SWAPPED = (folders: ReadonlyArray<string>): Stop =>
  folders.length === 0
    ? { _tag: "RootNotFolder", type: "SymbolicLink" }
    : { _tag: "FolderNotFolder", folder: folders.join("/"), type: "SymbolicLink" }

/**
 * Reads `path` under `root` without following a link anywhere; `readAll(fd, size)` reads an opened regular file.
 *
 * @since 0.1.0
 * @category layers
 */
export const readUnder = (root: string, path: string, readAll: (fd: number, size: number) => Uint8Array): Read => {
  requireNormal(root, path)
  const { folders, name } = splitPath(path)
  const result = withFolder(root, folders, (folder): Read => {
    let fd: number
    try {
      fd = fs.openSync(folder.child(name), FILE_FLAGS)
    } catch (error) {
      const code = (error as NodeJS.ErrnoException)?.code
      if (code === "ENOENT") return folder.stillThere() ? { _tag: "Absent" } : SWAPPED(folders)
      if (code === "ELOOP") return { _tag: "NotRegular", type: "SymbolicLink" }
      // A FIFO or socket that cannot be opened read-only without blocking: never read.
      if (code === "ENXIO" || code === "EOPNOTSUPP") return { _tag: "NotRegular", type: lstatKind(folder.child(name)) ?? "Unknown" }
      throw error
    }
    try {
      const opened = fs.fstatSync(fd)
      if (!opened.isFile()) return { _tag: "NotRegular", type: kindOf(opened) }
      const bytes = readAll(fd, opened.size)
      if (!folder.stillThere()) return SWAPPED(folders)
      return { _tag: "Regular", bytes, mode: opened.mode & 0o7777 }
    } finally {
      fs.closeSync(fd)
    }
  })
  return result
}

/**
 * What a confined removal did (see `NoFollowFileSystem.ConfinedRemove`).
 *
 * @since 0.1.0
 * @category models
 */
export type Remove = Stop | { readonly _tag: "Removed" } | { readonly _tag: "Absent" } | { readonly _tag: "NotRegular"; readonly type: Kind }

/**
 * Removes `path` under `root` when it is a regular file, unlinked in the folder the walk holds (never through a link).
 *
 * @since 0.1.0
 * @category layers
 */
export const removeUnder = (root: string, path: string): Remove => {
  requireNormal(root, path)
  const { folders, name } = splitPath(path)
  return withFolder(root, folders, (folder): Remove => {
    const entry = folder.child(name)
    const type = lstatKind(entry)
    if (type === undefined) return { _tag: "Absent" }
    if (type !== "File") return { _tag: "NotRegular", type }
    if (!folder.stillThere()) return SWAPPED(folders)
    try {
      fs.unlinkSync(entry)
    } catch (error) {
      if ((error as NodeJS.ErrnoException)?.code === "ENOENT") return { _tag: "Absent" }
      throw error
    }
    return { _tag: "Removed" }
  })
}
