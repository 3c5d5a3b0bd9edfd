// A child process for the owner-lock tests of docs/spec/04-continuation.md: a host start (HostStartup), a bare shared or exclusive holder,
// or one exclusive attempt, through the real WorkspaceOwner over the OS lock. It reports one JSON line on stdout.
// Usage: node --import tsx harness/OwnerLockChild.ts <host|host-stuck|shared|exclusive|attempt> <workspace> [waitMs]
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { resolve } from "node:path"
import { fileURLToPath } from "node:url"
import * as NodeWorkspaceOwner from "../src/Layers/NodeWorkspaceOwner.js"
import * as HostStartup from "../src/Programs/HostStartup.js"
import { OWNER_LOCK_WAIT_MS, OwnerLockWaitMs, WorkspaceOwner } from "../src/Services/WorkspaceOwner.js"

/** What the child does: start a host (repair appends to the repair log), start a host whose repair never ends, hold
 * shared, hold exclusive, or make one exclusive attempt (waiting at most waitMs) and exit. */
export const OwnerChildMode = Schema.Literal("host", "host-stuck", "shared", "exclusive", "attempt")
/** What the child does. */
export type OwnerChildMode = typeof OwnerChildMode.Type

/** The file in the workspace where the child's repair appends one line, `repair <pid>`, each time it runs. */
export const REPAIR_LOG = "repairs.log"

/** The one JSON line the child prints: what it holds now (it then waits until killed), or what its attempt got. */
export const OwnerChildReport = Schema.parseJson(Schema.Union(
  Schema.TaggedStruct("Holding", {
    pid: Schema.Int,
    mode: Schema.Literal("shared", "exclusive"),
    /** For a host: whether its startup repair ran or was skipped ("Repairing" while a stuck repair holds exclusive). */
    repair: Schema.optionalWith(Schema.Literal("Ran", "Skipped", "Repairing"), { exact: true }),
    reason: Schema.optionalWith(Schema.String, { exact: true })
  }),
  Schema.TaggedStruct("Acquired", { pid: Schema.Int, waitedMs: Schema.Int }),
  Schema.TaggedStruct("Locked", {
    pid: Schema.Int,
    waitedMs: Schema.Int,
    holderPid: Schema.optionalWith(Schema.Int, { exact: true })
  })
))
/** The one JSON line the child prints. */
export type OwnerChildReport = typeof OwnerChildReport.Type

const report = (value: OwnerChildReport) =>
  Schema.encode(OwnerChildReport)(value).pipe(
    Effect.orDie,
    // A write to a pipe is synchronous on POSIX: the parent sees this line only once what it reports holds.
    Effect.flatMap((line) => Effect.sync(() => process.stdout.write(`${line}\n`)))
  )

/** Runs one mode on a workspace, reporting on stdout; holding modes never end on their own. */
export const child = (mode: OwnerChildMode, workspace: string) =>
  Effect.gen(function*() {
    const owner = yield* WorkspaceOwner
    const fs = yield* FileSystem.FileSystem
    const pid = process.pid
    switch (mode) {
      case "host":
      case "host-stuck": {
        const repair = mode === "host"
          ? fs.writeFileString(resolve(workspace, REPAIR_LOG), `repair ${pid}\n`, { flag: "a" }).pipe(Effect.orDie)
          : Effect.zipRight(report({ _tag: "Holding", pid, mode: "exclusive", repair: "Repairing" }), Effect.never)
        const started = yield* HostStartup.start(workspace, { repair })
        yield* report({
          _tag: "Holding",
          pid,
          mode: "shared",
          repair: started.repair._tag,
          ...(started.repair._tag === "Skipped" ? { reason: started.repair.reason } : {})
        })
        return yield* Effect.never
      }
      case "shared":
      case "exclusive": {
        yield* owner.acquire(workspace, mode)
        yield* report({ _tag: "Holding", pid, mode })
        return yield* Effect.never
      }
      case "attempt": {
        const begin = yield* Clock.currentTimeMillis
        const outcome = yield* Effect.either(owner.withExclusive(workspace, Effect.void))
        const waitedMs = (yield* Clock.currentTimeMillis) - begin
        if (outcome._tag === "Right") return yield* report({ _tag: "Acquired", pid, waitedMs })
        if (outcome.left._tag !== "WorkspaceLocked") return yield* outcome.left
        const holderPid = outcome.left.holderPid
        return yield* report({ _tag: "Locked", pid, waitedMs, ...(holderPid !== undefined ? { holderPid } : {}) })
      }
    }
  }).pipe(Effect.scoped)

const ChildArgs = Schema.Tuple(
  [OwnerChildMode, Schema.String.pipe(Schema.minLength(1))],
  Schema.NumberFromString.pipe(Schema.int(), Schema.nonNegative())
)

// Entry point only when run as a script, so tests can import the schema and constants above.
if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const main = Schema.decodeUnknown(ChildArgs)(process.argv.slice(2)).pipe(
    Effect.flatMap(([mode, workspace, ...rest]) =>
      child(mode, workspace).pipe(
        Effect.provide(NodeWorkspaceOwner.layerNode.pipe(
          Layer.provide(Layer.succeed(OwnerLockWaitMs, rest[0] ?? OWNER_LOCK_WAIT_MS))
        )),
        Effect.provide(NodeFileSystem.layer)
      )
    ),
    // Failures go to stderr, which the parent shows (runMain would report on stdout).
    Effect.tapErrorCause((cause) =>
      Effect.sync(() => {
        const failure = Cause.failureOption(cause)
        process.stderr.write(
          `${Option.isSome(failure) ? `${failure.value._tag}: ${failure.value.message}` : Cause.pretty(cause)}\n`
        )
      })
    )
  )
  NodeRuntime.runMain(main, { disableErrorReporting: true })
}
