// `runtime-resume/mcp`: any Model Context Protocol server's tools through the tool boundary (docs/mcp.md), behind its
// own entry so that hosts without MCP never load it; `@modelcontextprotocol/sdk` (an optional peer) gives the `Client`.
/** A connected client's tools as our Tool definitions, each call one `tools/call` through ToolRuntime; the catalog. */
export * as McpToolset from "./Mcp/McpToolset.js"
/** The same tools as @effect/ai tools and their handlers, for `runtime-resume/ai` hosts. */
export * as McpAiToolkit from "./Mcp/McpAiToolkit.js"
/** The recovery mode from the server's annotations: the mapping, the trust rule, the host override. */
export * as McpRecoveryMode from "./Mcp/McpRecoveryMode.js"
/** What T1 records about an MCP tool (server, hints, trust, mode, fingerprint). */
export * as McpProvenance from "./Mcp/McpProvenance.js"
/** The entry's typed errors. */
export * as McpErrors from "./Mcp/McpErrors.js"
