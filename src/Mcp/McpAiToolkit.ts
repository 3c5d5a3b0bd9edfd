// An MCP server's tools as @effect/ai tools (docs/mcp.md), for `runtime-resume/ai` hosts: a Toolkit and its handlers'
// layer, each handler one `tools/call`; the mode and provenance ride on the tools' annotations, so a durable turn uses them unchanged.
import * as AiTool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as AiToolkit from "../Ai/AiToolkit.js"
import type * as McpToolset from "./McpToolset.js"

/** The args of an MCP tool as @effect/ai parameters: any JSON object, described to the model by the server's input schema. */
const parametersOf = (inputSchema: Record<string, unknown>) =>
  Schema.Struct({}, Schema.Record({ key: Schema.String, value: Schema.Unknown })).annotations({ jsonSchema: inputSchema })

/**
 * One descriptor as an @effect/ai tool: its success and failure are the `tools/call` result (failure mode `return`).
 *
 * @since 0.1.0
 * @category mcp
 */
export const toAiTool = (descriptor: McpToolset.McpToolDescriptor): AiTool.Any => {
  const base = AiTool.make(descriptor.name, {
    ...(descriptor.description !== undefined ? { description: descriptor.description } : {}),
    success: Schema.Unknown,
    failure: Schema.Unknown,
    failureMode: "return"
  }).setParameters(parametersOf(descriptor.inputSchema) as any)
  const hints = descriptor.hints
  return base
    .annotate(AiTool.Readonly, descriptor.choice.recoveryMode === "read_only")
    .annotate(AiTool.Idempotent, descriptor.choice.recoveryMode === "idempotent")
    .annotate(AiTool.Destructive, hints.destructiveHint ?? true)
    .annotate(AiTool.OpenWorld, hints.openWorldHint ?? true)
    .annotate(AiToolkit.Provenance, descriptor.provenance) as unknown as AiTool.Any
}

/**
 * A server's tools as a Toolkit and the layer of its handlers (each calls the server with the key T1 recorded).
 *
 * @since 0.1.0
 * @category models
 */
export interface McpAiTools {
  readonly toolkit: Toolkit.Toolkit<Record<string, AiTool.Any>>
  readonly layer: Layer.Layer<AiTool.HandlersFor<Record<string, AiTool.Any>>>
}

/**
 * The toolset as @effect/ai tools. Their `Readonly` / `Idempotent` annotations are the mode McpRecoveryMode chose (so
 * `AiToolkit.recoveryModeOf` gives it back) and `AiToolkit.Provenance` is what T1 records. Merge the toolkit with the
 * host's own (`Toolkit.merge`) and provide the layer. A handler outside a durable turn calls the server without a key.
 *
 * @since 0.1.0
 * @category mcp
 */
export const toAi = (toolset: McpToolset.McpToolset): McpAiTools => {
  const tools = toolset.descriptors.map(toAiTool)
  const toolkit = Toolkit.make(...tools) as unknown as Toolkit.Toolkit<Record<string, AiTool.Any>>
  const handlers: Record<string, (params: unknown) => Effect.Effect<unknown, unknown>> = {}
  for (const descriptor of toolset.descriptors) {
    handlers[descriptor.name] = (params) =>
      Effect.flatMap(AiToolkit.CurrentToolCall, (call) =>
        toolset.call(
          descriptor,
          params as Record<string, unknown>,
          Option.isSome(call) ? call.value.idempotencyKey : undefined
        ).pipe(Effect.catchTag("ToolErrorResult", (e) => Effect.fail(e.result))))
  }
  return { toolkit, layer: toolkit.toLayer(handlers as any) as any }
}
