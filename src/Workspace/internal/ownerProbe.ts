// Whether some process holds a workspace's owner lock (docs/recovery.md): the probe a backend's `ownerLive` makes.
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { WorkspaceOwnerService } from "../../Services/WorkspaceOwner.js"

/**
 * One exclusive attempt on the owner lock, no wait, released at once: `true` when another holder has it.
 *
 * @since 0.1.0
 * @category workspace
 */
export const lockedBySomeone = (owner: WorkspaceOwnerService, workspace: string) =>
  Effect.either(Effect.scoped(owner.acquire(workspace, "exclusive", { timeoutMs: 0 }))).pipe(
    Effect.map((taken) => Either.isLeft(taken) && taken.left._tag === "WorkspaceLocked")
  )
