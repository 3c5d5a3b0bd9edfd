// The name of a one-pass SQLite import's draft folder (docs/stores.md "SQLite"; src/Workspace/ImportSqliteOnePass.ts):
// `.<name>.import-<pid>-<16 hex>.partial`, beside the workspace `<name>` in its parent folder. No store reads it.

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/**
 * The pattern of a one-pass SQLite import's draft folder for the workspace named `name`, its first group the pid of
 * the import that writes it.
 *
 * @since 0.1.0
 * @category constants
 */
export const draftPattern = (name: string): RegExp =>
  new RegExp(`^\\.${escapeRegExp(name)}\\.import-([0-9]+)-[0-9a-f]{16}\\.partial$`)
