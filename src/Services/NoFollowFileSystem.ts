// What Effect's FileSystem cannot express and the file-write tool needs (docs/spec/05-reconciliation.md): lstat, reading only a regular file,
// native realpath, and reading or removing a file confined under a root, every component opened without following a link.
import type * as PlatformError from "@effect/platform/Error"
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"

/**
 * A path's last component as lstat sees it: absent, or present with its own type (a link is `SymbolicLink`) and mode bits.
 *
 * @since 0.1.0
 * @category models
 */
export type Entry =
  | { readonly _tag: "Absent" }
  | { readonly _tag: "Present"; readonly type: FileSystem.File.Type; readonly mode: number }

/**
 * What reading a target without following it found: absent, not a regular file (never read), or a regular file's bytes.
 *
 * @since 0.1.0
 * @category models
 */
export type TargetRead =
  | { readonly _tag: "Absent" }
  | { readonly _tag: "NotRegular"; readonly type: FileSystem.File.Type }
  | { readonly _tag: "Regular"; readonly bytes: Uint8Array; readonly mode: number }

/**
 * Why a walk under a root stopped before the target (docs/spec/05-reconciliation.md, "Built-in file-write tool": observe under the recorded
 * root, never following a link): the root's own path, or a folder on the recorded path, is missing, or is a link or
 * anything but a folder (`type` as lstat saw it). `folder` is the relative path of the folder that stopped the walk.
 *
 * @since 0.1.0
 * @category models
 */
export type Confinement =
  | { readonly _tag: "RootMissing" }
  | { readonly _tag: "RootNotFolder"; readonly type: FileSystem.File.Type }
  | { readonly _tag: "FolderMissing"; readonly folder: string }
  | { readonly _tag: "FolderNotFolder"; readonly folder: string; readonly type: FileSystem.File.Type }

/**
 * What reading a path confined under a root found: the walk stopped (`Confinement`), or what `readRegular` finds.
 *
 * @since 0.1.0
 * @category models
 */
export type ConfinedRead = TargetRead | Confinement

/**
 * What removing a path confined under a root did: removed a regular file, or left everything as it was.
 *
 * @since 0.1.0
 * @category models
 */
export type ConfinedRemove =
  | { readonly _tag: "Removed" }
  | { readonly _tag: "Absent" }
  | { readonly _tag: "NotRegular"; readonly type: FileSystem.File.Type }
  | Confinement

/**
 * The no-follow operations and the native realpath; every other file access goes through `FileSystem`.
 *
 * @since 0.1.0
 * @category models
 */
export interface NoFollowFileSystemShape {
  /** lstat of `path`: a missing path (ENOENT) is `Absent`; any other error fails. */
  readonly entry: (path: string) => Effect.Effect<Entry, PlatformError.PlatformError>
  /**
   * Reads `path` when it is a regular file: lstat first; then open with O_RDONLY | O_NOFOLLOW | O_NONBLOCK (a link
   * swapped in since the lstat is refused, a FIFO does not block) and fstat the descriptor, reading only a regular file.
   * Absent (ENOENT) is `Absent`; a link, folder, FIFO, socket or device is `NotRegular`; any other error fails.
   */
  readonly readRegular: (path: string) => Effect.Effect<TargetRead, PlatformError.PlatformError>
  /**
   * The canonical absolute path of `path`, every link resolved, by the OS's realpath(3) in one call (Effect's
   * `FileSystem.realPath` walks the path in JavaScript, one lstat per component: ~6× the CPU on `reconcile`'s path).
   * A missing component is `NotFound`; a component that is not a folder or a link loop is `BadResource`.
   */
  readonly realPath: (path: string) => Effect.Effect<string, PlatformError.PlatformError>
  /**
   * Reads `path` (normal and relative, `/`-separated) under `root` (a normal absolute path) without following a link
   * anywhere: every component of the root and of the path is opened from the one before it, by descriptor, with
   * O_NOFOLLOW (folders with O_DIRECTORY); the target is read as `readRegular` reads it. A link, a file or anything
   * but a folder on the way stops the walk (`Confinement`), so nothing outside the root is ever opened. A path that is
   * not normal fails (`BadArgument`); any other error fails.
   */
  readonly readUnder: (root: string, path: string) => Effect.Effect<ConfinedRead, PlatformError.PlatformError>
  /**
   * Removes `path` under `root` when it is a regular file, the folders walked as `readUnder` walks them and the file
   * unlinked in the folder held open (unlink never follows the last component), so nothing outside the root is removed.
   */
  readonly removeUnder: (root: string, path: string) => Effect.Effect<ConfinedRemove, PlatformError.PlatformError>
}

/**
 * The no-follow file operations (`NodeNoFollowFileSystem.layer` on Node; tests may swap in a failing one).
 *
 * @since 0.1.0
 * @category tags
 */
export class NoFollowFileSystem extends Context.Tag("runtime-resume/NoFollowFileSystem")<NoFollowFileSystem, NoFollowFileSystemShape>() {}
