// The @effect/ai adapter's tool side (docs/spec/04-continuation.md, "Hosts"): an @effect/ai Toolkit's tools as our Tool definitions (docs/spec/03-tool-boundary.md), their
// recovery modes from the tools' annotations or an explicit override, and the call context a handler can read.
import * as AiTool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as CanonicalJson from "../Domain/CanonicalJson.js"
import type { Observation } from "../Domain/Observation.js"
import type { RecoveryMode } from "../Domain/RuntimeEvent.js"
import * as Tool from "../Domain/Tool.js"
import * as ToolFingerprint from "../Domain/ToolFingerprint.js"

/**
 * The call a handler runs for, when it runs inside a durable turn: ToolRuntime's context plus the call's ids.
 *
 * @since 0.1.0
 * @category models
 */
export interface DurableToolCall extends Tool.ToolContext {
  /** The model's call id. */
  readonly callId: string
  /** The tool's name. */
  readonly toolName: string
}

/**
 * The durable call the current handler runs for (`Option.none()` outside a durable turn). A `Context.Reference`, so a
 * handler reads it without adding a requirement: `const call = yield* CurrentToolCall`.
 *
 * @since 0.1.0
 * @category tags
 */
export class CurrentToolCall extends Context.Reference<CurrentToolCall>()("runtime-resume/ai/CurrentToolCall", {
  defaultValue: (): Option.Option<DurableToolCall> => Option.none()
}) {}

/**
 * A handler asked for its durable call (or its idempotency key) outside a durable turn, or the tool has no key.
 *
 * @since 0.1.0
 * @category errors
 */
export class NoDurableCall extends Schema.TaggedError<NoDurableCall>()("NoDurableCall", {
  message: Schema.String
}) {}

/**
 * The durable call the current handler runs for; `NoDurableCall` outside a durable turn.
 *
 * @since 0.1.0
 * @category ai
 */
export const currentCall: Effect.Effect<DurableToolCall, NoDurableCall> = Effect.flatMap(CurrentToolCall, (call) =>
  Option.isSome(call)
    ? Effect.succeed(call.value)
    : new NoDurableCall({ message: "this handler runs outside a durable turn: there is no call recorded at T1" }))

/**
 * The idempotency key T1 recorded for the current call (idempotent tools: the operation id); the handler passes it to
 * the outside service and never makes its own. `NoDurableCall` outside a durable turn or for a tool that is not idempotent.
 *
 * @since 0.1.0
 * @category ai
 */
export const idempotencyKey: Effect.Effect<string, NoDurableCall> = Effect.flatMap(currentCall, (call) =>
  call.idempotencyKey !== undefined
    ? Effect.succeed(call.idempotencyKey)
    : new NoDurableCall({ message: `tool ${call.toolName} is not idempotent: T1 recorded no idempotency key for it` }))

/**
 * Hits the `in_implementation` failpoint of the current call (a no-op outside a durable turn): where a test may crash a handler.
 *
 * @since 0.1.0
 * @category ai
 */
export const failpoint: Effect.Effect<void> = Effect.flatMap(CurrentToolCall, (call) =>
  Option.isSome(call) ? call.value.failpoint : Effect.void)

/**
 * The recovery mode an @effect/ai tool's annotations give: `Tool.Readonly` → `read_only`, else `Tool.Idempotent` →
 * `idempotent`, else `never_auto_retry` (`reconcilable` only by an explicit override, which must bring evidence and observe).
 *
 * @since 0.1.0
 * @category ai
 */
export const recoveryModeOf = (tool: AiTool.Any): Exclude<RecoveryMode, "reconcilable"> =>
  Context.get(tool.annotations, AiTool.Readonly)
    ? "read_only"
    : Context.get(tool.annotations, AiTool.Idempotent)
    ? "idempotent"
    : "never_auto_retry"

/**
 * An @effect/ai tool annotation: where the tool and its mode came from (strict JSON, for example an MCP server and the
 * tool's annotations, docs/mcp.md). `toTool` makes it the Tool's `provenance`, which T1 records.
 *
 * @since 0.1.0
 * @category tags
 */
export class Provenance extends Context.Tag("runtime-resume/ai/Provenance")<Provenance, unknown>() {}

