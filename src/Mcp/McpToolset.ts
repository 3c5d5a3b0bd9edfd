// An MCP server's tools as our Tool definitions (docs/mcp.md): each call through ToolRuntime (docs/spec/03-tool-boundary.md) becomes one
// `tools/call`, its mode chosen by McpRecoveryMode and recorded at T1 with the server and hints (McpProvenance).
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import type { RequestOptions } from "@modelcontextprotocol/sdk/shared/protocol.js"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Tool from "../Domain/Tool.js"
import { McpListFailed, McpNotConnected } from "./McpErrors.js"
import * as McpProvenance from "./McpProvenance.js"
import * as McpRecoveryMode from "./McpRecoveryMode.js"

/**
 * What the entry needs of a connected MCP client (the SDK's `Client`, over stdio or Streamable HTTP).
 *
 * @since 0.1.0
 * @category models
 */
export type McpClient = Pick<Client, "getServerVersion" | "listTools" | "callTool">

/**
 * The `_meta` key under which an idempotent call sends the key T1 recorded (MCP `_meta` naming: prefix/name).
 *
 * @since 0.1.0
 * @category constants
 */
export const IDEMPOTENCY_KEY_META = "runtime-resume/idempotency-key"

/**
 * How a server's tools are loaded.
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolsetOptions {
  /**
   * Whether the host trusts this server's annotations (default `false`). Untrusted: every tool is `never_auto_retry`
   * whatever its hints say (the MCP specification: hints from untrusted servers must not be relied on).
   */
  readonly trusted?: boolean
  /** A recovery mode per tool (by its name on the server), which always wins over the hints and the trust rule. */
  readonly overrides?: Readonly<Record<string, McpRecoveryMode.McpRecoveryMode>>
  /** A prefix for our tool names (for example `"files_"`), so that two servers' tools cannot collide. */
  readonly prefix?: string
  /** Options of every `tools/call` and `tools/list` (a `timeout`: past it, a call's outcome is unknown). */
  readonly requestOptions?: Omit<RequestOptions, "signal">
}

/**
 * One server tool as the toolset took it: its names, description, input schema, hints and mode.
 *
 * @since 0.1.0
 * @category models
 */
export interface McpToolDescriptor {
  /** Our tool's name (the prefix, then the server's name for it). */
  readonly name: string
  /** The tool's name on the server. */
  readonly mcpTool: string
  readonly description: string | undefined
  /** The tool's `inputSchema` (JSON Schema): the recorded args are the JSON object sent as `arguments`. */
  readonly inputSchema: Record<string, unknown>
  readonly hints: McpRecoveryMode.McpHints
  readonly choice: McpRecoveryMode.ModeChoice
  /** What T1 records (`ToolDispatched.evidence`). */
  readonly provenance: McpProvenance.McpProvenance
}

/**
 * A server's tools, loaded once from `tools/list`.
 *
 * @since 0.1.0
 * @category models
 */
export interface McpToolset {
  readonly server: McpProvenance.McpServerInfo
  readonly trusted: boolean
  readonly descriptors: ReadonlyArray<McpToolDescriptor>
  /** Our Tool definitions, for `ToolRuntime.run` (or the host's own tool list). */
  readonly tools: ReadonlyArray<Tool.PlainTool<Record<string, unknown>, Record<string, unknown>, Tool.ToolErrorResult | Tool.ToolOutcomeUnknown>>
  /** One `tools/call` for a descriptor, with the idempotency key T1 recorded (the tools' implementation). */
  readonly call: (
    descriptor: McpToolDescriptor,
    args: Record<string, unknown>,
    idempotencyKey: string | undefined
  ) => Effect.Effect<unknown, Tool.ToolErrorResult | Tool.ToolOutcomeUnknown>
}

/**
 * The args of an MCP tool: a JSON object, described by the server's input schema (the server validates it).
 *
 * @since 0.1.0
 * @category mcp
 */
