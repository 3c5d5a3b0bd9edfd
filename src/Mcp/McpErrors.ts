// The typed errors of the MCP entry (docs/mcp.md): a client that is not connected, a tool list that could not be read.
// A call's own failures are not here: an answer is a T2 response, a broken call is `Tool.ToolOutcomeUnknown`.
import * as Schema from "effect/Schema"

/**
 * The client has not completed `initialize` (no `serverInfo`): connect it before loading its tools.
 *
 * @since 0.1.0
 * @category errors
 */
export class McpNotConnected extends Schema.TaggedError<McpNotConnected>()("McpNotConnected", {
  message: Schema.String
}) {}

/**
 * `tools/list` failed (the server's error or the transport's); `code` is the JSON-RPC code when the server answered.
 *
 * @since 0.1.0
 * @category errors
 */
export class McpListFailed extends Schema.TaggedError<McpListFailed>()("McpListFailed", {
  server: Schema.String,
  code: Schema.optionalWith(Schema.Number, { exact: true }),
  message: Schema.String
}) {}
