// A person's confirmation continues an @effect/ai host's turn without the flag (docs/spec/04-continuation.md "The flag", docs/continuation.md):
// a turn crashes inside a never_auto_retry tool, a person resolves it, and `AiHost.continueConfirmed` (or the start
// option `confirmContinuation`) continues it; without confirmation the host does not. Against the scripted model, and
// against the real @effect/ai-openai client over a local Responses API stub that refuses a half history with HTTP 400.
import * as OpenAiClient from "@effect/ai-openai/OpenAiClient"
import * as OpenAiLanguageModel from "@effect/ai-openai/OpenAiLanguageModel"
import type * as LanguageModel from "@effect/ai/LanguageModel"
import * as AiTool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import { FetchHttpClient, FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Logger, Option, Redacted, Schema } from "effect"
import { appendFileSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { workspaceStores } from "../harness/ContinuationChild.js"
import type { ContinuationOutcome } from "../src/Domain/ContinuationOutcome.js"
import { RunId } from "../src/Domain/Ids.js"
import * as NodeOperator from "../src/Layers/NodeOperator.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as NodeWorkspaceOwner from "../src/Layers/NodeWorkspaceOwner.js"
import * as AiToolkit from "../src/Ai/AiToolkit.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as Failpoints from "../src/Services/Failpoints.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import * as ScriptedLanguageModel from "../src/Testing/ScriptedLanguageModel.js"
import * as AiHostLayer from "../src/Ai/AiHost.js"
import { AiHost, type BootReport } from "../src/Ai/AiHostService.js"
import { resolveWorkspace } from "../src/Workspace/ResolveWorkspace.js"
import * as OpenAiStub from "./support/openAiResponsesStub.js"

// A tool with a side effect and no annotation: `never_auto_retry`, so after a crash inside it only a person settles it.
const SendMail = AiTool.make("send_mail", {
  description: "Sends a mail.",
  parameters: { to: Schema.String },
  success: Schema.Struct({ sent: Schema.Boolean })
})
const MailToolkit = Toolkit.make(SendMail)
const MAIL_CALL = "call_mail_1"
const MAIL_LOG = "mail-sent.log"
const IDS = EventBuilder.idsFor("mail-turn")
const RUN_ID = IDS.runId
// Why the crashed run parks until a person decides: its call has no response, so the replay ends with the call.
const PARKED = ["dangling_tool_state", "provider_resume_boundary_unsupported"]

// The handler logs each run (the side effect) before the failpoint where the test crashes it.
const handlers = (workspace: string) =>
  MailToolkit.toLayer({
    send_mail: ({ to }) =>
      Effect.gen(function*() {
        const call = yield* Effect.orDie(AiToolkit.currentCall)
        yield* Effect.sync(() => appendFileSync(join(workspace, MAIL_LOG), `${call.callId} ${to}\n`))
        yield* AiToolkit.failpoint
        return { sent: true }
      })
  })

const mailsSent = (workspace: string): Array<string> => {
  try {
    return readFileSync(join(workspace, MAIL_LOG), "utf8").trim().split("\n").filter((l) => l !== "")
  } catch {
    return []
  }
}

type Model = Layer.Layer<LanguageModel.LanguageModel>

const host = (
  workspace: string,
  store: "sqlite" | "jsonl",
  model: Model,
  extra: { readonly confirmContinuation?: AiHostLayer.ContinuationConfirmation } = {}
) =>
  AiHostLayer.layer({ workspace, store, toolkit: MailToolkit, ...extra }).pipe(
    Layer.provide(Layer.mergeAll(handlers(workspace), model)),
    Layer.provide(NodeContext.layer)
  )

// The first host's turn dies inside send_mail (a defect at the in_implementation failpoint): the run is left open.
const crashInsideTool = (workspace: string, store: "sqlite" | "jsonl", model: Model) =>
  Effect.gen(function*() {
    const ai = yield* AiHost
    const die = Failpoints.layerAt("in_implementation", (site) => site.callId === MAIL_CALL ? Effect.dieMessage("killed") : Effect.void)
    const exit = yield* Effect.exit(ai.turn({ ids: IDS, prompt: "mail bob" }).pipe(Effect.provide(die)))
    assert.isTrue(exit._tag === "Failure")
  }).pipe(Effect.scoped, Effect.provide(host(workspace, store, model)))

const bootOf = (ai: Context.Tag.Service<AiHost>): BootReport => {
  assert.strictEqual(ai.startup._tag, "Ran")
  return (ai.startup as { readonly result: BootReport }).result
}

// A person's decision: by default the mail was sent (edit with the result they checked); or retry (the model is told the
// outcome is unknown and decides).
const EDIT = { _tag: "edit", result: { sent: true }, isError: false } as const
const personResolves = (workspace: string, choice: { readonly _tag: "edit"; readonly result: unknown; readonly isError: boolean } | { readonly _tag: "retry" } = EDIT) =>
  resolveWorkspace({ workspace, runId: RUN_ID, callId: MAIL_CALL, choice, actor: "alice" }).pipe(
    Effect.provide(Layer.mergeAll(NodeWorkspaceOwner.layerNode, NodeWorkspaceLock.layerNode, NodeOperator.layer, NodeContext.layer))
  )

const ledger = (workspace: string, store: "sqlite" | "jsonl", runId: string) =>
  Effect.scoped(Effect.gen(function*() {
    const ctx = yield* Layer.build(workspaceStores(store, workspace, true))
    const rows = yield* Context.get(ctx, RuntimeEventStore).readRun(RunId.make(runId))
    const header = Option.getOrThrow(yield* Context.get(ctx, RunHeaderStore).get(RunId.make(runId)))
    return { tags: rows.map((r) => r.event.body._tag), header }
  }))

// The lifecycle log lines (message and annotations) an effect emits.
const withLifecycle = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const lines: Array<{ message: string; annotations: Record<string, unknown> }> = []
    const logger = Logger.make(({ annotations, message }) => {
      const text = Array.isArray(message) ? message.join(" ") : String(message)
      if (text.startsWith("continuation.")) {
        const record: Record<string, unknown> = {}
        for (const [k, v] of annotations) record[k] = v
        lines.push({ message: text, annotations: record })
      }
    })
    const result = yield* effect.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
    return { result, lines }
  })

