// Deliberately broken JSONL stores for the power-loss mutation checks: the real store run on a FileSystem wrapper
// that drops one kind of fsync, so the campaign must find acknowledged events lost.
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { FILE_NAME } from "../../src/Layers/JsonlRuntimeEventStore.js"

/** A File whose `sync` does nothing (it claims success). */
const withoutSync = (file: FileSystem.File): FileSystem.File => ({
  [FileSystem.FileTypeId]: FileSystem.FileTypeId,
  fd: file.fd,
  stat: file.stat,
  seek: file.seek,
  sync: Effect.void,
  read: file.read,
  readAlloc: file.readAlloc,
  truncate: file.truncate,
  write: file.write,
  writeAll: file.writeAll
})

/** Wraps a FileSystem so that files opened at a path `drop(path)` accepts get a no-op `sync`. */
const dropSyncWhere = (fs: FileSystem.FileSystem, drop: (path: string) => boolean): FileSystem.FileSystem => ({
  ...fs,
  open: (path, options) => Effect.map(fs.open(path, options), (file) => (drop(path) ? withoutSync(file) : file))
})

/** Variant 1: the store acknowledges an append without fsyncing the ledger (every ledger `File.sync` is a no-op). */
export const skipLedgerFsync = (fs: FileSystem.FileSystem): Layer.Layer<FileSystem.FileSystem> =>
  Layer.succeed(FileSystem.FileSystem, dropSyncWhere(fs, (path) => path.endsWith(`/${FILE_NAME}`)))

/** Variant 2: the store never fsyncs a directory, so the ledger's creation (and the workspace's) may be lost. */
export const skipDirectoryFsync = (
  fs: FileSystem.FileSystem,
  isDirectory: (path: string) => boolean
): Layer.Layer<FileSystem.FileSystem> => Layer.succeed(FileSystem.FileSystem, dropSyncWhere(fs, isDirectory))
