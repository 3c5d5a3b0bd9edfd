// The workspace identity of docs/spec/04-continuation.md: a marker file `<workspace>/workspace-id` holding a UUID v4 and a newline.
// It is created once (0600, all-or-nothing, never over an existing marker), read strictly, and never rebound.
import * as FileSystem from "@effect/platform/FileSystem"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Crypto from "node:crypto"
import * as NodePath from "node:path"

/**
 * The marker's file name inside the workspace.
 *
 * @since 0.1.0
 * @category constants
 */
export const MARKER_FILE_NAME = "workspace-id"

/**
 * The marker's path for a workspace.
 *
 * @since 0.1.0
 * @category services
 */
export const markerPath = (workspace: string): string => NodePath.join(workspace, MARKER_FILE_NAME)

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

/**
 * Whether a string is a lowercase UUID v4, the only identity a marker may hold.
 *
 * @since 0.1.0
 * @category services
 */
export const isUuidV4 = (s: string): boolean => UUID_V4.test(s)

/**
 * What a new marker's UUID comes from: `crypto.randomUUID` unless replaced (tests provide a fixed source).
 *
 * @since 0.1.0
 * @category models
 */
export interface UuidSourceShape {
  readonly next: Effect.Effect<string>
}

/**
 * The source of new workspace UUIDs, a `Context.Reference` defaulting to `crypto.randomUUID`.
 *
 * @since 0.1.0
 * @category tags
 */
export class UuidSource extends Context.Reference<UuidSource>()("runtime-resume/WorkspaceIdentity/UuidSource", {
  defaultValue: (): UuidSourceShape => ({ next: Effect.sync(() => Crypto.randomUUID()) })
}) {}

/**
 * Why a marker is refused: not a regular file, or not exactly a lowercase UUID v4 and a newline.
 *
 * @since 0.1.0
 * @category services
 */
export const InvalidMarkerReason = Schema.Literal("not_a_file", "malformed")
/**
 * Why a marker is refused.
 *
 * @since 0.1.0
 * @category models
 */
export type InvalidMarkerReason = typeof InvalidMarkerReason.Type

/**
 * The workspace's marker exists but is not a valid identity; it is reported, never rewritten or rebound.
 *
 * @since 0.1.0
 * @category errors
 */
export class WorkspaceIdentityInvalid extends Schema.TaggedError<WorkspaceIdentityInvalid>()("WorkspaceIdentityInvalid", {
  path: Schema.String,
  reason: InvalidMarkerReason,
  message: Schema.String
}) {}

/**
 * The marker could not be read or created (an I/O failure, or the UUID source gave something that is no UUID v4).
 *
 * @since 0.1.0
 * @category errors
 */
export class WorkspaceIdentityFailed extends Schema.TaggedError<WorkspaceIdentityFailed>()("WorkspaceIdentityFailed", {
  path: Schema.String,
  cause: Schema.String,
  message: Schema.String
}) {}

/**
 * Any error of this module.
 *
 * @since 0.1.0
 * @category models
 */
export type WorkspaceIdentityError = WorkspaceIdentityInvalid | WorkspaceIdentityFailed

const failed = (path: string, what: string) => (error: { readonly message: string }) =>
  new WorkspaceIdentityFailed({
    path,
    cause: error.message,
    message: `could not ${what} the workspace identity marker ${path}: ${error.message}`
  })

const isReason = (error: unknown, reason: string): boolean =>
  typeof error === "object" && error !== null && "_tag" in error && error._tag === "SystemError" &&
  "reason" in error && error.reason === reason

/**
 * Reads the workspace's identity: `None` when there is no marker, the UUID when the marker is a regular file holding
 * exactly a lowercase UUID v4 and a newline; anything else is `WorkspaceIdentityInvalid`. Never writes.
 *
 * @since 0.1.0
 * @category services
 */
