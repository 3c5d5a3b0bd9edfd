// The built-in reconcilable file-write tool of docs/spec/05-reconciliation.md: path rules at preflight, evidence (the before and after
// digests), an atomic write through a per-operation temp file, and an observation that never follows a link.
import type * as PlatformError from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Digest from "../Domain/Digest.js"
import {
  absoluteRootProblem,
  DEFAULT_NAME,
  FILE_WRITE_EVIDENCE_TOOL,
  FileWriteArgs,
  FileWriteEvidence,
  fileWriteEvidenceProblem,
  type FileWriteResult,
  relativePathProblem,
  tempFileName
} from "../Domain/FileWriteEvidence.js"
import * as Observation from "../Domain/Observation.js"
import * as Tool from "../Domain/Tool.js"
import { NoFollowFileSystem } from "../Services/NoFollowFileSystem.js"

/**
 * What the file-write tool needs: FileSystem, Path and the no-follow operations (`NodeContext.layer` + `NodeNoFollowFileSystem.layer`).
 *
 * @since 0.1.0
 * @category models
 */
export type FileWriteRequirements = FileSystem.FileSystem | Path.Path | NoFollowFileSystem

/**
 * The implementation refused or failed to write (its T2 response is an error result with this message).
 *
 * @since 0.1.0
 * @category errors
 */
export class FileWriteFailed extends Schema.TaggedError<FileWriteFailed>()("FileWriteFailed", {
  path: Schema.String,
  message: Schema.String
}) {}

/**
 * The labels the implementation hits `ToolContext.failpointAt` with: after the temp file's fsync, and after the folder's.
 *
 * @since 0.1.0
 * @category constants
 */
export const FAILPOINT_BEFORE_RENAME = "file_write:before_rename"
/**
 * The label after the rename and the folder's fsync.
 *
 * @since 0.1.0
 * @category constants
 */
export const FAILPOINT_AFTER_RENAME = "file_write:after_rename"

/**
 * Options of `fileWriteTool`.
 *
 * @since 0.1.0
 * @category models
 */
export interface FileWriteToolOptions {
  /** The folder every path is relative to and must stay inside (through its real path). */
  readonly root: string
  /** The tool name the model calls; default `write_file`. */
  readonly name?: string
}

/**
 * Where a call's target is: the real paths, the file name and the normalized path relative to the root.
 *
 * @since 0.1.0
 * @category models
 */
export interface ResolvedTarget {
  readonly realRoot: string
  readonly realParent: string
  readonly name: string
  readonly target: string
  readonly relativePath: string
}

const message = (error: PlatformError.PlatformError): string => error.message