export const argsSchema = (inputSchema: Record<string, unknown>) =>
  Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({ jsonSchema: inputSchema })

const messageOf = (error: unknown): string =>
  error instanceof Error ? error.message : typeof error === "string" ? error : String(error)

const codeOf = (error: unknown): number | undefined =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "number" ? error.code : undefined

// The SDK's McpError codes for a request whose answer never came (the request may have reached the server).
const CONNECTION_CLOSED = -32000
const REQUEST_TIMEOUT = -32001

/**
 * A rejected `tools/call`: an `McpError` the server answered (a JSON-RPC error: unknown tool, invalid params, …) is
 * the call's error result (`{ error: "mcp_protocol_error", server, tool, code, message }`, committed at T2); a closed
 * connection, a timeout or a transport failure is `ToolOutcomeUnknown` (no T2: the server may have run the tool).
 *
 * @since 0.1.0
 * @category mcp
 */
export const classifyFailure = (
  server: McpProvenance.McpServerInfo,
  descriptor: Pick<McpToolDescriptor, "name" | "mcpTool">,
  error: unknown
): Tool.ToolErrorResult | Tool.ToolOutcomeUnknown => {
  const code = codeOf(error)
  const isMcpError = error instanceof Error && error.name === "McpError"
  if (isMcpError && code !== undefined && code !== CONNECTION_CLOSED && code !== REQUEST_TIMEOUT) {
    return new Tool.ToolErrorResult({
      result: { error: "mcp_protocol_error", server: server.name, tool: descriptor.mcpTool, code, message: messageOf(error) }
    })
  }
  const reason = code === CONNECTION_CLOSED ? "connection_closed" : code === REQUEST_TIMEOUT ? "request_timeout" : "transport_failed"
  return new Tool.ToolOutcomeUnknown({
    toolName: descriptor.name,
    reason,
    message: `the call to ${descriptor.mcpTool} on MCP server ${server.name} ${server.version} broke (${reason}: ${messageOf(error)}); ` +
      "the server may have run it: the operation is indeterminate, see runtime-resume inspect"
  })
}

// A result from the wire, as strict JSON (the SDK's parse may leave `undefined` members, which JSON drops).
const asJson = (value: unknown): unknown => JSON.parse(JSON.stringify(value))

const listAll = (client: McpClient, serverName: string, requestOptions: RequestOptions | undefined) =>
  Effect.tryPromise({
    try: async (signal) => {
      const tools: Array<Awaited<ReturnType<McpClient["listTools"]>>["tools"][number]> = []
      let cursor: string | undefined
      do {
        const page = await client.listTools(cursor !== undefined ? { cursor } : undefined, { ...requestOptions, signal })
        tools.push(...page.tools)
        cursor = page.nextCursor
      } while (cursor !== undefined)
      return tools
    },
    catch: (error) => {
      const code = codeOf(error)
      return new McpListFailed({
        server: serverName,
        ...(code !== undefined ? { code } : {}),
        message: `tools/list on MCP server ${serverName} failed: ${messageOf(error)}`
      })
    }
  })

const serverOf = (client: McpClient): Effect.Effect<McpProvenance.McpServerInfo, McpNotConnected> => {
  const info = client.getServerVersion()
  return info === undefined
    ? Effect.fail(new McpNotConnected({ message: "the MCP client is not connected (no serverInfo): await client.connect(transport) first" }))
    : Effect.succeed({ name: info.name, version: info.version })
}

/**
 * Loads a connected client's tools (`tools/list`, every page) as our Tool definitions: same name (after `prefix`),
 * description, args = the JSON object the model sends (the server's `inputSchema` as its JSON Schema), the mode from
 * McpRecoveryMode (override, else trusted hints, else `never_auto_retry`), and the provenance T1 records. Each
 * implementation sends one `tools/call` (an `idempotent` one with `_meta["runtime-resume/idempotency-key"]` = the key
 * T1 recorded); `isError: true` is a failed response, a server's JSON-RPC error an error result, a broken call
 * `ToolOutcomeUnknown`. The list is the one seen now: load again after `notifications/tools/list_changed`.
 *
 * @since 0.1.0
 * @category mcp
 */
