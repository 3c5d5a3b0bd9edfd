// A scripted @effect/ai LanguageModel for tests, examples and the bench (docs/spec/04-continuation.md, "Hosts"): built with `LanguageModel.make`, no
// network; each request is answered by a script function of the prompt, and every prompt is recorded for assertions.
import * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import type * as Response from "@effect/ai/Response"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"

/**
 * One scripted answer: the response parts (wire form), or an AiError.
 *
 * @since 0.1.0
 * @category models
 */
export type ScriptedAnswer = ReadonlyArray<Response.PartEncoded> | AiError.AiError

/**
 * The script: answers the n-th request (0-based) from its prompt.
 *
 * @since 0.1.0
 * @category models
 */
export type Script = (prompt: Prompt.Prompt, n: number) => ScriptedAnswer

/**
 * A scripted model: the LanguageModel service and the prompts it received, in order.
 *
 * @since 0.1.0
 * @category models
 */
export interface ScriptedLanguageModel {
  readonly service: LanguageModel.Service
  /** Every prompt received so far, in order. */
  readonly prompts: () => ReadonlyArray<Prompt.Prompt>
}

/**
 * A text part.
 *
 * @since 0.1.0
 * @category testing
 */
export const text = (value: string): Response.PartEncoded => ({ type: "text", text: value })

/**
 * A tool-call part (params in their wire form).
 *
 * @since 0.1.0
 * @category testing
 */
export const toolCall = (id: string, name: string, params: unknown): Response.PartEncoded => ({ type: "tool-call", id, name, params })

/**
 * Whether the prompt's last message holds tool results (the model is answering after its tools ran).
 *
 * @since 0.1.0
 * @category testing
 */
export const afterToolResults = (prompt: Prompt.Prompt): boolean => prompt.content[prompt.content.length - 1]?.role === "tool"

/**
 * Builds a scripted model over `script` (`LanguageModel.make`; streaming is not scripted and fails).
 *
 * @since 0.1.0
 * @category testing
 */
export const make = (script: Script): Effect.Effect<ScriptedLanguageModel> =>
  Effect.gen(function*() {
    const prompts: Array<Prompt.Prompt> = []
    const service = yield* LanguageModel.make({
      generateText: (options) =>
        Effect.suspend(() => {
          const n = prompts.length
          prompts.push(options.prompt)
          const answer = script(options.prompt, n)
          return Array.isArray(answer)
            ? Effect.succeed(answer as Array<Response.PartEncoded>)
            : Effect.fail(answer as AiError.AiError)
        }),
      streamText: () =>
        Stream.fail(new AiError.UnknownError({ module: "ScriptedLanguageModel", method: "streamText", description: "not scripted" }))
    })
    return { service, prompts: () => prompts.slice() }
  })

/**
 * The given scripted model as the LanguageModel layer (keep the value to read its prompts).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWith = (model: ScriptedLanguageModel): Layer.Layer<LanguageModel.LanguageModel> =>
  Layer.succeed(LanguageModel.LanguageModel, model.service)

/**
 * A fresh scripted model over `script` as the LanguageModel layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (script: Script): Layer.Layer<LanguageModel.LanguageModel> =>
  Layer.effect(LanguageModel.LanguageModel, Effect.map(make(script), (m) => m.service))
