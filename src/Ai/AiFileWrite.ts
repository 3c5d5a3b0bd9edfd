// The built-in file-write tool (docs/spec/05-reconciliation.md) as an @effect/ai tool (docs/spec/04-continuation.md, "Hosts"): the Tool definition for a Toolkit, its
// handler for the toolkit's layer, and the override that makes it reconcilable in a durable turn.
import * as AiTool from "@effect/ai/Tool"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { DEFAULT_NAME, FileWriteArgs, FileWriteResult } from "../Domain/FileWriteEvidence.js"
import type * as AiToolkit from "./AiToolkit.js"
import { CurrentToolCall } from "./AiToolkit.js"
import * as FileWriteTool from "../Programs/FileWriteTool.js"

/**
 * What the file-write handler and its override need: FileSystem, Path and the no-follow operations.
 *
 * @since 0.1.0
 * @category models
 */
export type Requirements = FileWriteTool.FileWriteRequirements

/**
 * The failure the model sees (as an error tool result): the path and what went wrong.
 *
 * @since 0.1.0
 * @category ai
 */
export const FileWriteFailure = Schema.Struct({ path: Schema.String, message: Schema.String })

/**
 * The file-write tool for an @effect/ai Toolkit: params `{ path, content }`, success `{ path, bytes, sha256 }`, failure
 * `{ path, message }` returned to the model (`failureMode: "return"`). Annotated `Destructive`, not `Readonly` nor
 * `Idempotent`: make it reconcilable with `override` in a durable turn.
 *
 * @since 0.1.0
 * @category ai
 */
export const make = <const Name extends string = typeof DEFAULT_NAME>(name?: Name) =>
  AiTool.make((name ?? DEFAULT_NAME) as Name, {
    description: "Writes the whole content of a file (UTF-8) under the agent's root folder; the path is relative to it.",
    parameters: FileWriteArgs.fields,
    success: FileWriteResult,
    failure: FileWriteFailure,
    failureMode: "return"
  }).annotate(AiTool.Destructive, true).annotate(AiTool.Idempotent, false)

/**
 * The file-write tool named `write_file`.
 *
 * @since 0.1.0
 * @category ai
 */
export const tool = make()

/**
 * The handler for the toolkit's layer (`toolkit.toLayer(Effect.gen(function*() { return { write_file: yield*
 * AiFileWrite.handler({ root }) } }))`): the atomic write of docs/spec/05-reconciliation.md under `root`, given the operation and the
 * evidence the durable turn recorded at T1. Outside a durable turn it writes nothing and fails (there is no T1).
 *
 * @since 0.1.0
 * @category ai
 */
export const handler = (options: { readonly root: string }) =>
  Effect.map(Effect.context<FileWriteTool.FileWriteRequirements>(), (context) =>
    (params: FileWriteArgs): Effect.Effect<FileWriteResult, typeof FileWriteFailure.Type> =>
      Effect.flatMap(CurrentToolCall, (call) =>
        Option.isNone(call)
          ? Effect.fail({ path: params.path, message: "write_file runs only inside a durable turn (no operation was recorded at T1); nothing was written" })
          : FileWriteTool.write(options.root, params, call.value).pipe(
            Effect.mapError((e) => ({ path: e.path, message: e.message })),
            Effect.provide(context)
          )))

/**
 * The override that makes the tool `reconcilable` in a durable turn: the path rules at preflight, the evidence
 * `runtime-resume/file-write@1` recorded at T1, and `FileWriteTool.observe` after a crash (docs/spec/05-reconciliation.md).
 *
 * @since 0.1.0
 * @category ai
 */
export const override = (options: { readonly root: string }): AiToolkit.ReconcileOverride<FileWriteArgs, FileWriteTool.FileWriteRequirements> => ({
  recoveryMode: "reconcilable",
  preflight: (params) => Effect.asVoid(FileWriteTool.checkPath(options.root, params.path)),
  evidence: (params) => FileWriteTool.evidenceOf(options.root, params),
  observe: (_params, evidence) => FileWriteTool.observe(evidence)
})
