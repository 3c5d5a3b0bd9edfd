// The built-in file-write tool's wire shapes (docs/spec/05-reconciliation.md): its args, the evidence recorded at preflight in
// `ToolDispatched.evidence`, its result, and the name of the temporary file one operation writes.
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { Digest } from "./Digest.js"
import { WellFormedString } from "./Ids.js"
import { NonNegativeSafeInt } from "./RuntimeEvent.js"

/**
 * The `tool` field of file-write evidence: what `reconcile` looks for to observe an operation without host tools.
 *
 * @since 0.1.0
 * @category constants
 */
export const FILE_WRITE_EVIDENCE_TOOL = "runtime-resume/file-write@1"

/**
 * The default tool name of `fileWriteTool`.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_NAME = "write_file"

/**
 * The args: a path relative to the tool's root, and the whole new content (well-formed Unicode, written as UTF-8).
 *
 * @since 0.1.0
 * @category schemas
 */
export const FileWriteArgs = Schema.Struct({
  path: WellFormedString.pipe(Schema.minLength(1)),
  content: WellFormedString
})
/**
 * The args of the file-write tool.
 *
 * @since 0.1.0
 * @category models
 */
export type FileWriteArgs = typeof FileWriteArgs.Type

/**
 * Why `path` is not a normal relative path under a root (docs/spec/05-reconciliation.md, "Built-in file-write tool"), or `undefined` when it
 * is one: not empty, not absolute, `/`-separated components that are plain names (none empty, `.` or `..`), no NUL and
 * no backslash (which another platform reads as a separator). Checked at T1, at import and on every read, so the
 * reconciler never joins a recorded path that could leave its root.
 *
 * @since 0.1.0
 * @category models
 */
export const relativePathProblem = (path: string): string | undefined => {
  if (path.length === 0) return "it is empty"
  if (path.includes("\u0000")) return "it holds a NUL character"
  if (path.includes("\\")) return "it holds a backslash"
  if (path.startsWith("/")) return "it is absolute"
  for (const part of path.split("/")) {
    if (part === "") return "it has an empty component (a leading, doubled or trailing /)"
    if (part === "." || part === "..") return `it has a ${part} component`
  }
  return undefined
}

/**
 * Why `root` is not a normal absolute path (the real path of a folder, as T1 records it), or `undefined` when it is
 * one: starts with `/`, no NUL, backslash, empty (other than the root `/` itself), `.` or `..` component.
 *
 * @since 0.1.0
 * @category models
 */
export const absoluteRootProblem = (root: string): string | undefined => {
  if (!root.startsWith("/")) return "it is not absolute"
  if (root === "/") return undefined
  const problem = relativePathProblem(root.slice(1))
  return problem === undefined ? undefined : problem
}

/**
 * A recorded target path: normal and relative (`relativePathProblem`).
 *
 * @since 0.1.0
 * @category schemas
 */
export const RelativeFilePath = Schema.String.pipe(
  Schema.filter((s) => {
    const problem = relativePathProblem(s)
    return problem === undefined ? true : `the path ${JSON.stringify(s)} is not a normal relative path: ${problem}`
  })
)

/**
 * A recorded root: a normal absolute path (`absoluteRootProblem`).
 *
 * @since 0.1.0
 * @category schemas
 */
export const AbsoluteRootPath = Schema.String.pipe(
  Schema.filter((s) => {
    const problem = absoluteRootProblem(s)
    return problem === undefined ? true : `the root ${JSON.stringify(s)} is not a normal absolute path: ${problem}`
  })
)

/**
 * The evidence recorded at preflight: the root's real path, the target's path relative to it (`/`-separated, through
 * the parent's real path), the digest of the target's bytes before the write (`null` when absent) and of the content.
 *
 * @since 0.1.0
 * @category schemas
 */
export const FileWriteEvidence = Schema.Struct({
  tool: Schema.Literal(FILE_WRITE_EVIDENCE_TOOL),
  root: AbsoluteRootPath,
  path: RelativeFilePath,
  before: Schema.NullOr(Digest),
  after: Digest
})
/**
 * The evidence recorded at preflight.
 *
 * @since 0.1.0
 * @category models
 */
export type FileWriteEvidence = typeof FileWriteEvidence.Type

/**
 * The result: the normalized relative path, the number of bytes written and their digest.
 *
 * @since 0.1.0
 * @category schemas
 */
export const FileWriteResult = Schema.Struct({
  path: Schema.String,
  bytes: NonNegativeSafeInt,
  sha256: Digest
})
/**
 * The result of the file-write tool.
 *
 * @since 0.1.0
 * @category models
 */
export type FileWriteResult = typeof FileWriteResult.Type

/**
 * The temporary file an operation writes beside its target: `.<file name>.<operationId>.tmp`.
 *
 * @since 0.1.0
 * @category models
 */
export const tempFileName = (fileName: string, operationId: string): string => `.${fileName}.${operationId}.tmp`

/**
 * Why `evidence` that names `runtime-resume/file-write@1` cannot be recorded or trusted (docs/spec/05-reconciliation.md: its root a normal
 * absolute path, its path normal and relative, the rest of its shape), or `undefined` when it is sound or names
 * another tool (other tools' evidence is theirs to check).
 *
 * @since 0.1.0
 * @category schemas
 */
export const fileWriteEvidenceProblem = (evidence: unknown): string | undefined => {
  if (typeof evidence !== "object" || evidence === null || !("tool" in evidence)) return undefined
  if (evidence.tool !== FILE_WRITE_EVIDENCE_TOOL) return undefined
  const fields = evidence as { readonly root?: unknown; readonly path?: unknown }
  const named = (what: string, value: unknown, problem: string | undefined) =>
    problem === undefined ? undefined : `${FILE_WRITE_EVIDENCE_TOOL} evidence: the ${what} ${JSON.stringify(value)} is not ${
      what === "path" ? "a normal relative path" : "a normal absolute path"
    } (${problem})`
  const pathProblem = typeof fields.path === "string" ? named("path", fields.path, relativePathProblem(fields.path)) : undefined
  if (pathProblem !== undefined) return pathProblem
  const rootProblem = typeof fields.root === "string" ? named("root", fields.root, absoluteRootProblem(fields.root)) : undefined
  if (rootProblem !== undefined) return rootProblem
  const decoded = Schema.decodeUnknownEither(FileWriteEvidence)(evidence)
  if (decoded._tag === "Right") return undefined
  // One line: the message may reach a terminal.
  return `${FILE_WRITE_EVIDENCE_TOOL} evidence is not sound: ${ParseResult.TreeFormatter.formatErrorSync(decoded.left).replace(/\s+/g, " ")}`
}
