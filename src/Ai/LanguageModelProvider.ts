// The ModelProvider of docs/spec/04-continuation.md built from a host's @effect/ai LanguageModel and toolkit (docs/spec/04-continuation.md, "Hosts"): the validated
// replay becomes a Prompt and the continued turn goes on as a durable turn, so its own tool calls are durable too.
import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as AiTool from "@effect/ai/Tool"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { failureClassOf } from "../Domain/DurableTurnErrors.js"
import { SourceHighWater } from "../Domain/RuntimeEvent.js"
import type * as AiToolkit from "./AiToolkit.js"
import * as DurableTurn from "./DurableTurn.js"
import {
  ModelProvider,
  type ModelProviderShape,
  ProviderFailed,
  type ProviderRequest,
  ProviderTurnCommitted
} from "../Services/ModelProvider.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"

// The code a failed continued turn reports: the turn error's failure class, else the error's tag.
const codeOf = (error: DurableTurn.DurableTurnError): string => {
  switch (error._tag) {
    case "TurnModelFailed":
    case "TurnCallRefused":
    case "TurnToolFailed":
    case "TurnStepLimit":
    case "TurnOutputUnsupported":
    case "TurnCallIdInvalid":
      return failureClassOf(error)
    case "PromptNotConvertible":
      return `replay_${error.reason}`
    default:
      return error._tag
  }
}

/**
 * A ModelProvider over the LanguageModel, the toolkit's handlers and the store of the context it is built in: each
 * `respond` runs `DurableTurn.continueOn` on the continuation run with the replay as its history and answers
 * `ProviderTurnCommitted` (the executor then appends `RunTerminated`). A failed turn answers `ProviderFailed` with
 * its failure class as `code` (`replay_<reason>` for a replay that is no prompt) and the high-water its events
 * reached, where the executor closes the run `failed`.
 *
 * @since 0.1.0
 * @category ai
 */
export const make = <Tools extends Record<string, AiTool.Any>, R = never>(config: DurableTurn.TurnConfig<Tools, R>) =>
  Effect.gen(function*() {
    const context = yield* Effect.context<
      LanguageModel.LanguageModel | RuntimeEventStore | AiTool.HandlersFor<Tools> | R
    >()
    const store = Context.get(context as Context.Context<RuntimeEventStore>, RuntimeEventStore)
    const respond = (request: ProviderRequest) =>
      Effect.suspend(() => {
        const ids = request.continuation
        const progress: DurableTurn.TurnProgress = { tail: undefined }
        return DurableTurn.continueOn(ids, request.replay, config, progress).pipe(
          Effect.map((result) => new ProviderTurnCommitted({ highWater: new SourceHighWater(result.highWater) })),
          Effect.catchAll((error: DurableTurn.DurableTurnError) =>
            Effect.flatMap(
              progress.tail === undefined
                ? Effect.succeed(undefined)
                : Effect.option(store.highWater(ids.runId)).pipe(Effect.map((o) => o._tag === "Some" ? o.value : undefined)),
              (highWater) =>
                Effect.fail(
                  new ProviderFailed({
                    runId: ids.runId,
                    code: codeOf(error),
                    message: `continuation ${ids.runId}: the continued turn failed (${codeOf(error)})`,
                    ...(highWater !== undefined ? { highWater: new SourceHighWater({ seq: highWater.seq, digest: highWater.digest }) } : {})
                  })
                )
            )
          ),
          Effect.provide(context)
        )
      })
    return { respond } satisfies ModelProviderShape
  })

/**
 * The LanguageModel-backed ModelProvider as a layer (it needs the LanguageModel, the toolkit's layer, the store, and
 * what the overrides need, inferred from `config.overrides`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: <Tools extends Record<string, AiTool.Any>, O extends AiToolkit.Overrides<Tools, any> = {}>(
  config: DurableTurn.TurnConfig<Tools, any> & { readonly overrides?: O }
) => Layer.Layer<ModelProvider, never, DurableTurn.TurnRequirements<Tools> | AiToolkit.OverridesRequirements<O>> = (config) =>
  Layer.effect(ModelProvider, make(config))
