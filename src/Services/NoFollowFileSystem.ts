// What Effect's FileSystem cannot express and the file-write tool needs (spec 05): the type of a path's last component
// without following a link (lstat), reading a file only when it is regular (O_NOFOLLOW | O_NONBLOCK), native realpath.
import type * as PlatformError from "@effect/platform/Error"
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"

/** A path's last component as lstat sees it: absent, or present with its own type (a link is `SymbolicLink`) and mode bits. */
export type Entry =
  | { readonly _tag: "Absent" }
  | { readonly _tag: "Present"; readonly type: FileSystem.File.Type; readonly mode: number }

/** What reading a target without following it found: absent, not a regular file (never read), or a regular file's bytes. */
export type TargetRead =
  | { readonly _tag: "Absent" }
  | { readonly _tag: "NotRegular"; readonly type: FileSystem.File.Type }
  | { readonly _tag: "Regular"; readonly bytes: Uint8Array; readonly mode: number }

/** The no-follow operations and the native realpath; every other file access goes through `FileSystem`. */
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
}

/** The no-follow file operations (`NodeNoFollowFileSystem.layer` on Node; tests may swap in a failing one). */
export class NoFollowFileSystem extends Context.Tag("runtime-resume/NoFollowFileSystem")<NoFollowFileSystem, NoFollowFileSystemShape>() {}
