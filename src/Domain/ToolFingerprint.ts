// A tool's fingerprint as T1 recorded it (docs/mcp.md, spec 04's catalog gate): a tool whose provenance carries
// `{ name, fingerprint }` (an MCP tool: its server, name and hints) is checked against the host's fingerprint at continuation.

/** The tool name and fingerprint a dispatch's recorded evidence carries, when it carries both (read back: checked). */
export const fromEvidence = (evidence: unknown): { readonly name: string; readonly fingerprint: string } | undefined => {
  if (typeof evidence !== "object" || evidence === null) return undefined
  const e = evidence as { readonly name?: unknown; readonly fingerprint?: unknown }
  return typeof e.name === "string" && typeof e.fingerprint === "string" ? { name: e.name, fingerprint: e.fingerprint } : undefined
}