// The path rules of preflight; every refusal is a `ToolArgsRejected` (`invalid_args`).
const resolveTarget = (root: string, path: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const paths = yield* Path.Path
    const nofollow = yield* NoFollowFileSystem
    const reject = (why: string) => new Tool.ToolArgsRejected({ message: `path ${JSON.stringify(path)}: ${why}` })
    if (path.includes("\u0000")) return yield* reject("holds a NUL character")
    if (paths.isAbsolute(path)) return yield* reject("must be relative to the tool's root")
    const parts = path.split("/")
    const name = parts[parts.length - 1]!
    if (name === "" || name === "." || name === "..") {
      return yield* reject("its last component must be a file name (not empty, . or ..)")
    }
    const parentRel = parts.slice(0, -1).join("/")
    const realRoot = yield* nofollow.realPath(root).pipe(
      Effect.mapError((e) => reject(`the root ${root} cannot be resolved (${message(e)})`))
    )
    const realParent = yield* nofollow.realPath(paths.join(root, parentRel === "" ? "." : parentRel)).pipe(
      Effect.mapError((e) =>
        reject(
          e._tag === "SystemError" && e.reason === "NotFound"
            ? "its parent folder does not exist (folders are not created)"
            : `its parent folder cannot be resolved (${message(e)})`
        )
      )
    )
    const parentInfo = yield* fs.stat(realParent).pipe(Effect.mapError((e) => reject(`its parent cannot be read (${message(e)})`)))
    if (parentInfo.type !== "Directory") return yield* reject("its parent is not a folder")
    const fromRoot = paths.relative(realRoot, realParent)
    if (fromRoot === ".." || fromRoot.startsWith("../") || paths.isAbsolute(fromRoot)) {
      return yield* reject(`its parent folder (${realParent}) lies outside the root (${realRoot})`)
    }
    const target = paths.join(realParent, name)
    const entry = yield* nofollow.entry(target).pipe(Effect.mapError((e) => reject(`the target cannot be read (${message(e)})`)))
    if (entry._tag === "Present" && entry.type !== "File") {
      return yield* reject(`the target is ${describeType(entry.type)}, not a regular file`)
    }
    const relativePath = fromRoot === "" ? name : `${fromRoot.split(paths.sep).join("/")}/${name}`
    // What T1 records must be a normal relative path and the root a normal absolute one (docs/spec/05-reconciliation.md): `reconcile` walks them.
    const unsound = relativePathProblem(relativePath)
    if (unsound !== undefined) return yield* reject(`it resolves to ${JSON.stringify(relativePath)}, which cannot be recorded: ${unsound}`)
    const rootProblem = absoluteRootProblem(realRoot)
    if (rootProblem !== undefined) return yield* reject(`the root resolves to ${JSON.stringify(realRoot)}, which cannot be recorded: ${rootProblem}`)
    return { realRoot, realParent, name, target, relativePath } satisfies ResolvedTarget
  })

const describeType = (type: FileSystem.File.Type): string =>
  type === "SymbolicLink"
    ? "a symbolic link"
    : type === "Directory"
    ? "a folder"
    : type === "FIFO"
    ? "a pipe (FIFO)"
    : type === "Socket"
    ? "a socket"
    : type === "BlockDevice" || type === "CharacterDevice"
    ? "a device"
    : "not a regular file"

const utf8 = new TextEncoder()

/**
 * Checks the path rules of docs/spec/05-reconciliation.md for `path` under `root`: relative; the last component a plain name; the parent
 * folder exists and its real path lies inside the root's; the target, when present, a regular file (not a link).
 *
 * @since 0.1.0
 * @category programs
 */
export const checkPath = (root: string, path: string): Effect.Effect<ResolvedTarget, Tool.ToolArgsRejected, FileWriteRequirements> =>
  resolveTarget(root, path)

/**
 * The evidence of a call: the root's real path, the normalized relative path, the digests before and after.
 *
 * @since 0.1.0
 * @category programs
 */
export const evidenceOf = (
  root: string,
  args: FileWriteArgs
): Effect.Effect<FileWriteEvidence, Tool.ToolArgsRejected | FileWriteFailed, FileWriteRequirements> =>
  Effect.gen(function*() {
    const nofollow = yield* NoFollowFileSystem
    const resolved = yield* resolveTarget(root, args.path)
    const current = yield* nofollow.readRegular(resolved.target).pipe(
      Effect.mapError((e) => new FileWriteFailed({ path: resolved.relativePath, message: `cannot read the target: ${message(e)}` }))
    )
    if (current._tag === "NotRegular") {
      return yield* new FileWriteFailed({
        path: resolved.relativePath,
        message: `the target is ${describeType(current.type)}, not a regular file`
      })
    }
    const evidence = {
      tool: FILE_WRITE_EVIDENCE_TOOL,
      root: resolved.realRoot,
      path: resolved.relativePath,
      before: current._tag === "Absent" ? null : Digest.ofBytes(current.bytes),
      after: Digest.ofBytes(utf8.encode(args.content))
    } as const
    // Never recorded unless sound: the store's T1 check refuses it too (LedgerRules, `schema_invalid`).
    const unsound = fileWriteEvidenceProblem(evidence)
    if (unsound !== undefined) return yield* new FileWriteFailed({ path: resolved.relativePath, message: unsound })
    return evidence
  })

