// The ContinuationSafetyInspector service of docs/spec/04-continuation.md: the host facts a continuation plan needs (workspace identity,
// tool catalog, background work). This file holds the Tag and its interface; the Node layer is in Layers/.
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type { HostFacts } from "../Domain/ContinuationPlan.js"
import type { WorkspaceIdentityError } from "./WorkspaceIdentity.js"

/**
 * The operations of the ContinuationSafetyInspector service.
 *
 * @since 0.1.0
 * @category models
 */
export interface ContinuationSafetyInspectorService {
  /**
   * The host facts for `workspace` now: the UUID of its identity marker (absent when it has none; a malformed
   * marker fails), the names of the tools available, and whether background work is settled (both from the host).
   * Never writes.
   */
  readonly inspect: (workspace: string) => Effect.Effect<HostFacts, WorkspaceIdentityError>
}

/**
 * Reports the host facts the continuation planner believes (and nothing a UI or a model says about itself).
 *
 * @since 0.1.0
 * @category tags
 */
export class ContinuationSafetyInspector extends Context.Tag("runtime-resume/ContinuationSafetyInspector")<
  ContinuationSafetyInspector,
  ContinuationSafetyInspectorService
>() {}
