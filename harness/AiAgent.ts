// The @effect/ai agent of the issue-15 proofs: a toolkit with a read-only tool and the file-write tool, its handlers
// (each call logged to a side file, fsynced), and a scripted model that calls both, then answers from their results.
import * as AiTool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { appendFileSync, closeSync, fsyncSync, openSync } from "node:fs"
import { join } from "node:path"
import * as AiFileWrite from "../src/Ai/AiFileWrite.js"
import * as AiToolkit from "../src/Ai/AiToolkit.js"
import * as ScriptedLanguageModel from "../src/Testing/ScriptedLanguageModel.js"

/** The turn's content, which only the ledger may hold (the canary test seeds unique strings). */
export const AgentContent = Schema.Struct({
  prompt: Schema.String,
  note: Schema.String,
  written: Schema.String,
  intro: Schema.String,
  reply: Schema.String
})
/** The turn's content. */
export type AgentContent = typeof AgentContent.Type

/** The read-only tool: returns the note (annotated `Readonly`, so its recovery mode is `read_only`). */
export const ReadNote = AiTool.make("read_note", {
  description: "Reads the note with the given name.",
  parameters: { name: Schema.String },
  success: Schema.Struct({ text: Schema.String })
}).annotate(AiTool.Readonly, true)

/** The agent's toolkit: `read_note` and `write_file`. */
export const AgentToolkit = Toolkit.make(ReadNote, AiFileWrite.tool)

/** The model's call ids (one step, two calls). */
export const READ_CALL = "call-read"
/** The write call's id. */
export const WRITE_CALL = "call-write"
/** The file the write call writes under the root. */
export const WRITTEN_FILE = "answer.txt"

/** The side file (in the workspace) where each handler run appends a line `<tool> <callId>` and fsyncs it. */
export const HANDLER_LOG = "handler-calls.log"

const logCall = (workspace: string, line: string) =>
  Effect.sync(() => {
    const fd = openSync(join(workspace, HANDLER_LOG), "a", 0o600)
    try {
      appendFileSync(fd, `${line}\n`)
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
  })

/** The toolkit's handlers: each logs its run, then `read_note` answers the note and `write_file` writes under `root`. */
export const toolkitLayer = (workspace: string, root: string, content: AgentContent) =>
  AgentToolkit.toLayer(Effect.gen(function*() {
    const write = yield* AiFileWrite.handler({ root })
    return AgentToolkit.of({
      read_note: () =>
        Effect.gen(function*() {
          const call = yield* Effect.orDie(AiToolkit.currentCall)
          yield* logCall(workspace, `read_note ${call.callId}`)
          yield* AiToolkit.failpoint
          return { text: content.note }
        }),
      write_file: (params) =>
        Effect.gen(function*() {
          const call = yield* Effect.orDie(AiToolkit.currentCall)
          yield* logCall(workspace, `write_file ${call.callId}`)
          yield* AiToolkit.failpoint
          return yield* write(params)
        })
    })
  }))

/** The overrides: `write_file` reconcilable under `root`. */
export const overrides = (root: string) => ({ write_file: AiFileWrite.override({ root }) })

/**
 * The scripted model: a prompt that ends with tool results gets the reply; any other gets the intro text and two calls,
 * `read_note` and `write_file` (of `content.written` to `answer.txt`).
 */
export const script = (content: AgentContent): ScriptedLanguageModel.Script => (prompt) =>
  ScriptedLanguageModel.afterToolResults(prompt)
    ? [ScriptedLanguageModel.text(content.reply)]
    : [
      ScriptedLanguageModel.text(content.intro),
      ScriptedLanguageModel.toolCall(READ_CALL, "read_note", { name: "todo" }),
      ScriptedLanguageModel.toolCall(WRITE_CALL, "write_file", { path: WRITTEN_FILE, content: content.written })
    ]