/**
 * The fingerprint each tool of a toolkit carries in its `Provenance` (an MCP tool's: its server, name, hints,
 * description and input schema, docs/mcp.md), by tool name: what a host reports to the continuation's catalog gate
 * (docs/spec/04-continuation.md, `HostFacts.toolFingerprints`) when it reports nothing fresher. Tools without one are left out.
 *
 * @since 0.1.0
 * @category ai
 */
export const fingerprintsOf = (toolkit: { readonly tools: Record<string, AiTool.Any> }): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, tool] of Object.entries(toolkit.tools)) {
    const provenance = Context.getOption(tool.annotations, Provenance)
    const recorded = Option.isSome(provenance) ? ToolFingerprint.fromEvidence(provenance.value) : undefined
    if (recorded !== undefined) out[name] = recorded.fingerprint
  }
  return out
}

/**
 * An explicit recovery mode for one tool, in place of its annotations' (with an optional further preflight check).
 *
 * @since 0.1.0
 * @category models
 */
export interface ModeOverride<P, R> {
  readonly recoveryMode: Exclude<RecoveryMode, "reconcilable">
  /** Further checks of the decoded params at preflight (a failure refuses the call with `invalid_args`). */
  readonly preflight?: (params: P) => Effect.Effect<void, Tool.ToolArgsRejected, R>
}

/**
 * Makes one tool `reconcilable` (docs/spec/05-reconciliation.md): `evidence(params)` runs at preflight and is recorded at T1 (the handler sees
 * it as `CurrentToolCall.evidence`); `observe(params, evidence)` checks the effect after a crash and never redoes it.
 *
 * @since 0.1.0
 * @category models
 */
export interface ReconcileOverride<P, R> {
  readonly recoveryMode: "reconcilable"
  readonly preflight?: (params: P) => Effect.Effect<void, Tool.ToolArgsRejected, R>
  readonly evidence: (params: P) => Effect.Effect<unknown, unknown, R>
  readonly observe: (params: P, evidence: unknown) => Effect.Effect<Observation, unknown, R>
}

/**
 * An explicit override for one tool.
 *
 * @since 0.1.0
 * @category models
 */
export type Override<P, R> = ModeOverride<P, R> | ReconcileOverride<P, R>

/**
 * Per-tool overrides by tool name; a tool without one takes its mode from its annotations.
 *
 * @since 0.1.0
 * @category models
 */
export type Overrides<Tools extends Record<string, AiTool.Any>, R> = {
  readonly [Name in keyof Tools]?: Override<AiTool.Parameters<Tools[Name]>, R>
}

/**
 * The requirements of a set of overrides (what their preflight, evidence and observe need).
 *
 * @since 0.1.0
 * @category models
 */
export type OverridesRequirements<O> = Exclude<
  { [K in keyof O]-?: NonNullable<O[K]> extends Override<any, infer R> ? R : never }[keyof O],
  undefined
>

/** A handler as a toolkit layer stores it: the function and the context captured when the layer was built. */
interface HandlerEntry {
  readonly handler: (params: unknown) => Effect.Effect<unknown, unknown>
  readonly context: Context.Context<never>
}

// A parse error's message, for an error result (the ledger holds it; it is never logged).
const parseMessage = (error: ParseResult.ParseError): string => ParseResult.TreeFormatter.formatErrorSync(error)

// The value committed at T2 must be strict JSON: anything else becomes an error result saying so.
const strictJson = (value: unknown, what: string, toolName: string): Effect.Effect<unknown, Tool.ToolErrorResult> => {
  const encoded = CanonicalJson.encode(value)
  return encoded._tag === "Fail"
    ? Effect.fail(new Tool.ToolErrorResult({
      result: { error: "result_not_json", message: `${toolName}'s encoded ${what} is not strict JSON: ${encoded.failure.message}` }
    }))
    : Effect.succeed(value)
}

/**
 * The implementation of one @effect/ai tool: its toolkit handler (with the context captured by the toolkit's layer,
 * the caller's over it, and `CurrentToolCall`), its success encoded by the tool's success schema, its failure by the
 * failure schema and returned as the error result (`isError`), both checked to be strict JSON before T2 records them.
 */
