// A tool's fingerprint as T1 recorded it (docs/mcp.md, docs/spec/04-continuation.md's catalog gate): a tool whose provenance carries
// `{ name, fingerprint }` (an MCP tool: its server, name, hints, description and input schema) is checked against the
// host's fingerprint at continuation.

/**
 * What a dispatch's recorded evidence says of its tool's fingerprint, and where the tool came from when it says so.
 *
 * @since 0.1.0
 * @category models
 */
export interface RecordedFingerprint {
  readonly name: string
  readonly fingerprint: string
  /** An MCP tool's server and tool as recorded (`MCP server <name> <version>, tool <tool>`), for a person to read. */
  readonly source?: string
}

/**
 * The tool name and fingerprint a dispatch's recorded evidence carries, when it carries both (read back: checked).
 *
 * @since 0.1.0
 * @category models
 */
export const fromEvidence = (evidence: unknown): RecordedFingerprint | undefined => {
  if (typeof evidence !== "object" || evidence === null) return undefined
  const e = evidence as { readonly name?: unknown; readonly fingerprint?: unknown; readonly server?: unknown; readonly mcpTool?: unknown }
  if (typeof e.name !== "string" || typeof e.fingerprint !== "string") return undefined
  const server = typeof e.server === "object" && e.server !== null ? e.server as { readonly name?: unknown; readonly version?: unknown } : undefined
  const source = server !== undefined && typeof server.name === "string" && typeof server.version === "string" && typeof e.mcpTool === "string"
    ? `MCP server ${server.name} ${server.version}, tool ${e.mcpTool}`
    : undefined
  return { name: e.name, fingerprint: e.fingerprint, ...(source !== undefined ? { source } : {}) }
}
