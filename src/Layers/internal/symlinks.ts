// File hygiene of the persistent stores: a workspace whose last path component is a symbolic link, or a ledger file
// replaced by a link, a folder or a special file (a FIFO would block a reader for ever), is refused before anything opens it.
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as NodePath from "node:path"
import { StoreReadFailed } from "../../Domain/Errors.js"

const refusal = (path: string, what: string, cause: string) =>
  new StoreReadFailed({
    path,
    cause,
    message: `refusing to open ${path}: it is ${what}; a workspace and its ledger files must be real folders and ` +
      "regular files (runtime-resume never follows a link there nor opens a special file). Move it away or point " +
      "runtime-resume at the real location, then run the command again"
  })

/**
 * Fails with `StoreReadFailed` when the workspace itself (its last path component; parent folders may be links) is a
 * symbolic link (cause `symbolic link`), or when one of `files` inside it is a link or anything but a regular file (a
 * folder, a FIFO, a socket, a device: cause `not a regular file`). `readLink` succeeds only on a link; a missing path
 * passes. The check opens nothing; the Node opens behind it (safeFiles) close the race for writes.
 *
 * @since 0.1.0
 * @category layers
 */
export const refuseSymlinks = (
  fs: FileSystem.FileSystem,
  workspace: string,
  files: ReadonlyArray<string>
): Effect.Effect<void, StoreReadFailed> => {
  const root = NodePath.resolve(workspace)
  const check = (path: string, isFile: boolean) =>
    fs.readLink(path).pipe(
      Effect.option,
      Effect.flatMap((target) =>
        Option.isSome(target)
          ? Effect.fail(refusal(path, `a symbolic link (to ${target.value})`, "symbolic link"))
          : !isFile
          ? Effect.void
          : fs.stat(path).pipe(
            Effect.option,
            Effect.flatMap((info) =>
              Option.isSome(info) && info.value.type !== "File"
                ? Effect.fail(refusal(path, `a ${info.value.type}, not a regular file`, "not a regular file"))
                : Effect.void
            )
          )
      )
    )
  return Effect.zipRight(
    check(root, false),
    Effect.forEach(files, (file) => check(NodePath.join(root, file), true), { discard: true })
  )
}
