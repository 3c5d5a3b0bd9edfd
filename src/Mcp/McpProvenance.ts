// What T1 records about an MCP tool (docs/mcp.md): the server (its `serverInfo` name and version), the tool, its hints
// as seen at dispatch, the trust and the mode chosen, and a fingerprint a later continuation compares (docs/spec/04-continuation.md).
import * as CanonicalJson from "../Domain/CanonicalJson.js"
import * as Digest from "../Domain/Digest.js"
import type { McpHints, ModeChoice } from "./McpRecoveryMode.js"

/**
 * The `tool` field of an MCP tool's recorded provenance (its format, versioned).
 *
 * @since 0.1.0
 * @category constants
 */
export const PROVENANCE_TOOL = "runtime-resume/mcp@1"

/**
 * The server as its `initialize` answer named it.
 *
 * @since 0.1.0
 * @category models
 */
export interface McpServerInfo {
  readonly name: string
  readonly version: string
}

/**
 * What T1 records in `ToolDispatched.evidence` for an MCP tool (strict JSON).
 *
 * @since 0.1.0
 * @category models
 */
export interface McpProvenance {
  readonly tool: typeof PROVENANCE_TOOL
  readonly server: McpServerInfo
  /** Our tool's name (the host's prefix, then the server's name for it). */
  readonly name: string
  /** The tool's name on the server. */
  readonly mcpTool: string
  /** The four hints as the server listed them (absent ones left out). */
  readonly annotations: McpHints
  readonly trusted: boolean
  readonly recoveryMode: ModeChoice["recoveryMode"]
  readonly modeFrom: ModeChoice["modeFrom"]
  /**
   * `sha256:` of the canonical `{ server: name, tool, annotations, description, inputSchema }`: what a continuation
   * compares (Domain/ToolFingerprint).
   */
  readonly fingerprint: string
}

/**
 * What else of a listed tool its fingerprint covers: what the model was shown of it (its description and input schema).
 *
 * @since 0.1.0
 * @category models
 */
export interface McpListedTool {
  readonly description: string | undefined
  readonly inputSchema: unknown
}

/**
 * The fingerprint of a tool as a server lists it: the server's name, the tool's name, its hints, its description and
 * its input schema (not the server's version: an upgrade that keeps the tool as listed keeps the tool). A continuation
 * whose host lists another fingerprint for a dispatched tool parks with `tool_catalog_mismatch` (docs/spec/04-continuation.md, docs/mcp.md).
 *
 * @since 0.1.0
 * @category mcp
 */
export const fingerprint = (serverName: string, mcpTool: string, hints: McpHints, listed: McpListedTool): string => {
  const shape = {
    server: serverName,
    tool: mcpTool,
    annotations: hints,
    ...(listed.description !== undefined ? { description: listed.description } : {}),
    inputSchema: listed.inputSchema ?? null
  }
  const encoded = CanonicalJson.encode(shape)
  // A schema past the canonical encoder's limits (depth, size): a digest of its plain JSON, the same for the same listing.
  return Digest.ofText(encoded._tag === "Ok" ? encoded.text : JSON.stringify(shape))
}

/**
 * The provenance T1 records for one tool.
 *
 * @since 0.1.0
 * @category mcp
 */
export const make = (input: {
  readonly server: McpServerInfo
  readonly name: string
  readonly mcpTool: string
  readonly hints: McpHints
  readonly listed: McpListedTool
  readonly trusted: boolean
  readonly choice: ModeChoice
}): McpProvenance => ({
  tool: PROVENANCE_TOOL,
  server: { name: input.server.name, version: input.server.version },
  name: input.name,
  mcpTool: input.mcpTool,
  annotations: input.hints,
  trusted: input.trusted,
  recoveryMode: input.choice.recoveryMode,
  modeFrom: input.choice.modeFrom,
  fingerprint: fingerprint(input.server.name, input.mcpTool, input.hints, input.listed)
})

/**
 * Where an MCP tool's call was sent, as `inspect` and the console name it: "MCP server <name> <version>, tool <tool>".
 *
 * @since 0.1.0
 * @category mcp
 */
export const sentTo = (provenance: { readonly server: McpServerInfo; readonly mcpTool: string }): string =>
  `MCP server ${provenance.server.name} ${provenance.server.version}, tool ${provenance.mcpTool}`

/**
 * A recorded evidence value as an MCP provenance, when it is one (read back from the ledger: checked, not trusted).
 *
 * @since 0.1.0
 * @category mcp
 */
export const read = (evidence: unknown): { readonly fingerprint: string; readonly server: McpServerInfo; readonly mcpTool: string } | undefined => {
  if (typeof evidence !== "object" || evidence === null) return undefined
  const e = evidence as Record<string, unknown>
  if (e.tool !== PROVENANCE_TOOL || typeof e.fingerprint !== "string" || typeof e.mcpTool !== "string") return undefined
  const server = e.server as Record<string, unknown> | null | undefined
  if (typeof server !== "object" || server === null || typeof server.name !== "string" || typeof server.version !== "string") return undefined
  return { fingerprint: e.fingerprint, server: { name: server.name, version: server.version }, mcpTool: e.mcpTool }
}