// The outcome is a continuation a person authorized, recorded as `resume --yes` records it; the run completed.
const assertContinuedByConfirmation = (
  workspace: string,
  store: "sqlite" | "jsonl",
  outcome: ContinuationOutcome,
  lines: ReadonlyArray<{ message: string; annotations: Record<string, unknown> }>
) =>
  Effect.gen(function*() {
    assert.strictEqual(outcome._tag, "Continued", JSON.stringify(outcome))
    if (outcome._tag !== "Continued") return
    assert.strictEqual(outcome.authorizedBy, "confirmation")
    assert.strictEqual(outcome.sourceRunId, RUN_ID)
    const approved = lines.find((l) => l.message === "continuation.plan_approved")
    assert.strictEqual(approved?.annotations["continuation.authorizedBy"], "confirmation")
    assert.isDefined(lines.find((l) => l.message === "continuation.execution_completed"))
    const continued = yield* ledger(workspace, store, outcome.continuationRunId)
    assert.deepStrictEqual(continued.tags, ["ContinuationStarted", "ModelText", "RunTerminated"])
    assert.strictEqual(continued.header.status, "completed")
    assert.strictEqual(continued.header.parentRunId, RUN_ID)
    // The tool ran once, in the crashed turn: never again.
    assert.deepStrictEqual(mailsSent(workspace), [`${MAIL_CALL} bob`])
  })

// The scripted model: a prompt ending in tool results gets the answer; any other, a text and the send_mail call.
const mailScript: ScriptedLanguageModel.Script = (prompt) =>
  ScriptedLanguageModel.afterToolResults(prompt)
    ? [ScriptedLanguageModel.text("the mail went out")]
    : [ScriptedLanguageModel.text("sending"), ScriptedLanguageModel.toolCall(MAIL_CALL, "send_mail", { to: "bob" })]

