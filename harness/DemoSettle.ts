// The demo's Phase 3 stories (docs/benchmarks.md, docs/spec/05-reconciliation.md): a real SIGKILL inside the built-in file write after its rename,
// then repair → reconcile → (C) proven and continued, or (D) diverged, edited by a person (`resolve --edit`) and continued.
import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { RunId } from "../src/Domain/Ids.js"
import { reasonsOf } from "../src/Domain/ContinuationPlan.js"
import * as NodeContinuationSafetyInspector from "../src/Layers/NodeContinuationSafetyInspector.js"
import * as NodeNoFollowFileSystem from "../src/Layers/NodeNoFollowFileSystem.js"
import * as NodeOperator from "../src/Layers/NodeOperator.js"
import * as ContinuationExecutor from "../src/Programs/ContinuationExecutor.js"
import * as StartupRepair from "../src/Programs/StartupRepair.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { WorkspaceOwner } from "../src/Services/WorkspaceOwner.js"
import * as ScriptedModelProvider from "../src/Testing/ScriptedModelProvider.js"
import { reconcileWorkspace, resolveWorkspace } from "../src/Workspace/ResolveWorkspace.js"
import { childArgv } from "./ChildScript.js"
import { type DemoStore, workspaceStores } from "./DemoChild.js"
import { CHILD_RUN } from "./FileWriteChild.js"

const CHILD_ARGV = childArgv(import.meta.url, "FileWriteChild")
const PROJECT_ROOT = fileURLToPath(new URL("..", import.meta.url))
const READY_TIMEOUT = Duration.seconds(60)
const EXIT_TIMEOUT = Duration.seconds(30)

/** The run the file-write stories crash (the file-write child's run). */
export const SETTLE_RUN_ID = CHILD_RUN
/** The file-write call in that run. */
export const SETTLE_CALL_ID = "call-1"
/** The built-in file-write tool's name. */
export const SETTLE_TOOL_NAME = "write_file"
/** The project folder (the tool's root) inside a story's workspace, and the file it writes there. */
export const PROJECT_DIR = "project"
/** The file the tool writes under the project folder. */
export const TARGET_FILE = "notes.txt"
/** What someone else writes into the file in story D, before reconcile. */
export const OUTSIDE_CONTENT = "changed by someone else\n"
/** The result a person records in story D (`resolve --edit`). */
export const EDITED_RESULT = { written: false, note: "notes.txt was changed by someone else; kept their version" }

/** A file-write story's steps, as they happened (for the narrative and the JSON). */
export interface SettleSteps {
  readonly killed: boolean
  readonly changedBySomeoneElse: boolean
  readonly reconcile: ReadonlyArray<{ readonly outcome: string; readonly reason: string; readonly message: string }>
  /** The tool result the continuation's provider was sent (filled in after the continuation), as JSON text. */
  readonly replayedResult: string | null
  readonly resolve: { readonly reasonCode: string; readonly actor: string; readonly disposition: string } | null
  readonly log: ReadonlyArray<string>
}

/** Runs the file-write child (managed run) until it reports `at after_rename`, then SIGKILLs it for real. */
export const crashFileWrite = (store: DemoStore, workspace: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const root = join(workspace, PROJECT_DIR)
    yield* fs.makeDirectory(root, { recursive: true, mode: 0o700 })
    yield* fs.writeFileString(join(root, TARGET_FILE), "before\n")
    const proc = yield* Command.make(...CHILD_ARGV, store, workspace, root, "after_rename", "managed").pipe(
      Command.workingDirectory(PROJECT_ROOT),
      Command.start
    )
    const log: Array<string> = []
    const stderr = yield* proc.stderr.pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.runForEach((line) => Effect.sync(() => log.push(`stderr: ${line}`))),
      Effect.ignore,
      Effect.fork
    )
    const reached = yield* proc.stdout.pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.tap((line) => Effect.sync(() => log.push(`stdout: ${line}`))),
      Stream.filter((line) => line === "at after_rename"),
      Stream.runHead,
      Effect.orElseSucceed(() => Option.none<string>()),
      Effect.timeout(READY_TIMEOUT),
      Effect.orElseSucceed(() => Option.none<string>())
    )
    yield* proc.kill("SIGKILL").pipe(Effect.ignore)
    yield* proc.exitCode.pipe(Effect.timeout(EXIT_TIMEOUT), Effect.ignore)
    yield* stderr.await.pipe(Effect.timeout(EXIT_TIMEOUT), Effect.ignore)
    return { killed: Option.isSome(reached), log }
  }).pipe(Effect.scoped)

