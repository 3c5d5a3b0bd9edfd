// The recovery mode of an MCP tool (docs/mcp.md): from the server's own behaviour hints (MCP `ToolAnnotations`), only
// when the host trusts the server; a host override per tool always wins. Pure: no client, no clock.
import type { RecoveryMode } from "../Domain/RuntimeEvent.js"

/**
 * The four behaviour hints of an MCP tool, as the server sent them (absent: the spec's default applies).
 *
 * @since 0.1.0
 * @category models
 */
export interface McpHints {
  readonly readOnlyHint?: boolean
  readonly destructiveHint?: boolean
  readonly idempotentHint?: boolean
  readonly openWorldHint?: boolean
}

/**
 * The modes an MCP tool can be given (a `reconcilable` one needs an observation no MCP server declares).
 *
 * @since 0.1.0
 * @category models
 */
export type McpRecoveryMode = Exclude<RecoveryMode, "reconcilable">

/**
 * Why a tool got its mode: the host's override, the trusted server's hints, or the untrusted rule.
 *
 * @since 0.1.0
 * @category models
 */
export type ModeSource = "override" | "annotations" | "untrusted"

/**
 * A tool's mode and why.
 *
 * @since 0.1.0
 * @category models
 */
export interface ModeChoice {
  readonly recoveryMode: McpRecoveryMode
  readonly modeFrom: ModeSource
}

/**
 * Only the four hints, each kept only when it is a boolean (a server may send anything).
 *
 * @since 0.1.0
 * @category mcp
 */
export const hintsOf = (annotations: unknown): McpHints => {
  const hints: { -readonly [K in keyof McpHints]?: boolean } = {}
  if (typeof annotations !== "object" || annotations === null) return hints
  const a = annotations as Record<string, unknown>
  for (const key of ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] as const) {
    if (typeof a[key] === "boolean") hints[key] = a[key] as boolean
  }
  return hints
}

/**
 * The mode the hints give, with the MCP defaults (not read-only, destructive, not idempotent, open world):
 * `readOnlyHint: true` → `read_only`; else `idempotentHint: true` → `idempotent`; else `never_auto_retry`.
 * `destructiveHint` and `openWorldHint` never make a tool re-runnable.
 *
 * @since 0.1.0
 * @category mcp
 */
export const fromHints = (hints: McpHints): McpRecoveryMode =>
  hints.readOnlyHint === true ? "read_only" : hints.idempotentHint === true ? "idempotent" : "never_auto_retry"

/**
 * A tool's mode: the host's `override` when given; else, from a `trusted` server, its hints' mode (`fromHints`);
 * else `never_auto_retry` (the MCP specification: hints from an untrusted server must not be relied on).
 *
 * @since 0.1.0
 * @category mcp
 */
export const choose = (hints: McpHints, options: { readonly trusted: boolean; readonly override?: McpRecoveryMode | undefined }): ModeChoice =>
  options.override !== undefined
    ? { recoveryMode: options.override, modeFrom: "override" }
    : options.trusted
    ? { recoveryMode: fromHints(hints), modeFrom: "annotations" }
    : { recoveryMode: "never_auto_retry", modeFrom: "untrusted" }
