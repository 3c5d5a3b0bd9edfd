// The one way this project opens a file on Node: never through a link when it writes, never blocking on a FIFO, and
// only onto a regular file (or a folder, read-only); anything else is an error naming the path. Used by every writer.
import * as fs from "node:fs"

/**
 * What a path names, without following a link at its last component; `Missing` when nothing is there.
 *
 * @since 0.1.0
 * @category models
 */
export type PathKind = "File" | "Directory" | "SymbolicLink" | "FIFO" | "Socket" | "CharacterDevice" | "BlockDevice" | "Missing"

/**
 * The open modes the project uses (FileSystem's `OpenFlag`).
 *
 * @since 0.1.0
 * @category models
 */
export type OpenFlag = "r" | "r+" | "w" | "wx" | "w+" | "wx+" | "a" | "ax" | "a+" | "ax+"

const kindOfStats = (stats: fs.Stats): PathKind =>
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
    : stats.isCharacterDevice()
    ? "CharacterDevice"
    : "BlockDevice"

/**
 * What `path` names (`lstat`: a link is `SymbolicLink`); `Missing` when nothing; other failures are thrown.
 *
 * @since 0.1.0
 * @category layers
 */
export const kindOf = (path: string): PathKind => {
  // A missing path (the usual answer for the append lock's journal, checked before every JSONL write) is not an
  // exception built and caught: `throwIfNoEntry: false` answers ENOENT with `undefined`; any other failure throws.
  const stats = fs.lstatSync(path, { throwIfNoEntry: false })
  return stats === undefined ? "Missing" : kindOfStats(stats)
}

/**
 * A person's words for a path kind.
 *
 * @since 0.1.0
 * @category layers
 */
export const describeKind = (kind: PathKind): string =>
  kind === "SymbolicLink"
    ? "a symbolic link"
    : kind === "Directory"
    ? "a folder"
    : kind === "FIFO"
    ? "a FIFO (named pipe)"
    : kind === "Socket"
    ? "a socket"
    : kind === "CharacterDevice" || kind === "BlockDevice"
    ? "a device file"
    : kind === "Missing"
    ? "missing"
    : "a regular file"

/**
 * The error thrown for a path that is not what the project may open there (code `EFTYPE`, or `ELOOP` for a link).
 *
 * @since 0.1.0
 * @category layers
 */
export const wrongKind = (path: string, kind: PathKind, expected = "a regular file"): NodeJS.ErrnoException =>
  Object.assign(
    new Error(
      `${path} is ${describeKind(kind)}, not ${expected}: runtime-resume never writes through a link and never opens ` +
        "a special file in a workspace; move it away (or restore the real file) and run the command again"
    ),
    { code: kind === "SymbolicLink" ? "ELOOP" : "EFTYPE", path }
  )

const { O_APPEND, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_RDONLY, O_RDWR, O_TRUNC, O_WRONLY } = fs.constants
const O_CLOEXEC = (fs.constants as Record<string, number>)["O_CLOEXEC"] ?? 0

/**
 * The `open(2)` flags of a FileSystem open mode, plus: no following a link (any mode but `r`), no blocking, close-on-exec.
 *
 * @since 0.1.0
 * @category layers
 */
export const openFlags = (flag: OpenFlag): number => {
  const access: Record<OpenFlag, number> = {
    "r": O_RDONLY,
    "r+": O_RDWR,
    "w": O_WRONLY | O_CREAT | O_TRUNC,
    "wx": O_WRONLY | O_CREAT | O_TRUNC | O_EXCL,
    "w+": O_RDWR | O_CREAT | O_TRUNC,
    "wx+": O_RDWR | O_CREAT | O_TRUNC | O_EXCL,
    "a": O_WRONLY | O_CREAT | O_APPEND,
    "ax": O_WRONLY | O_CREAT | O_APPEND | O_EXCL,
    "a+": O_RDWR | O_CREAT | O_APPEND,
    "ax+": O_RDWR | O_CREAT | O_APPEND | O_EXCL
  }
  return access[flag] | O_NONBLOCK | O_CLOEXEC | (flag === "r" ? 0 : O_NOFOLLOW)
}

/**
 * Opens `path` and returns its descriptor. A writing mode never follows a link at the last component (`ELOOP`); no
 * mode blocks on a FIFO; the descriptor must name a regular file (a folder is allowed read-only, for fsync). Anything
 * else is closed again and thrown as `wrongKind`. A mode `r` follows links: readers of workspace files check first.
 *
 * @since 0.1.0
 * @category layers
 */
export const openChecked = (path: string, flag: OpenFlag, mode = 0o600): number => {
  let fd: number
  try {
    fd = fs.openSync(path, openFlags(flag), mode)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException)?.code
    // ELOOP under O_NOFOLLOW: the last component is a link. EISDIR/ENXIO: a folder or a FIFO nobody reads.
    if (code === "ELOOP" || code === "ENXIO" || code === "EISDIR") {
      const kind = kindOf(path)
      if (kind !== "File" && kind !== "Missing") throw wrongKind(path, kind)
    }
    throw error
  }
  try {
    const kind = kindOfStats(fs.fstatSync(fd))
    if (kind !== "File" && !(kind === "Directory" && flag === "r")) throw wrongKind(path, kind)
    return fd
  } catch (error) {
    fs.closeSync(fd)
    throw error
  }
}

/**
 * Fails (throws `wrongKind`) unless `path` is missing or a regular file; with `allowMissing: false`, missing fails too.
 *
 * @since 0.1.0
 * @category layers
 */
export const requireRegular = (path: string, allowMissing = true): void => {
  const kind = kindOf(path)
  if (kind === "File" || (allowMissing && kind === "Missing")) return
  if (kind === "Missing") {
    throw Object.assign(new Error(`${path} does not exist`), { code: "ENOENT", path })
  }
  throw wrongKind(path, kind)
}

/**
 * Replaces the content of `path` (created `mode` if missing) without following a link or opening a special file; fsynced.
 *
 * @since 0.1.0
 * @category layers
 */
export const writeFileChecked = (path: string, data: Uint8Array | string, mode = 0o600): void => {
  const fd = openChecked(path, "w", mode)
  try {
    fs.writeFileSync(fd, data)
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * Reads `path` whole: only a regular file, never blocking on a FIFO, and not through a link.
 *
 * @since 0.1.0
 * @category layers
 */
export const readFileChecked = (path: string): Buffer => {
  requireRegular(path, false)
  const fd = openChecked(path, "r")
  try {
    return fs.readFileSync(fd)
  } finally {
    fs.closeSync(fd)
  }
}
