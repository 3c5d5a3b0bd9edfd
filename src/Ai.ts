// `runtime-resume/ai`: drop-in durability for @effect/ai hosts (docs/spec/04-continuation.md, "Hosts"), behind its own entry point so that hosts
// which do not use @effect/ai never load it (nothing in src/index.ts imports this file or @effect/ai).
/** The durable turn: `run` (a new turn) and `continueOn` (a continued one), each call through ToolRuntime. */
export * as DurableTurn from "./Ai/DurableTurn.js"
/** The typed ways a durable turn fails, with the `failureClass` each records. */
export * as DurableTurnErrors from "./Domain/DurableTurnErrors.js"
/** A toolkit's tools as our Tool definitions; recovery modes from annotations or overrides; `CurrentToolCall`. */
export * as AiToolkit from "./Ai/AiToolkit.js"
/** Ledger events (a replay) as an @effect/ai Prompt. */
export * as AiPrompt from "./Ai/AiPrompt.js"
/** The built-in file-write tool as an @effect/ai tool, its handler and its reconcilable override. */
export * as AiFileWrite from "./Ai/AiFileWrite.js"
/** The ModelProvider of docs/spec/04-continuation.md over the host's LanguageModel and toolkit. */
export * as LanguageModelProvider from "./Ai/LanguageModelProvider.js"
/** A scripted LanguageModel (`LanguageModel.make`, no network) for tests and examples. */
export * as ScriptedLanguageModel from "./Testing/ScriptedLanguageModel.js"
/** An @effect/ai host in one layer: startup repair, the reconcile hook, continuation (the flag or a person's confirmation), durable turns. */
export * as AiHostLayer from "./Ai/AiHost.js"
export { AiHost } from "./Ai/AiHostService.js"
export type { AiHostShape, BootContinuation, BootReport, ContinueConfirmedError } from "./Ai/AiHostService.js"
