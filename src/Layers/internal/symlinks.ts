// File hygiene of the persistent stores: a workspace whose last path component is a symbolic link, or a ledger file
// replaced by one, is refused before anything opens it. Best-effort: FileSystem has no O_NOFOLLOW (a race remains).
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as NodePath from "node:path"
import { StoreReadFailed } from "../../Domain/Errors.js"

/**
 * Fails with `StoreReadFailed` (cause `symbolic link`) when the workspace itself (its last path component; parent
 * folders may be links) or one of `files` inside it is a symbolic link. `readLink` succeeds only on a link; a missing
 * path passes. A link created after this check is not caught.
 */
export const refuseSymlinks = (
  fs: FileSystem.FileSystem,
  workspace: string,
  files: ReadonlyArray<string>
): Effect.Effect<void, StoreReadFailed> =>
  Effect.forEach(
    [NodePath.resolve(workspace), ...files.map((file) => NodePath.join(NodePath.resolve(workspace), file))],
    (path) =>
      fs.readLink(path).pipe(
        Effect.matchEffect({
          onFailure: () => Effect.void,
          onSuccess: (target) =>
            Effect.fail(
              new StoreReadFailed({
                path,
                cause: "symbolic link",
                message: `refusing to open ${path}: it is a symbolic link (to ${target}); a workspace and its ledger ` +
                  "files must be real folders and files. Point runtime-resume at the real location instead"
              })
            )
        })
      ),
    { discard: true }
  )
