// A scripted ModelProvider for tests and the demo: it answers from a script, in order, and records every request,
// so a test can assert that the provider was called exactly once, or never.
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { ModelText } from "../Domain/RuntimeEvent.js"
import {
  ModelProvider,
  type ModelProviderShape,
  ProviderFailed,
  ProviderReply,
  type ProviderRequest
} from "../Services/ModelProvider.js"

/**
 * One scripted answer: a reply, or a provider failure.
 *
 * @since 0.1.0
 * @category models
 */
export type ScriptedAnswer = ProviderReply | ProviderFailed

/**
 * A scripted provider, with the requests it received (in order) for assertions.
 *
 * @since 0.1.0
 * @category models
 */
export interface ScriptedModelProvider extends ModelProviderShape {
  /** Every request received so far, in order (answered or not). */
  readonly calls: () => ReadonlyArray<ProviderRequest>
}

/**
 * A reply of one or more model texts.
 *
 * @since 0.1.0
 * @category testing
 */
export const reply = (text: string, ...more: ReadonlyArray<string>): ProviderReply =>
  new ProviderReply({ items: [new ModelText({ text }), ...more.map((t) => new ModelText({ text: t }))] })

/**
 * A provider answering the n-th request with the script's n-th answer. A request beyond the script fails loudly
 * with `ProviderFailed` code `script_exhausted` (it is still recorded).
 *
 * @since 0.1.0
 * @category testing
 */
export const unsafeMake = (script: ReadonlyArray<ScriptedAnswer>): ScriptedModelProvider => {
  const calls: Array<ProviderRequest> = []
  const respond = (request: ProviderRequest) =>
    Effect.suspend(() => {
      const answer = script[calls.length]
      calls.push(request)
      if (answer === undefined) {
        return Effect.fail(
          new ProviderFailed({
            runId: request.continuation.runId,
            code: "script_exhausted",
            message: `scripted provider: request ${calls.length} for run ${request.continuation.runId} is beyond ` +
              `its script of ${script.length} answers`
          })
        )
      }
      return answer instanceof ProviderFailed ? Effect.fail(answer) : Effect.succeed(answer)
    })
  return { respond, calls: () => calls.slice() }
}

/**
 * The given scripted provider as the ModelProvider layer (keep the value to read its `calls`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWith = (provider: ScriptedModelProvider): Layer.Layer<ModelProvider> => Layer.succeed(ModelProvider, provider)

/**
 * A fresh scripted provider over `script` as the ModelProvider layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (script: ReadonlyArray<ScriptedAnswer>): Layer.Layer<ModelProvider> => layerWith(unsafeMake(script))
