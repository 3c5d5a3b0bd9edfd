// A host's start under docs/spec/04-continuation.md's owner lock: run the startup repair it is given under the exclusive lock, unless a
// live host holds the lock shared, then hold the lock shared for the host's lifetime (the caller's scope).
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type * as Scope from "effect/Scope"
import { WorkspaceLocked } from "../Domain/Errors.js"
import type { RepairReport } from "../Domain/RepairReport.js"
import type { ReconcileReport } from "../Domain/Settlement.js"
import type { Tool, ToolRequirements } from "../Domain/Tool.js"
import type { RunHeaderStore } from "../Services/RunHeaderStore.js"
import type { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import { type OwnerHold, type OwnerLockError, WorkspaceOwner } from "../Services/WorkspaceOwner.js"
import * as Reconcile from "./Reconcile.js"
import * as StartupRepairProgram from "./StartupRepair.js"

/**
 * Why a host skipped startup repair: a live host holds the owner lock shared, so it already ran repair.
 *
 * @since 0.1.0
 * @category models
 */
export type RepairSkipReason = "owner_held_shared"

/**
 * Whether startup repair ran under the exclusive owner lock (with its result), or was skipped, and why.
 *
 * @since 0.1.0
 * @category models
 */
export type StartupRepair<A> =
  | { readonly _tag: "Ran"; readonly result: A }
  | { readonly _tag: "Skipped"; readonly reason: RepairSkipReason }

/**
 * A started host: what became of startup repair, and the shared owner hold kept until the caller's scope closes.
 *
 * @since 0.1.0
 * @category models
 */
export interface HostStarted<A> {
  readonly repair: StartupRepair<A>
  readonly hold: OwnerHold
}

/**
 * What a host start runs: the startup repair program (and, with the resume flag, an automatic continuation).
 *
 * @since 0.1.0
 * @category models
 */
export interface HostStartOptions<A, E, R> {
  /** Runs under the exclusive owner lock, only when no live host holds the lock; it must be idempotent (docs/spec/04-continuation.md). */
  readonly repair: Effect.Effect<A, E, R>
}

// Pause between two rounds while another process holds the lock exclusively.
const RETRY_PAUSE_MS = 25

/**
 * Starts a host on `workspace`, holding the owner lock shared until the current scope closes:
 * - the lock is free: takes it exclusively at once, runs `repair`, releases it, then takes it shared;
 * - a live host holds it shared: skips repair (that host ran it) and takes it shared beside that host;
 * - another process holds it exclusively (a repair or a continuation): retries both the above until the owner wait
 *   (2 s) has passed, then fails with `WorkspaceLocked`, having run nothing and holding nothing.
 * A failing `repair` fails the start, its exclusive hold released and no shared hold taken.
 *
 * Between releasing exclusive and taking shared, another process may take the lock exclusively: a repair is
 * idempotent and this host has no live run yet (its turns start only after this returns), so nothing of ours can
 * be sealed; a continuation execution only delays our shared hold (at most the owner wait, then `WorkspaceLocked`).
 * A skip is decided from two rounds in a row of two looks each (the exclusive attempt failed, then the probe saw no
 * exclusive holder): an exclusive holder that ends between the looks of one round is caught by the next attempt. Only
 * a new exclusive holder that comes and goes between the rounds could still make the host skip when it could have
 * repaired, which is never unsafe: repair is only deferred to the next start.
 *
 * @since 0.1.0
 * @category programs
 */
export const start = <A, E, R>(
  workspace: string,
  options: HostStartOptions<A, E, R>
): Effect.Effect<HostStarted<A>, E | OwnerLockError, R | WorkspaceOwner | Scope.Scope> =>
  Effect.gen(function*() {
    const owner = yield* WorkspaceOwner
    const begin = yield* Clock.currentTimeMillis
    let sawFree = false
    for (;;) {
      // One exclusive attempt; when taken, repair runs under it and the hold ends with the repair.
      const repaired = yield* Effect.scoped(
        owner.acquire(workspace, "exclusive", { timeoutMs: 0 }).pipe(
          Effect.matchEffect({
            onFailure: (error) =>
              error._tag === "WorkspaceLocked" ? Effect.succeed(Either.left(error)) : Effect.fail(error),
            onSuccess: () => Effect.map(options.repair, Either.right)
          })
        )
      )
      if (Either.isRight(repaired)) {
        const hold = yield* owner.acquire(workspace, "shared")
        return { repair: { _tag: "Ran", result: repaired.right }, hold } satisfies HostStarted<A>
      }
      // Taken by someone. No exclusive holder now means shared holders (live hosts, which ran repair) — or an exclusive
      // holder that ended between the attempt and the probe: so the exclusive attempt is made once more at once, and
      // only a second "taken, yet no exclusive holder" in a row decides the skip.
      if ((yield* owner.probe(workspace)) === "free") {
        if (!sawFree) {
          sawFree = true
          continue
        }
        const shared = yield* Effect.either(owner.acquire(workspace, "shared", { timeoutMs: 0 }))
        if (Either.isRight(shared)) {
          return { repair: { _tag: "Skipped", reason: "owner_held_shared" }, hold: shared.right } satisfies HostStarted<A>
        }
      }
      sawFree = false
      const waited = (yield* Clock.currentTimeMillis) - begin
      if (waited >= owner.waitMs) {
        const holderPid = repaired.left.holderPid
        return yield* new WorkspaceLocked({
          path: repaired.left.path,
          ...(holderPid !== undefined ? { holderPid } : {}),
          message: `Could not start a host on workspace ${workspace} within ${owner.waitMs} ms: ` +
            (holderPid !== undefined ? `process ${holderPid}` : "another process") +
            " holds its owner lock exclusively (a repair or a continuation is running). Nothing was run; start " +
            "again once it has finished, or stop it."
        })
      }
      yield* Effect.sleep(RETRY_PAUSE_MS)
    }
  }).pipe(Effect.withSpan("HostStartup.start"))

/**
 * What a host's start runs inside its one exclusive hold (docs/spec/05-reconciliation.md): its tools for reconcile, and its continuation.
 *
 * @since 0.1.0
 * @category models
 */
export interface StartupStepsOptions<T extends Tool, A, E, R> {
  /** The host's tools: reconcile re-runs or observes their operations. */
  readonly tools: ReadonlyArray<T>
  /** A person's confirmation (the host's own start option): `idempotent` operations are re-run without the flag. */
  readonly confirmed?: boolean
  /** The built-in file-write observation, for file writes whose tool the host no longer lists; also removes temp files. */
  readonly fileWrite?: Reconcile.BuiltinFileWrite
  /**
   * Runs last, in the same hold: typically `ContinuationExecutor.prepare` then `executeHoldingLock` when the flag lets
   * the host continue on its own (docs/spec/04-continuation.md). A function receives repair's report (e.g. to continue the runs it closed).
   */
  readonly continuation?: Effect.Effect<A, E, R> | ((repair: RepairReport) => Effect.Effect<A, E, R>)
}

/**
 * What the steps of a start did: repair's report, reconcile's (or why it could not run), and the continuation's result.
 *
 * @since 0.1.0
 * @category models
 */
export interface StartupStepsResult<A> {
  readonly repair: RepairReport
  readonly reconcile: Either.Either<ReconcileReport, { readonly _tag: string; readonly message: string }>
  readonly continuation: A | undefined
}

/**
 * A host's start (docs/spec/05-reconciliation.md): repair, then reconcile with the host's tools (the flag rule for `idempotent` ones), then
 * the continuation — pass it as `start`'s `repair`, so that all three run in ONE exclusive hold, and a host that skips
 * repair (the lock held shared by another host or by a `resolve`) skips reconcile and the continuation too. An
 * unreadable run is reported (in repair's `failed`, reconcile's `unreadable`) and the start goes on. Each step is
 * idempotent: a crash anywhere converges on the next start.
 *
 * @since 0.1.0
 * @category programs
 */
export const startupSteps = <T extends Tool, A = never, E = never, R = never>(
  options: StartupStepsOptions<T, A, E, R>
): Effect.Effect<StartupStepsResult<A>, E, R | RuntimeEventStore | RunHeaderStore | ToolRequirements<T>> =>
  Effect.gen(function*() {
    const repair = yield* StartupRepairProgram.repair
    const reconcile = yield* Effect.either(Reconcile.reconcile({
      tools: options.tools,
      ...(options.confirmed !== undefined ? { confirmed: options.confirmed } : {}),
      ...(options.fileWrite !== undefined ? { fileWrite: options.fileWrite } : {})
    }))
    const step = options.continuation
    const continuation = step === undefined ? undefined : yield* (Effect.isEffect(step) ? step : step(repair))
    return { repair, reconcile, continuation }
  }).pipe(Effect.withSpan("HostStartup.startupSteps"))