const decodeEvidence = Schema.decodeUnknownEither(FileWriteEvidence)

// Evidence that does not decode: not file-write evidence, or a root or path that is not normal (never walked).
const unsoundEvidence = (evidence: unknown) =>
  new Observation.ObserveFailed({
    path: "",
    message: fileWriteEvidenceProblem(evidence) ?? "the recorded evidence is not runtime-resume/file-write@1 evidence"
  })

// The recorded path's parent (relative, `/`-separated; "" for the root) and file name.
const splitRecorded = (path: string) => {
  const at = path.lastIndexOf("/")
  return { parent: at < 0 ? "" : path.slice(0, at), name: path.slice(at + 1) }
}

/**
 * The implementation: re-resolves the parent's real path and refuses if it changed since preflight; writes
 * `.<name>.<operationId>.tmp` in that real folder (exclusive create), fsyncs it, renames it over the target (keeping
 * an existing target's mode; a new file gets 0644) and fsyncs the folder. Hits `failpointAt` before the rename and
 * after the folder's fsync.
 *
 * @since 0.1.0
 * @category programs
 */
export const write = (
  root: string,
  args: FileWriteArgs,
  context: Tool.ToolContext
): Effect.Effect<FileWriteResult, FileWriteFailed, FileWriteRequirements> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const paths = yield* Path.Path
    const nofollow = yield* NoFollowFileSystem
    const recorded = decodeEvidence(context.evidence)
    if (recorded._tag === "Left") {
      return yield* new FileWriteFailed({ path: args.path, message: "the call carries no file-write evidence; it was not dispatched by ToolRuntime" })
    }
    const evidence = recorded.right
    const fail = (why: string) => new FileWriteFailed({ path: evidence.path, message: why })
    const resolved = yield* resolveTarget(root, args.path).pipe(Effect.mapError((e) => fail(e.message)))
    const { parent } = splitRecorded(evidence.path)
    const expectedParent = parent === "" ? evidence.root : paths.join(evidence.root, parent)
    if (resolved.realParent !== expectedParent || resolved.relativePath !== evidence.path) {
      return yield* fail(`the parent folder now resolves to ${resolved.realParent}, not ${expectedParent} as at preflight; nothing was written`)
    }
    const entry = yield* nofollow.entry(resolved.target).pipe(Effect.mapError((e) => fail(`cannot read the target: ${message(e)}`)))
    if (entry._tag === "Present" && entry.type !== "File") {
      return yield* fail(`the target is now ${describeType(entry.type)}; nothing was written`)
    }
    const mode = entry._tag === "Present" ? entry.mode : 0o644
    const bytes = utf8.encode(args.content)
    const temp = paths.join(resolved.realParent, tempFileName(resolved.name, context.operationId))
    const created = { value: false }
    const written = Effect.scoped(Effect.gen(function*() {
      const file = yield* fs.open(temp, { flag: "wx", mode })
      created.value = true
      yield* file.writeAll(bytes)
      // The mode as asked, whatever the umask.
      yield* fs.chmod(temp, mode)
      yield* file.sync
    }))
    yield* written.pipe(
      Effect.zipRight(context.failpointAt(FAILPOINT_BEFORE_RENAME)),
      Effect.zipRight(fs.rename(temp, resolved.target)),
      Effect.tapError(() => created.value ? fs.remove(temp).pipe(Effect.ignore) : Effect.void),
      Effect.mapError((e) => fail(`cannot write ${resolved.target}: ${message(e)}`))
    )
    yield* Effect.scoped(Effect.flatMap(fs.open(resolved.realParent, { flag: "r" }), (dir) => dir.sync)).pipe(
      Effect.mapError((e) => fail(`wrote ${resolved.target} but could not fsync its folder: ${message(e)}`))
    )
    yield* context.failpointAt(FAILPOINT_AFTER_RENAME)
    return { path: evidence.path, bytes: bytes.length, sha256: Digest.ofBytes(bytes) }
  })

