// The `resolve` verb (docs/spec/05-reconciliation.md, docs/spec/06-cli.md): records a person's retry, edit or abort on one operation, under the owner
// lock held shared (a running host keeps running); exit 0 recorded (or already recorded identically), 2 refused or failed.
import * as Command from "@effect/cli/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import { ResolutionRefused } from "../Domain/Settlement.js"
import * as NodeOperator from "../Layers/NodeOperator.js"
import type { ResolveChoice } from "../Programs/Resolve.js"
import * as Settle from "../Workspace/ResolveWorkspace.js"
import { adviceAfter, runStateJson } from "./internal/advice.js"
import { locate, withBackend } from "./internal/backend.js"
import { storeSlot, UsageError } from "./internal/common.js"
import { hintContext, stepText } from "./internal/nextCommand.js"
import { readStdin } from "./internal/stdin.js"
import { escapeTerminal, human } from "./internal/terminalText.js"
import { verb } from "./internal/verb.js"
import { resolveOptions, RESOLVE_HELP } from "./internal/verbOptions.js"

// Strict JSON: exactly one JSON value (JSON.parse is strict RFC 8259 apart from lone surrogates, which the ledger allows).
const parseStrict = (text: string): Either.Either<unknown, string> => {
  try {
    return Either.right(JSON.parse(text) as unknown)
  } catch (e) {
    return Either.left(e instanceof Error ? e.message : String(e))
  }
}

/**
 * `resolve [--store S] --run ID --call CALL_ID (--retry | --edit JSON | --edit-file FILE|- [--error] | --abort) [--actor NAME] [--json] [WS]`.
 *
 * @since 0.1.0
 * @category cli
 */
export const resolve = Command.make("resolve", resolveOptions, (args) =>
  Effect.gen(function*() {
    const chosen = [args.retry, Option.isSome(args.edit), Option.isSome(args.editFile), args.abort].filter(Boolean).length
    if (chosen !== 1) {
      return yield* new UsageError({ message: "give exactly one of --retry, --edit JSON, --edit-file FILE, --abort" })
    }
    if (args.error && Option.isNone(args.edit) && Option.isNone(args.editFile)) {
      return yield* new UsageError({ message: "--error goes with --edit or --edit-file" })
    }
    if (Option.isSome(args.actor) && args.actor.value.length === 0) return yield* new UsageError({ message: "--actor must not be empty" })
    const workspace = args.workspace
    const slot = storeSlot(args.store, args.pgUrl)
    const base = { workspace, store: slot.store, runId: args.run, callId: args.call }
    const refuse = (message: string) =>
      new ResolutionRefused({ runId: args.run, callId: args.call, reason: "invalid_result", message: `${message}; nothing was written` })
    // The decision: retry, abort, or the result as strict JSON (from --edit, a file, or stdin).
    const decide = Effect.gen(function*() {
      if (args.retry) return { _tag: "retry" } as const
      if (args.abort) return { _tag: "abort" } as const
      let text: string
      if (Option.isSome(args.edit)) text = args.edit.value
      else {
        const file = (args.editFile as Option.Some<string>).value
        const fs = yield* FileSystem.FileSystem
        // `-`: stdin as a stream (a pipe too); a named file through the ledger FileSystem (never a FIFO).
        text = yield* (file === "-"
          ? Effect.mapError(readStdin, (message) => refuse(`cannot read the result from stdin: ${message}`))
          : fs.readFileString(file).pipe(Effect.mapError((e) => refuse(`cannot read the result from ${file}: ${e.message}`))))
      }
      const parsed = parseStrict(text)
      if (Either.isLeft(parsed)) return yield* refuse(`the result is not strict JSON: ${parsed.left}`)
      return { _tag: "edit", result: parsed.right, isError: args.error } as const
    })
    const program = Effect.gen(function*() {
      // Located first (creating nothing), so every failure document names the store.
      yield* locate(slot, { workspace, readOnly: false })
      const choice: ResolveChoice = yield* decide
      return yield* withBackend(slot, { workspace, readOnly: false }, (backend) =>
        Settle.resolveOn(backend, {
          runId: args.run,
          callId: args.call,
          choice,
          ...(Option.isSome(args.actor) ? { actor: args.actor.value } : {})
        })).pipe(Effect.provide(NodeOperator.layer))
    })
    // What happens next, from the run's state after the decision (docs/recovery.md): never a command that must fail.
    const next = (done: Effect.Effect.Success<typeof program>) =>
      Effect.gen(function*() {
        const context = yield* hintContext({ store: args.store, pgUrl: args.pgUrl, workspace })
        const advice = yield* adviceAfter(slot, workspace, context, done.runId)
        return { context, run: advice._tag === "Some" ? advice.value.state.runs.find((r) => r.runId === done.runId) : undefined }
      })
    return yield* verb(program, {
      json: args.json,
      failure: () => ({ ...base, store: slot.store }),
      exitCode: () => 0,
      document: (done) =>
        Effect.map(next(done), ({ context, run }) => ({
          workspace,
          store: done.store,
          runId: done.runId,
          callId: done.callId,
          operationId: done.operationId,
          disposition: done.disposition,
          reasonCode: done.reasonCode,
          actor: done.actor,
          alreadyRecorded: done.alreadyRecorded,
          ...(run !== undefined ? runStateJson(run, context) : {})
        })),
      table: (done) =>
        Effect.map(next(done), ({ context, run }) =>
          human`${done.alreadyRecorded ? "already recorded" : "recorded"}: run ${done.runId}, call ${done.callId} ` +
          human`(${done.operationId}): ${done.disposition} (${done.reasonCode}) by ${done.actor}` + "\n" +
          (run === undefined
            ? ""
            : run.person._tag === "Nothing"
            ? `${escapeTerminal(run.person.text)}\n`
            : human`${run.state}: ${run.summary}` + `\nnext: ${stepText(run.person, context)}\n`))
    })
  })).pipe(Command.withDescription(RESOLVE_HELP))