const implementationOf = (tool: AiTool.Any, entry: HandlerEntry) => {
  const encodeSuccess = Schema.encodeUnknownEither(tool.successSchema as Schema.Schema<unknown, unknown>)
  const encodeFailure = Schema.encodeUnknownEither(tool.failureSchema as Schema.Schema<unknown, unknown>)
  return (
    params: unknown,
    context: Tool.ToolContext & { readonly callId?: string }
  ): Effect.Effect<unknown, Tool.ToolErrorResult | Tool.ToolOutcomeUnknown> =>
    entry.handler(params).pipe(
      Effect.mapInputContext((input: Context.Context<never>) => Context.merge(entry.context, input)),
      Effect.provideService(
        CurrentToolCall,
        Option.some({ ...context, callId: context.callId ?? "", toolName: tool.name })
      ),
      Effect.matchEffect({
        onSuccess: (result) => {
          const encoded = encodeSuccess(result)
          return Either.isRight(encoded)
            ? strictJson(encoded.right, "result", tool.name)
            : Effect.fail(new Tool.ToolErrorResult({
              result: { error: "result_not_encodable", message: `${tool.name}'s result does not encode: ${parseMessage(encoded.left)}` }
            }))
        },
        onFailure: (failure): Effect.Effect<never, Tool.ToolErrorResult | Tool.ToolOutcomeUnknown> => {
          // An outcome the handler cannot tell: no T2 (ToolRuntime), so it is not encoded as an error result.
          if (failure instanceof Tool.ToolOutcomeUnknown) return Effect.fail(failure)
          const encoded = encodeFailure(failure)
          return Either.isRight(encoded)
            ? Effect.flatMap(strictJson(encoded.right, "failure", tool.name), (result) => Effect.fail(new Tool.ToolErrorResult({ result })))
            : Effect.fail(new Tool.ToolErrorResult({
              result: { error: "failure_not_encodable", message: `${tool.name}'s failure does not encode: ${parseMessage(encoded.left)}` }
            }))
        }
      })
    )
}

/**
 * One @effect/ai tool as our Tool: same name, its params schema as the args schema, its handler as the implementation.
 *
 * @since 0.1.0
 * @category ai
 */
export const toTool = <P, R>(tool: AiTool.Any, entry: HandlerEntry, override?: Override<P, R>): Tool.Tool<any, any, any, R> => {
  const args = tool.parametersSchema as unknown as Schema.Schema<any, any, never>
  const implementation = implementationOf(tool, entry)
  if (override?.recoveryMode === "reconcilable") {
    return Tool.make({
      name: tool.name,
      args,
      recoveryMode: "reconcilable",
      ...(override.preflight !== undefined ? { preflight: override.preflight } : {}),
      evidence: override.evidence,
      observe: override.observe,
      implementation
    })
  }
  const provenance = Context.getOption(tool.annotations, Provenance)
  return Tool.make({
    name: tool.name,
    args,
    recoveryMode: override?.recoveryMode ?? recoveryModeOf(tool),
    ...(Option.isSome(provenance) ? { provenance: provenance.value } : {}),
    ...(override?.preflight !== undefined ? { preflight: override.preflight } : {}),
    implementation
  })
}

/** A tool of the toolkit has no handler in the context (a provider-defined tool, run by the provider, is left out). */
const handlerOf = (context: Context.Context<never>, tool: AiTool.Any): HandlerEntry | undefined =>
  context.unsafeMap.get(tool.id) as HandlerEntry | undefined

/**
 * The toolkit's tools as our Tool definitions, each calling the handler the toolkit's layer provides (the same one a
 * plain `generateText` would call), with its recovery mode from `overrides` or its annotations. Provider-defined tools
 * (executed by the provider) are left out. Phase 3's reconcile re-runs `read_only` and `idempotent` tools through these.
 *
 * @since 0.1.0
 * @category ai
 */
export const toTools = <Tools extends Record<string, AiTool.Any>, R = never>(
  toolkit: Toolkit.Toolkit<Tools>,
  overrides?: Overrides<Tools, R>
): Effect.Effect<ReadonlyArray<Tool.Tool<any, any, any, R>>, never, AiTool.HandlersFor<Tools>> =>
  Effect.map(Effect.context<AiTool.HandlersFor<Tools>>(), (context) => {
    const tools: Array<Tool.Tool<any, any, any, R>> = []
    for (const tool of Object.values(toolkit.tools) as ReadonlyArray<AiTool.Any>) {
      if (AiTool.isProviderDefined(tool)) continue
      const entry = handlerOf(context as Context.Context<never>, tool)
      if (entry === undefined) continue
      tools.push(toTool(tool, entry, (overrides as Record<string, Override<unknown, R> | undefined> | undefined)?.[tool.name]))
    }
    return tools
  })
