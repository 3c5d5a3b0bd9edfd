// The disk model of the crash-consistent FileSystem (CrashConsistentFileSystem.ts): inodes with their written and
// fsynced content, directory entries and their fsynced names, the crash models (prefix, pages) and checkpoints.
import * as NodePath from "node:path"

/**
 * The page size of the crash model: with `reorderPages`, each unsynced page persists or not on its own.
 *
 * @since 0.1.0
 * @category constants
 */
export const PAGE_SIZE = 4096


/**
 * One change to a file, as the crash model replays it.
 *
 * @since 0.1.0
 * @category models
 */
export type FileOp =
  | { readonly _tag: "Write"; readonly offset: number; readonly bytes: Uint8Array }
  | { readonly _tag: "Truncate"; readonly length: number }

/**
 * A file or folder of the simulated disk.
 *
 * @since 0.1.0
 * @category models
 */
export interface Inode {
  readonly ino: number
  readonly kind: "file" | "dir"
  mode: number
  /** The content a reader sees is `buffer[0, size)` (files only); the buffer grows by doubling. */
  buffer: Uint8Array
  size: number
  /** The content at the last fsync: `buffer[0, durableSize)` while `durableCopy` is unset (appends only since). */
  durableSize: number
  durableCopy: Uint8Array | undefined
  /** The writes and truncates since the last fsync, in order. */
  ops: Array<FileOp>
  mtime: number
}

/**
 * The bytes a reader of a file sees now.
 *
 * @since 0.1.0
 * @category testing
 */
export const contentOf = (inode: Inode): Uint8Array => inode.buffer.subarray(0, inode.size)

/**
 * The bytes of a file that survive a power cut (what was fsynced).
 *
 * @since 0.1.0
 * @category testing
 */
export const durableOf = (inode: Inode): Uint8Array => inode.durableCopy ?? inode.buffer.subarray(0, inode.durableSize)

/**
 * Before bytes below the durable length change, the durable content gets a copy of its own.
 *
 * @since 0.1.0
 * @category testing
 */
export const keepDurable = (inode: Inode, from: number) => {
  if (inode.durableCopy === undefined && from < inode.durableSize) {
    inode.durableCopy = inode.buffer.slice(0, inode.durableSize)
  }
}

/**
 * Grows a file's buffer (by doubling) to hold `size` bytes.
 *
 * @since 0.1.0
 * @category testing
 */
export const reserve = (inode: Inode, size: number) => {
  if (size <= inode.buffer.length) return
  const grown = new Uint8Array(Math.max(size, inode.buffer.length * 2, 256))
  grown.set(inode.buffer.subarray(0, inode.size), 0)
  inode.buffer = grown
}

/**
 * Writes bytes into a file at an offset (not durable until fsynced).
 *
 * @since 0.1.0
 * @category testing
 */
export const writeInode = (inode: Inode, offset: number, bytes: Uint8Array) => {
  keepDurable(inode, offset)
  reserve(inode, offset + bytes.length)
  inode.buffer.set(bytes, offset)
  inode.size = Math.max(inode.size, offset + bytes.length)
}

/**
 * Cuts (or extends with zeros) a file to a length (not durable until fsynced).
 *
 * @since 0.1.0
 * @category testing
 */
export const truncateInode = (inode: Inode, length: number) => {
  keepDurable(inode, length)
  if (length < inode.size) inode.buffer.fill(0, length, inode.size)
  else reserve(inode, length)
  inode.size = length
}

/**
 * Replaces a file's whole content (not durable until fsynced).
 *
 * @since 0.1.0
 * @category testing
 */
export const setContent = (inode: Inode, data: Uint8Array) => {
  inode.buffer = data
  inode.size = data.length
  inode.durableSize = data.length
  inode.durableCopy = undefined
  inode.ops = []
}

/**
 * One change to a folder's entries, as the crash model replays it.
 *
 * @since 0.1.0
 * @category models
 */
export type NameOp =
  | { readonly _tag: "Link"; readonly path: string; readonly ino: number }
  | { readonly _tag: "Unlink"; readonly path: string; readonly ino: number }
  | { readonly _tag: "Rename"; readonly from: string; readonly to: string; readonly ino: number }

/**
 * The folders a change to entries touches.
 *
 * @since 0.1.0
 * @category testing
 */
export const dirsOf = (op: NameOp): ReadonlyArray<string> =>
  op._tag === "Rename" ? [NodePath.posix.dirname(op.from), NodePath.posix.dirname(op.to)] : [NodePath.posix.dirname(op.path)]

/**
 * Applies a change to entries to a map of names.
 *
 * @since 0.1.0
 * @category testing
 */
export const applyNameOp = (names: Map<string, number>, op: NameOp): boolean => {
  switch (op._tag) {
    case "Link":
      names.set(op.path, op.ino)
      return true
    case "Unlink":
      if (names.get(op.path) !== op.ino) return false
      names.delete(op.path)
      return true
    case "Rename":
      if (names.get(op.from) !== op.ino) return false
      names.delete(op.from)
      names.set(op.to, op.ino)
      return true
  }
}