describe("AiHost: continuing on a person's confirmation", () => {
  it.live("scripted model, SQLite: crash inside the tool, a person resolves while the host runs, continueConfirmed continues", () =>
    Effect.gen(function*() {
      const workspace = yield* (yield* FileSystem.FileSystem).makeTempDirectoryScoped()
      yield* crashInsideTool(workspace, "sqlite", ScriptedLanguageModel.layer(mailScript))
      const model = yield* ScriptedLanguageModel.make(mailScript)
      yield* Effect.gen(function*() {
        const ai = yield* AiHost
        // The boot closed the run and parked it: a person must decide (dangling_tool_state); the model was not called.
        const boot = bootOf(ai)
        assert.deepStrictEqual(boot.continuations.map((c) => [c.sourceRunId, c.outcome, c.codes]), [[RUN_ID, "parked", PARKED]])
        // Confirming cannot continue a run that parks: typed NotContinued, nothing written, no model call.
        const early = yield* ai.continueConfirmed(RUN_ID)
        assert.deepStrictEqual([early._tag, early._tag === "NotContinued" ? early.parkReasons : []], ["NotContinued", PARKED])
        assert.strictEqual(model.prompts().length, 0)
        const decision = yield* personResolves(workspace)
        assert.strictEqual(decision.reasonCode, "manual_edit")
        const { lines, result } = yield* withLifecycle(ai.continueConfirmed(RUN_ID))
        yield* assertContinuedByConfirmation(workspace, "sqlite", result, lines)
        // The model saw the whole history: the call and the person's result paired with it.
        const last = model.prompts()[model.prompts().length - 1]!
        assert.strictEqual(last.content[last.content.length - 1]?.role, "tool")
        // The boundary is claimed: a second confirmation continues nothing.
        const again = yield* ai.continueConfirmed(RUN_ID)
        assert.deepStrictEqual([again._tag, again._tag === "NotContinued" ? again.parkReasons : []], ["NotContinued", ["continuation_already_exists"]])
        assert.strictEqual(model.prompts().length, 1)
        // The host holds its workspace again and runs new turns.
        const next = yield* ai.turn({ ids: EventBuilder.idsFor("after"), prompt: "again" }).pipe(
          Effect.provide(Failpoints.layerAt("in_implementation", () => Effect.void))
        )
        assert.strictEqual(next.text, "the mail went out")
      }).pipe(Effect.scoped, Effect.provide(host(workspace, "sqlite", ScriptedLanguageModel.layerWith(model))))
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 120_000)

  for (const store of ["sqlite", "jsonl"] as const) {
    it.live(`scripted model, ${store}: after resolve (${store === "jsonl" ? "retry" : "edit"}) a restarted host without confirmation does not continue; confirmContinuation does`, () =>
      Effect.gen(function*() {
        const workspace = yield* (yield* FileSystem.FileSystem).makeTempDirectoryScoped()
        yield* crashInsideTool(workspace, store, ScriptedLanguageModel.layer(mailScript))
        // A start repairs and parks the run; then, with no host running, a person resolves it.
        yield* Effect.scoped(AiHost).pipe(Effect.provide(host(workspace, store, ScriptedLanguageModel.layer(mailScript))))
        const decision = yield* personResolves(workspace, store === "jsonl" ? { _tag: "retry" } : EDIT)
        assert.strictEqual(decision.reasonCode, store === "jsonl" ? "manual_retry" : "manual_edit")
        // Without the flag or a confirmation the next start does not continue: a typed outcome, no model call.
        const model = yield* ScriptedLanguageModel.make(mailScript)
        yield* Effect.gen(function*() {
          const ai = yield* AiHost
          assert.deepStrictEqual(bootOf(ai).continuations.map((c) => [c.sourceRunId, c.outcome]), [[RUN_ID, "awaiting_confirmation"]])
          assert.strictEqual(model.prompts().length, 0)
        }).pipe(Effect.scoped, Effect.provide(host(workspace, store, ScriptedLanguageModel.layerWith(model))))
        const ledgerBefore = yield* ledger(workspace, store, RUN_ID)
        assert.strictEqual(ledgerBefore.header.status, "failed")
        // A start whose person confirmed this run (the option) continues it in its boot.
        const { lines, result } = yield* withLifecycle(Effect.scoped(Effect.map(AiHost, (ai) => bootOf(ai).continuations)).pipe(
          Effect.provide(host(workspace, store, ScriptedLanguageModel.layer(mailScript), { confirmContinuation: [RUN_ID] }))
        ))
        assert.deepStrictEqual(result.map((c) => [c.outcome, c.authorizedBy]), [["continued", "confirmation"]])
        const { Continued } = yield* Effect.promise(() => import("../src/Domain/ContinuationOutcome.js"))
        const continuationRunId = result[0]!.continuationRunId!
        const headers = yield* ledger(workspace, store, continuationRunId)
        yield* assertContinuedByConfirmation(workspace, store, new Continued({
          sourceRunId: RUN_ID,
          continuationRunId,
          claimId: headers.header.claimId!,
          authorizedBy: "confirmation",
          startedSeq: 1,
          terminalSeq: 3
        }), lines)
      }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 120_000)
  }

  it.live("a continued model that reuses the source run's call id: typed ProviderFailed (call_id_invalid), the continuation closed failed, no tool run", () =>
    Effect.gen(function*() {
      const workspace = yield* (yield* FileSystem.FileSystem).makeTempDirectoryScoped()
      yield* crashInsideTool(workspace, "sqlite", ScriptedLanguageModel.layer(mailScript))
      yield* Effect.scoped(AiHost).pipe(Effect.provide(host(workspace, "sqlite", ScriptedLanguageModel.layer(mailScript))))
      yield* personResolves(workspace)
      // After the tool result, this model calls send_mail again with the id the source run already used.
      const reuse: ScriptedLanguageModel.Script = () => [ScriptedLanguageModel.toolCall(MAIL_CALL, "send_mail", { to: "bob" })]
      const failed = yield* Effect.scoped(Effect.flatMap(AiHost, (ai) => Effect.flip(ai.continueConfirmed(RUN_ID)))).pipe(
        Effect.provide(host(workspace, "sqlite", ScriptedLanguageModel.layer(reuse)))
      )
      assert.strictEqual(failed._tag, "ProviderFailed")
      assert.strictEqual((failed as { code?: string }).code, "call_id_invalid")
      const headers = yield* Effect.scoped(Effect.gen(function*() {
        const ctx = yield* Layer.build(workspaceStores("sqlite", workspace, true))
        return yield* Context.get(ctx, RunHeaderStore).list()
      }))
      const continuation = headers.find((h) => h.parentRunId === RUN_ID)!
      const { header, tags } = yield* ledger(workspace, "sqlite", continuation.runId)
      assert.deepStrictEqual(tags, ["ContinuationStarted", "RunTerminated"])
      assert.strictEqual(header.status, "failed")
      assert.deepStrictEqual(mailsSent(workspace), [`${MAIL_CALL} bob`])
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 120_000)

  it.live("another live host on the workspace: continueConfirmed fails WorkspaceLocked, nothing written, and the host runs on", () =>
    Effect.gen(function*() {
      const workspace = yield* (yield* FileSystem.FileSystem).makeTempDirectoryScoped()
      yield* crashInsideTool(workspace, "sqlite", ScriptedLanguageModel.layer(mailScript))
      yield* Effect.scoped(AiHost).pipe(Effect.provide(host(workspace, "sqlite", ScriptedLanguageModel.layer(mailScript))))
      yield* personResolves(workspace)
      yield* Effect.gen(function*() {
        const first = yield* Layer.build(host(workspace, "sqlite", ScriptedLanguageModel.layer(mailScript)))
        // A second host beside it (it skips repair: the first holds the lock shared).
        const second = yield* Layer.build(host(workspace, "sqlite", ScriptedLanguageModel.layer(mailScript)))
        assert.strictEqual(Context.get(second, AiHost).startup._tag, "Skipped")
        const ai = Context.get(first, AiHost)
        const refused = yield* Effect.flip(ai.continueConfirmed(RUN_ID))
        assert.strictEqual(refused._tag, "WorkspaceLocked")
        const headers = yield* Effect.scoped(Effect.gen(function*() {
          const ctx = yield* Layer.build(workspaceStores("sqlite", workspace, true))
          return yield* Context.get(ctx, RunHeaderStore).list()
        }))
        assert.isUndefined(headers.find((h) => h.parentRunId === RUN_ID))
        // The first host took its shared hold again: its turns run.
        const next = yield* ai.turn({ ids: EventBuilder.idsFor("after-refusal"), prompt: "again" })
        assert.strictEqual(next.text, "the mail went out")
      }).pipe(Effect.scoped)
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 120_000)

  // The real @effect/ai-openai client, over a stub of the Responses API that refuses a half history with HTTP 400.
  const stubScript: OpenAiStub.StubScript = (input) =>
    input[input.length - 1]?.type === "function_call_output"
      ? [{ type: "text", text: "the mail went out" }]
      : [{ type: "text", text: "sending" }, { type: "call", callId: MAIL_CALL, name: "send_mail", args: { to: "bob" } }]

  const openAi = (apiUrl: string): Model =>
    OpenAiLanguageModel.layer({ model: "gpt-4o-mini" }).pipe(
      Layer.provide(OpenAiClient.layer({ apiKey: Redacted.make("sk-stub"), apiUrl })),
      Layer.provide(FetchHttpClient.layer)
    )

  it.live("@effect/ai-openai over a Responses API stub: crash, resolve, no continuation without confirmation, continueConfirmed continues with valid requests only", () =>
    Effect.gen(function*() {
      const stub = yield* OpenAiStub.start(stubScript)
      // The stub enforces the rule: a function_call without its function_call_output is HTTP 400.
      const half = yield* Effect.promise(() =>
        fetch(`${stub.apiUrl}/responses`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "gpt-4o-mini", input: [{ role: "user", content: "x" }, { type: "function_call", call_id: "c1", name: "send_mail", arguments: "{}" }] })
        })
      )
      assert.strictEqual(half.status, 400)
      const probe = stub.requests().length
      const workspace = yield* (yield* FileSystem.FileSystem).makeTempDirectoryScoped()
      const model = openAi(stub.apiUrl)
      yield* crashInsideTool(workspace, "sqlite", model)
      // The boot after the crash parks the run (a person must decide) and calls no model.
      yield* Effect.gen(function*() {
        const boot = bootOf(yield* AiHost)
        assert.deepStrictEqual(boot.continuations.map((c) => [c.outcome, c.codes]), [["parked", PARKED]])
      }).pipe(Effect.scoped, Effect.provide(host(workspace, "sqlite", model)))
      assert.strictEqual(stub.requests().length, probe + 1)
      yield* personResolves(workspace)
      yield* Effect.gen(function*() {
        const ai = yield* AiHost
        // Without the flag or a confirmation: awaiting_confirmation, and no request reaches the model.
        assert.deepStrictEqual(bootOf(ai).continuations.map((c) => [c.sourceRunId, c.outcome]), [[RUN_ID, "awaiting_confirmation"]])
        assert.strictEqual(stub.requests().length, probe + 1)
        // A person confirms: the turn continues through the real client.
        const { lines, result } = yield* withLifecycle(ai.continueConfirmed(RUN_ID))
        yield* assertContinuedByConfirmation(workspace, "sqlite", result, lines)
      }).pipe(Effect.scoped, Effect.provide(host(workspace, "sqlite", model)))
      const requests = stub.requests().slice(probe)
      assert.strictEqual(requests.length, 2)
      assert.deepStrictEqual(requests.map((r) => r.rejected), [undefined, undefined])
      // The continuation's request: the whole turn, the call followed by the person's result.
      const input = requests[1]!.body.input
      const call = input.findIndex((i) => i.type === "function_call" && i.call_id === MAIL_CALL)
      const output = input.findIndex((i) => i.type === "function_call_output" && i.call_id === MAIL_CALL)
      assert.isTrue(call >= 0 && output > call, JSON.stringify(input))
      assert.deepStrictEqual(JSON.parse(input[output]!.output as string), { sent: true })
      assert.strictEqual(input.filter((i) => i.role === "user").length, 1)
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), 120_000)
})