export const load = (client: McpClient, options: ToolsetOptions = {}): Effect.Effect<McpToolset, McpNotConnected | McpListFailed> =>
  Effect.gen(function*() {
    const server = yield* serverOf(client)
    const trusted = options.trusted === true
    const listed = yield* listAll(client, server.name, options.requestOptions)
    const descriptors = listed.map((t): McpToolDescriptor => {
      const hints = McpRecoveryMode.hintsOf(t.annotations)
      const choice = McpRecoveryMode.choose(hints, { trusted, override: options.overrides?.[t.name] })
      const name = `${options.prefix ?? ""}${t.name}`
      return {
        name,
        mcpTool: t.name,
        description: t.description,
        inputSchema: t.inputSchema as Record<string, unknown>,
        hints,
        choice,
        provenance: McpProvenance.make({
          server,
          name,
          mcpTool: t.name,
          hints,
          listed: { description: t.description, inputSchema: asJson(t.inputSchema) },
          trusted,
          choice
        })
      }
    })
    const requestOptions = options.requestOptions
    const call: McpToolset["call"] = (descriptor, args, idempotencyKey) =>
      Effect.tryPromise({
        try: (signal) =>
          client.callTool(
            {
              name: descriptor.mcpTool,
              arguments: args,
              ...(idempotencyKey !== undefined ? { _meta: { [IDEMPOTENCY_KEY_META]: idempotencyKey } } : {})
            },
            undefined,
            { ...requestOptions, signal }
          ),
        catch: (error) => classifyFailure(server, descriptor, error)
      }).pipe(
        Effect.flatMap((result) =>
          result.isError === true ? Effect.fail(new Tool.ToolErrorResult({ result: asJson(result) })) : Effect.succeed(asJson(result))
        )
      )
    const tools = descriptors.map((d) =>
      Tool.make({
        name: d.name,
        args: argsSchema(d.inputSchema),
        recoveryMode: d.choice.recoveryMode,
        provenance: d.provenance,
        implementation: (args: Record<string, unknown>, context: Tool.ToolContext) => call(d, args, context.idempotencyKey)
      })
    )
    return { server, trusted, descriptors, tools, call }
  })

/**
 * What a server lists now: our tool names and each one's fingerprint (for the continuation gate, docs/spec/04-continuation.md).
 *
 * @since 0.1.0
 * @category models
 */
export interface McpCatalog {
  readonly names: ReadonlyArray<string>
  readonly fingerprints: Readonly<Record<string, string>>
}

/**
 * The server's catalog now (`tools/list` again, never the snapshot `load` took): the host's continuation inspector
 * reports it, so a replayed tool that is gone, or whose hints, description or input schema changed since T1 recorded
 * them, parks the continuation with `tool_catalog_mismatch` (docs/spec/04-continuation.md; `HostSupplied.toolFingerprints`). An AiHost
 * without this reports the fingerprints of the toolset it was built with (`AiHostOptions.toolFingerprints`).
 *
 * @since 0.1.0
 * @category mcp
 */
export const catalog = (client: McpClient, options: Pick<ToolsetOptions, "prefix" | "requestOptions"> = {}): Effect.Effect<McpCatalog, McpNotConnected | McpListFailed> =>
  Effect.gen(function*() {
    const server = yield* serverOf(client)
    const listed = yield* listAll(client, server.name, options.requestOptions)
    const names: Array<string> = []
    const fingerprints: Record<string, string> = {}
    for (const t of listed) {
      const name = `${options.prefix ?? ""}${t.name}`
      names.push(name)
      fingerprints[name] = McpProvenance.fingerprint(server.name, t.name, McpRecoveryMode.hintsOf(t.annotations), {
        description: t.description,
        inputSchema: asJson(t.inputSchema)
      })
    }
    return { names, fingerprints }
  })