/**
 * The roots one `reconcile` has resolved: a root as given → its real path, found to be a folder. Kept for one
 * reconcile only (`Reconcile.reconcile` makes one per call), so the root is stat'ed and resolved once, not per operation.
 *
 * @since 0.1.0
 * @category models
 */
export type RootCache = Map<string, string>

/**
 * Options of `observe` and `removeTempFile`: `root` overrides the recorded root (a moved project).
 *
 * @since 0.1.0
 * @category models
 */
export interface ObserveOptions {
  readonly root?: string
  /**
   * The roots this reconcile has already resolved. The folder of each target is still resolved per operation (docs/spec/05-reconciliation.md),
   * and must come out as the cached root's real path joined with the recorded folder; anything else (a folder
   * missing or moved, a read error) is observed again without the cache, so every outcome but the plain one is
   * decided exactly as without it.
   */
  readonly roots?: RootCache
}

/**
 * Observes a file-write operation from its recorded evidence, under the recorded root (or `options.root`), never
 * following a link at the target and never opening anything but a regular file: its digest = `after` →
 * `matches_expected_state` (with the synthesized result); absent while `before` is null, or digest = `before` →
 * `matches_prior_state`; anything else → `diverged`. A read error or a missing root fails with `ObserveFailed`.
 *
 * @since 0.1.0
 * @category programs
 */
export const observe = (
  evidence: unknown,
  options: ObserveOptions = {}
): Effect.Effect<Observation.Observation, Observation.ObserveFailed, FileWriteRequirements> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const nofollow = yield* NoFollowFileSystem
    const decoded = decodeEvidence(evidence)
    if (decoded._tag === "Left") return yield* unsoundEvidence(evidence)
    const ev = decoded.right
    const root = options.root ?? ev.root
    const failed = (what: string) => (e: PlatformError.PlatformError) =>
      new Observation.ObserveFailed({ path: ev.path, message: `cannot observe ${ev.path}: ${what} (${message(e)})` })
    const cached = options.roots?.get(root)
    // Off the plain path with a cached root: observe again, resolving the root afresh.
    const uncached = Effect.suspend(() => {
      options.roots?.delete(root)
      return observe(evidence, options.root !== undefined ? { root: options.root } : {})
    })
    let realRoot: string
    if (cached !== undefined) realRoot = cached
    else {
      const rootInfo = yield* fs.stat(root).pipe(Effect.mapError(failed(`the root ${root} cannot be read`)))
      if (rootInfo.type !== "Directory") {
        return yield* new Observation.ObserveFailed({ path: ev.path, message: `cannot observe ${ev.path}: the root ${root} is not a folder` })
      }
      realRoot = yield* nofollow.realPath(root).pipe(Effect.mapError(failed(`the root ${root} cannot be resolved`)))
      options.roots?.set(root, realRoot)
    }
    if (options.root === undefined && realRoot !== ev.root) {
      return Observation.diverged(`the recorded root ${ev.root} now resolves to ${realRoot}`)
    }
    // Every component of the root and of the recorded path opened by descriptor, never through a link (docs/spec/05-reconciliation.md).
    const read = yield* nofollow.readUnder(realRoot, ev.path).pipe(
      Effect.mapError(failed("the target cannot be read")),
      (effect) => cached === undefined ? effect : Effect.catchAll(effect, () => Effect.succeed({ _tag: "Uncached" as const }))
    )
    // Off the plain path with a cached root (the root gone or changed): observe again, resolving the root afresh.
    if (read._tag === "Uncached" || (cached !== undefined && (read._tag === "RootMissing" || read._tag === "RootNotFolder"))) {
      return yield* uncached
    }
    switch (read._tag) {
      case "RootMissing":
        return yield* new Observation.ObserveFailed({ path: ev.path, message: `cannot observe ${ev.path}: the root ${realRoot} is missing` })
      case "RootNotFolder":
        return Observation.diverged(
          `the root ${realRoot} is no longer the folder it resolved to (${describeType(read.type)} on its path); nothing is read through it`
        )
      case "FolderNotFolder":
        return Observation.diverged(
          `the folder ${read.folder} of ${ev.path} is now ${describeType(read.type)}, no longer a folder under the root; nothing is read through it`
        )
      case "FolderMissing":
        return ev.before === null
          ? Observation.matchesPriorState(`${ev.path} is absent (its folder ${read.folder} too), as before the write`)
          : Observation.diverged(`${ev.path} is absent (its folder ${read.folder} too); it held ${ev.before} before the write`)
    }
    switch (read._tag) {
      case "Absent":
        return ev.before === null
          ? Observation.matchesPriorState(`${ev.path} is absent, as before the write`)
          : Observation.diverged(`${ev.path} is absent; it held ${ev.before} before the write`)
      case "NotRegular":
        return Observation.diverged(`${ev.path} is now ${describeType(read.type)}`)
      case "Regular": {
        const digest = Digest.ofBytes(read.bytes)
        if (digest === ev.after) {
          const result: FileWriteResult = { path: ev.path, bytes: read.bytes.length, sha256: digest }
          return Observation.matchesExpectedState(result, `${ev.path} holds the written bytes (${digest})`)
        }
        if (digest === ev.before) return Observation.matchesPriorState(`${ev.path} holds its bytes from before the write (${digest})`)
        return Observation.diverged(`${ev.path} holds other bytes (${digest}), neither ${ev.before ?? "absent"} before nor ${ev.after} after`)
      }
    }
  })

