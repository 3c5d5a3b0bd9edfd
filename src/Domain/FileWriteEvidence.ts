// The built-in file-write tool's wire shapes (spec 05): its args, the evidence recorded at preflight in
// `ToolDispatched.evidence`, its result, and the name of the temporary file one operation writes.
import * as Schema from "effect/Schema"
import { Digest } from "./Digest.js"
import { WellFormedString } from "./Ids.js"
import { NonNegativeSafeInt } from "./RuntimeEvent.js"

/** The `tool` field of file-write evidence: what `reconcile` looks for to observe an operation without host tools. */
export const FILE_WRITE_EVIDENCE_TOOL = "runtime-resume/file-write@1"

/** The default tool name of `fileWriteTool`. */
export const DEFAULT_NAME = "write_file"

/** The args: a path relative to the tool's root, and the whole new content (well-formed Unicode, written as UTF-8). */
export const FileWriteArgs = Schema.Struct({
  path: WellFormedString.pipe(Schema.minLength(1)),
  content: WellFormedString
})
/** The args of the file-write tool. */
export type FileWriteArgs = typeof FileWriteArgs.Type

/**
 * The evidence recorded at preflight: the root's real path, the target's path relative to it (`/`-separated, through
 * the parent's real path), the digest of the target's bytes before the write (`null` when absent) and of the content.
 */
export const FileWriteEvidence = Schema.Struct({
  tool: Schema.Literal(FILE_WRITE_EVIDENCE_TOOL),
  root: Schema.String.pipe(Schema.minLength(1)),
  path: Schema.String.pipe(Schema.minLength(1)),
  before: Schema.NullOr(Digest),
  after: Digest
})
/** The evidence recorded at preflight. */
export type FileWriteEvidence = typeof FileWriteEvidence.Type

/** The result: the normalized relative path, the number of bytes written and their digest. */
export const FileWriteResult = Schema.Struct({
  path: Schema.String,
  bytes: NonNegativeSafeInt,
  sha256: Digest
})
/** The result of the file-write tool. */
export type FileWriteResult = typeof FileWriteResult.Type

/** The temporary file an operation writes beside its target: `.<file name>.<operationId>.tmp`. */
export const tempFileName = (fileName: string, operationId: string): string => `.${fileName}.${operationId}.tmp`