/**
 * The paths a change to entries names.
 *
 * @since 0.1.0
 * @category testing
 */
export const pathsOfOp = (op: NameOp): ReadonlyArray<string> => op._tag === "Rename" ? [op.from, op.to] : [op.path]

/**
 * mulberry32: a small deterministic PRNG, so a seed reproduces a crash exactly.
 *
 * @since 0.1.0
 * @category testing
 */
export const seeded = (seed: number): (() => number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/**
 * A count in [0, n], biased to the edges: nothing kept (1/4), everything kept (1/4), else uniform.
 *
 * @since 0.1.0
 * @category testing
 */
export const pickCount = (rng: () => number, n: number): number => {
  const r = rng()
  if (r < 0.25) return 0
  if (r < 0.5) return n
  return Math.floor(rng() * (n + 1))
}

/**
 * Bytes with `bytes` written at `offset` (a copy).
 *
 * @since 0.1.0
 * @category testing
 */
export const writeAt = (data: Uint8Array, offset: number, bytes: Uint8Array): Uint8Array => {
  const end = offset + bytes.length
  const out = end > data.length ? new Uint8Array(end) : data
  if (out !== data) out.set(data, 0)
  out.set(bytes, offset)
  return out
}

/**
 * Bytes cut (or extended with zeros) to `length` (a copy).
 *
 * @since 0.1.0
 * @category testing
 */
export const truncateTo = (data: Uint8Array, length: number): Uint8Array => {
  if (length <= data.length) return data.slice(0, length)
  const out = new Uint8Array(length)
  out.set(data, 0)
  return out
}

/**
 * Prefix model: the synced content, then the unsynced operations in order, cut after an arbitrary byte.
 *
 * @since 0.1.0
 * @category testing
 */
export const crashPrefix = (inode: Inode, rng: () => number): Uint8Array => {
  let units = 0
  for (const op of inode.ops) units += op._tag === "Write" ? op.bytes.length : 1
  let keep = pickCount(rng, units)
  let data: Uint8Array = durableOf(inode).slice()
  for (const op of inode.ops) {
    if (keep <= 0) break
    if (op._tag === "Write") {
      const n = Math.min(keep, op.bytes.length)
      data = writeAt(data, op.offset, op.bytes.subarray(0, n))
      keep -= n
    } else {
      data = truncateTo(data, op.length)
      keep -= 1
    }
  }
  return data
}

/**
 * Page model: any length between the synced and the current one; each dirty page is new or old on its own.
 *
 * @since 0.1.0
 * @category testing
 */
export const crashPages = (inode: Inode, rng: () => number): Uint8Array => {
  const oldData = durableOf(inode)
  const newData = contentOf(inode)
  const dirty = new Set<number>()
  let lowestTruncate = Infinity
  for (const op of inode.ops) {
    if (op._tag === "Write") {
      if (op.bytes.length === 0) continue
      const first = Math.floor(op.offset / PAGE_SIZE)
      const last = Math.floor((op.offset + op.bytes.length - 1) / PAGE_SIZE)
      for (let p = first; p <= last; p++) dirty.add(p)
    } else {
      lowestTruncate = Math.min(lowestTruncate, Math.floor(op.length / PAGE_SIZE))
    }
  }
  let length: number
  if (newData.length > oldData.length) {
    length = oldData.length + pickCount(rng, newData.length - oldData.length)
  } else {
    length = rng() < 0.5 ? oldData.length : newData.length
  }
  const out = new Uint8Array(length)
  const pages = Math.ceil(length / PAGE_SIZE)
  for (let p = 0; p < pages; p++) {
    const start = p * PAGE_SIZE
    const end = Math.min(length, start + PAGE_SIZE)
    const isDirty = dirty.has(p) || p >= lowestTruncate
    const source = isDirty && rng() < 0.5 ? newData : oldData
    if (start < source.length) out.set(source.subarray(start, Math.min(end, source.length)), start)
  }
  return out
}

/**
 * Whether two byte arrays hold the same bytes.
 *
 * @since 0.1.0
 * @category testing
 */
export const sameBytes = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && Buffer.compare(a, b) === 0

/**
 * One inode as a checkpoint keeps it: its content and synced content are copies (or shared immutable arrays).
 *
 * @since 0.1.0
 * @category models
 */
export interface InodeCopy {
  readonly ino: number
  readonly kind: "file" | "dir"
  readonly mode: number
  readonly content: Uint8Array
  readonly durableSize: number
  readonly durableCopy: Uint8Array | undefined
  readonly ops: ReadonlyArray<FileOp>
  readonly mtime: number
}

/**
 * A whole disk as a checkpoint keeps it.
 *
 * @since 0.1.0
 * @category testing
 */
export class DiskCheckpoint {
  readonly _tag = "Checkpoint"
  constructor(
    readonly volatile: boolean,
    readonly changes: number,
    readonly inodes: ReadonlyArray<InodeCopy>,
    readonly names: ReadonlyArray<readonly [string, number]>,
    readonly durableNames: ReadonlyArray<readonly [string, number]>,
    readonly nameLog: ReadonlyArray<NameOp>,
    readonly nextIno: number
  ) {}
}