/**
 * Removes an operation's leftover temporary file (`.<name>.<operationId>.tmp` beside the target, under the recorded
 * root or `options.root`) when it is a regular file; true when one was removed. Never follows a link.
 *
 * @since 0.1.0
 * @category programs
 */
export const removeTempFile = (
  evidence: unknown,
  operationId: string,
  options: ObserveOptions = {}
): Effect.Effect<boolean, Observation.ObserveFailed, FileWriteRequirements> =>
  Effect.gen(function*() {
    const nofollow = yield* NoFollowFileSystem
    const decoded = decodeEvidence(evidence)
    if (decoded._tag === "Left") return yield* unsoundEvidence(evidence)
    const ev = decoded.right
    const { name, parent } = splitRecorded(ev.path)
    const temp = `${parent === "" ? "" : `${parent}/`}${tempFileName(name, operationId)}`
    const failed = (e: PlatformError.PlatformError) =>
      new Observation.ObserveFailed({ path: ev.path, message: `cannot remove the temporary file ${temp}: ${message(e)}` })
    // A root given for a moved project is resolved once (the person's choice); the walk under it never follows a link.
    const root = options.root !== undefined ? yield* nofollow.realPath(options.root).pipe(Effect.mapError(failed)) : ev.root
    const removed = yield* nofollow.removeUnder(root, temp).pipe(Effect.mapError(failed))
    return removed._tag === "Removed"
  })

/**
 * The built-in file-write tool (docs/spec/05-reconciliation.md), `reconcilable`: args `{ path, content }` relative to `root`, the path rules
 * at preflight (`invalid_args`), the evidence `runtime-resume/file-write@1`, the atomic write, and `observe`.
 *
 * @since 0.1.0
 * @category programs
 */
export const fileWriteTool = (options: FileWriteToolOptions) =>
  Tool.make({
    name: options.name ?? DEFAULT_NAME,
    args: FileWriteArgs,
    recoveryMode: "reconcilable",
    preflight: (args: FileWriteArgs) => Effect.asVoid(resolveTarget(options.root, args.path)),
    evidence: (args: FileWriteArgs) => evidenceOf(options.root, args),
    implementation: (args: FileWriteArgs, context: Tool.ToolContext) => write(options.root, args, context),
    observe: (_args: FileWriteArgs, evidence: unknown) => observe(evidence)
  })
