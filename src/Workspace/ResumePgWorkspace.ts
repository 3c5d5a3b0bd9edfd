// `runtime-resume resume --store postgres` (spec 04, spec 06): plans a continuation of a PostgreSQL workspace's run over
// the workspace opened read-only, and executes an approved plan over it opened as a writer, under its advisory owner
// lock. The workspace identity comes from the workspace's identity row (PgContinuationSafetyInspector), not a marker.
import type * as Redacted from "effect/Redacted"
import * as Effect from "effect/Effect"
import type { PreparedContinuation } from "../Domain/ContinuationOutcome.js"
import type { HostSupplied } from "../Layers/NodeContinuationSafetyInspector.js"
import * as PgContinuationSafetyInspector from "../Layers/PgContinuationSafetyInspector.js"
import * as PgWorkspace from "../Layers/PgWorkspace.js"
import * as ContinuationExecutor from "../Programs/ContinuationExecutor.js"
import { RunHeaderStore } from "../Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import { WorkspaceOwner } from "../Services/WorkspaceOwner.js"
import { planRun } from "./ResumeWorkspace.js"

/** Where the PostgreSQL workspace is and what the host supplies. */
export interface PgResumeOptions {
  readonly url: Redacted.Redacted<string>
  /** The workspace's name inside the database. */
  readonly workspace: string
  readonly host: HostSupplied
}

// The workspace's services and its inspector, provided to `effect`.
const within = <A, E, R>(ws: PgWorkspace.PgWorkspace, host: HostSupplied, effect: Effect.Effect<A, E, R>) =>
  effect.pipe(
    Effect.provideService(RuntimeEventStore, ws.store),
    Effect.provideService(RunHeaderStore, ws.headers),
    Effect.provideService(WorkspaceOwner, ws.owner),
    Effect.provide(PgContinuationSafetyInspector.layer(ws, host))
  )

/**
 * Plans a continuation of a PostgreSQL workspace's run (`runId`, else the default run), changing nothing: the
 * workspace is opened read-only (a missing one is `WorkspaceNotFound` and nothing is created).
 */
export const planPgWorkspace = (options: PgResumeOptions & { readonly runId?: string; readonly confirmed: boolean }) =>
  Effect.scoped(Effect.gen(function*() {
    const ws = yield* PgWorkspace.make({ url: options.url, workspace: options.workspace, readOnly: true })
    return yield* within(ws, options.host, planRun(options.workspace, options))
  })).pipe(Effect.withSpan("ResumePgWorkspace.plan"))

/**
 * Executes a planned continuation (`ContinuationExecutor.execute`) over the PostgreSQL workspace opened as a writer:
 * under its exclusive advisory owner lock (≤ 2 s, else `WorkspaceLocked`) it revalidates, claims the boundary (one claim
 * per boundary, a unique index), commits the start and calls the `ModelProvider` of the context once.
 */
export const executePgWorkspace = (
  options: PgResumeOptions & { readonly prepared: PreparedContinuation; readonly confirmed: boolean }
) =>
  Effect.scoped(Effect.gen(function*() {
    const ws = yield* PgWorkspace.make({ url: options.url, workspace: options.workspace })
    return yield* within(ws, options.host, ContinuationExecutor.execute(options.workspace, options.prepared, { confirmed: options.confirmed }))
  })).pipe(Effect.withSpan("ResumePgWorkspace.execute"))