export const read = Effect.fn("WorkspaceIdentity.read")(function*(workspace: string) {
  const fs = yield* FileSystem.FileSystem
  const path = markerPath(workspace)
  const isLink = yield* fs.readLink(path).pipe(Effect.as(true), Effect.orElseSucceed(() => false))
  const info = yield* fs.stat(path).pipe(
    Effect.map(Option.some),
    Effect.catchIf((e) => isReason(e, "NotFound"), () => Effect.succeed(Option.none())),
    Effect.mapError(failed(path, "inspect"))
  )
  if (Option.isNone(info)) {
    if (isLink) {
      return yield* new WorkspaceIdentityInvalid({
        path,
        reason: "not_a_file",
        message: `the workspace identity marker ${path} is a dangling symlink; replace it by hand with the original marker`
      })
    }
    return Option.none<string>()
  }
  if (isLink || info.value.type !== "File") {
    return yield* new WorkspaceIdentityInvalid({
      path,
      reason: "not_a_file",
      message: `the workspace identity marker ${path} is not a regular file; it is never rebound, restore it by hand`
    })
  }
  const text = yield* fs.readFileString(path).pipe(Effect.mapError(failed(path, "read")))
  const uuid = text.endsWith("\n") ? text.slice(0, -1) : undefined
  if (uuid === undefined || !isUuidV4(uuid)) {
    return yield* new WorkspaceIdentityInvalid({
      path,
      reason: "malformed",
      message: `the workspace identity marker ${path} does not hold exactly one lowercase UUID v4 and a newline; ` +
        "it is never rebound: restore the original marker by hand"
    })
  }
  return Option.some(uuid)
})

// Writes `uuid` to a fresh temporary file (exclusive create, 0600, fsync), hard-links it as the marker (which fails
// when a marker exists: a link never replaces), removes the temporary name and fsyncs the folder. A crash leaves
// either no marker or the whole marker, never a partial one; at worst an unused temporary file.
const create = (fs: FileSystem.FileSystem, workspace: string, uuid: string) =>
  Effect.gen(function*() {
    const path = markerPath(workspace)
    const temp = NodePath.join(workspace, `.${MARKER_FILE_NAME}.${uuid}.tmp`)
    yield* Effect.scoped(Effect.gen(function*() {
      const file = yield* fs.open(temp, { flag: "wx", mode: 0o600 })
      yield* file.writeAll(new TextEncoder().encode(`${uuid}\n`))
      yield* file.sync
    })).pipe(Effect.mapError(failed(temp, "write")))
    const linked = yield* fs.link(temp, path).pipe(
      Effect.as(true),
      Effect.catchIf((e) => isReason(e, "AlreadyExists"), () => Effect.succeed(false)),
      Effect.mapError(failed(path, "create"))
    )
    yield* fs.remove(temp).pipe(Effect.mapError(failed(temp, "remove")))
    yield* Effect.scoped(Effect.flatMap(fs.open(workspace, { flag: "r" }), (dir) => dir.sync)).pipe(
      Effect.mapError(failed(workspace, "sync the folder of"))
    )
    return linked
  })

/**
 * The workspace's identity, creating the marker with a new UUID (from `UuidSource`) when there is none. An existing
 * marker is never rewritten: when another process creates it first, its UUID wins; a malformed one is an error.
 *
 * @since 0.1.0
 * @category services
 */
export const ensure = Effect.fn("WorkspaceIdentity.ensure")(function*(workspace: string) {
  const existing = yield* read(workspace)
  if (Option.isSome(existing)) return existing.value
  const fs = yield* FileSystem.FileSystem
  const source = yield* UuidSource
  const uuid = yield* source.next
  if (!isUuidV4(uuid)) {
    return yield* new WorkspaceIdentityFailed({
      path: markerPath(workspace),
      cause: "the UUID source gave a value that is not a lowercase UUID v4",
      message: `could not create the workspace identity marker ${markerPath(workspace)}: the UUID source gave a value ` +
        "that is not a lowercase UUID v4"
    })
  }
  yield* create(fs, workspace, uuid)
  // Whoever linked first, the marker on disk is the identity.
  const now = yield* read(workspace)
  if (Option.isNone(now)) {
    return yield* new WorkspaceIdentityFailed({
      path: markerPath(workspace),
      cause: "the marker vanished right after it was created",
      message: `the workspace identity marker ${markerPath(workspace)} vanished right after it was created`
    })
  }
  return now.value
})