/**
 * Settles a crashed file write (the crash already happened): repair under the exclusive owner lock; in story D
 * someone else changes the file first; `reconcile` (the CLI's program); in D a person's `resolve --edit`.
 */
export const settle = (store: DemoStore, workspace: string, story: "C" | "D", crash: { readonly killed: boolean; readonly log: ReadonlyArray<string> }) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const owner = yield* WorkspaceOwner
    const stores = workspaceStores(store, { workspace, readOnly: false })
    const repair = yield* owner.withExclusive(workspace, Effect.provide(StartupRepair.repair, stores))
    if (story === "D") yield* fs.writeFileString(join(workspace, PROJECT_DIR, TARGET_FILE), OUTSIDE_CONTENT)
    const reconciled = yield* reconcileWorkspace({ workspace, store })
    let resolved: SettleSteps["resolve"] = null
    if (story === "D") {
      const outcome = yield* resolveWorkspace({
        workspace,
        store,
        runId: SETTLE_RUN_ID,
        callId: SETTLE_CALL_ID,
        choice: { _tag: "edit", result: EDITED_RESULT, isError: false },
        actor: "demo-person"
      })
      resolved = { reasonCode: outcome.reasonCode, actor: outcome.actor, disposition: outcome.disposition }
    }
    return {
      repair: [...repair.repaired.map((r) => ({
        runId: r.runId,
        action: r.action,
        status: r.status,
        ...(r.statusReason !== undefined ? { statusReason: r.statusReason } : {})
      }))],
      repairFailed: repair.failed.map((f) => `${f.runId}: ${f.error}`),
      steps: {
        killed: crash.killed,
        changedBySomeoneElse: story === "D",
        reconcile: reconciled.report.operations.map((op) => ({ outcome: op.outcome, reason: op.reason, message: op.message })),
        replayedResult: null,
        resolve: resolved,
        log: crash.log
      } satisfies SettleSteps
    }
  }).pipe(Effect.provide(Layer.merge(NodeNoFollowFileSystem.layer, NodeOperator.layerFixed("demo-person"))))

/** The confirmed continuation of the settled run with a scripted provider: its plan and what it made. */
export const continueSettled = (store: DemoStore, workspace: string, reply: string) =>
  Effect.gen(function*() {
    const provider = ScriptedModelProvider.unsafeMake([ScriptedModelProvider.reply(reply)])
    const host = Layer.mergeAll(
      workspaceStores(store, { workspace, readOnly: false }),
      NodeContinuationSafetyInspector.layer(NodeContinuationSafetyInspector.fixed([SETTLE_TOOL_NAME], true)),
      ScriptedModelProvider.layerWith(provider)
    )
    return yield* Effect.gen(function*() {
      const events = yield* RuntimeEventStore
      const headers = yield* RunHeaderStore
      const prepared = yield* ContinuationExecutor.prepare(workspace, SETTLE_RUN_ID, { confirmed: true })
      const plan = prepared.plan
      const label = plan._tag === "Park"
        ? `Park (${reasonsOf(plan).join(", ")}; next step ${plan.nextStep})`
        : plan._tag === "Continue"
        ? `Continue (authorized by ${plan.authorizedBy})`
        : "AwaitingConfirmation"
      const outcome = yield* ContinuationExecutor.execute(workspace, prepared, { confirmed: true })
      if (outcome._tag === "NotContinued") return { plan: label, outcome: null, provider, replayResponse: null }
      const run = yield* events.readRun(RunId.make(outcome.continuationRunId))
      const header = yield* headers.get(RunId.make(outcome.continuationRunId))
      const last = run[run.length - 1]?.event.body
      const replay = provider.calls()[0]?.replay ?? []
      const response = replay.map((e) => e.body).find((b) => b._tag === "FunctionResponse")
      return {
        plan: label,
        provider,
        replayResponse: response === undefined ? null : JSON.stringify(response),
        outcome: {
          sourceRunId: outcome.sourceRunId,
          continuationRunId: outcome.continuationRunId,
          claimId: outcome.claimId,
          authorizedBy: outcome.authorizedBy,
          firstEvent: run[0]?.event.body._tag ?? null,
          lastEvent: last?._tag ?? null,
          terminalStatus: last?._tag === "RunTerminated" ? last.status : null,
          headerStatus: Option.isSome(header) ? header.value.status : null,
          replayEvents: replay.length
        }
      }
    }).pipe(Effect.provide(host))
  })
