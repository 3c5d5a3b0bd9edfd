// Disk faults on a real small tmpfs (docs/reliability.md, File hygiene): a full disk makes the append fail typed (StoreWriteFailed naming the
// ledger) and everything acknowledged before still verifies; a read-only mount refuses a writer typed, readers verify.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as NodePath from "node:path"
import { RunId } from "../src/Domain/Ids.js"
import * as NodeLedgerFileSystem from "../src/Layers/NodeLedgerFileSystem.js"
import { layerStore, type PersistentStore } from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { verificationOk, verifyWorkspace } from "../src/Programs/VerifyWorkspace.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"

const platform = Layer.merge(NodeLedgerFileSystem.layer, NodeWorkspaceLock.layerNode)

const storeLayer = (store: PersistentStore, workspace: string, readOnly: boolean) =>
  layerStore(store, { workspace, readOnly }).pipe(Layer.provide(platform))

// Whether this process may mount a tmpfs (root, with the capability); checked once, by trying.
const mountable = ((): boolean => {
  const dir = fs.mkdtempSync(NodePath.join(os.tmpdir(), "rr-mnt-probe-"))
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", dir], { stdio: "ignore" })
    execFileSync("umount", [dir], { stdio: "ignore" })
    return true
  } catch {
    return false
  } finally {
    fs.rmdirSync(dir)
  }
})()
if (!mountable) {
  console.log("WorkspaceDiskFaults: skipped, this process may not mount a tmpfs (needs root with CAP_SYS_ADMIN)")
}

// Mounts a tmpfs of `size` for the scope of the effect, then unmounts it.
const withTmpfs = <A, E, R>(size: string, use: (dir: string) => Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const dir = fs.mkdtempSync(NodePath.join(os.tmpdir(), "rr-tmpfs-"))
      execFileSync("mount", ["-t", "tmpfs", "-o", `size=${size}`, "tmpfs", dir])
      return dir
    }),
    use,
    (dir) =>
      Effect.sync(() => {
        execFileSync("umount", ["-l", dir])
        fs.rmdirSync(dir)
      })
  )

// Fills the file system of `dir` with a filler file until a write fails with ENOSPC; returns its path.
const fill = (dir: string): string => {
  const path = NodePath.join(dir, "filler")
  const fd = fs.openSync(path, "w")
  try {
    for (const size of [1 << 20, 1 << 16, 1 << 12, 1 << 8, 1]) {
      const chunk = Buffer.alloc(size, 0x61)
      try {
        for (;;) fs.writeSync(fd, chunk)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error
      }
    }
  } finally {
    fs.closeSync(fd)
  }
  return path
}

const events = (name: string) => {
  const b = EventBuilder.make(name)
  return { b, first: [b.opened(), b.user("hello"), b.model("thinking")] }
}

describe.skipIf(!mountable)("disk faults on a small tmpfs", () => {
  for (const store of ["sqlite", "jsonl"] as const) {
    it.live(`${store}: a full disk fails the append typed (StoreWriteFailed naming the ledger); what was acknowledged still verifies`, () =>
      withTmpfs("2m", (dir) =>
        Effect.gen(function*() {
          const workspace = NodePath.join(dir, "ws")
          const { b, first } = events(`full-${store}`)
          const runId = RunId.make(`full-${store}`)
          const outcome = yield* Effect.scoped(Effect.gen(function*() {
            const ledger = yield* RuntimeEventStore
            const acknowledged = yield* ledger.append(runId, first)
            const filler = fill(dir)
            // A large event cannot fit: the write (JSONL) or the commit (SQLite) hits ENOSPC.
            const refused = yield* Effect.either(ledger.append(runId, [b.user("x".repeat(256 * 1024))]))
            fs.rmSync(filler)
            return { acknowledged, refused }
          }).pipe(Effect.provide(storeLayer(store, workspace, false))))
          assert.isTrue(Either.isLeft(outcome.refused), "the append on a full disk was acknowledged")
          if (Either.isLeft(outcome.refused)) {
            const error = outcome.refused.left
            assert.strictEqual(error._tag, "StoreWriteFailed", JSON.stringify(error))
            assert.include(error.message, workspace, error.message)
          }
          // A writer opened on the full disk (its locks, its open) fails typed too, never as a defect.
          const filler = fill(dir)
          const reopened = yield* Effect.scoped(
            Effect.flatMap(RuntimeEventStore, (ledger) => ledger.append(runId, [b.user("y".repeat(256 * 1024))]))
          ).pipe(
            Effect.provide(storeLayer(store, workspace, false)),
            Effect.map(() => "acknowledged"),
            Effect.catchAll((error) => Effect.succeed(error._tag)),
            Effect.catchAllDefect((defect) => Effect.succeed(`defect: ${String(defect)}`))
          )
          fs.rmSync(filler)
          assert.include(["StoreWriteFailed", "StoreReadFailed"], reopened, reopened)
          // Everything acknowledged before reads back and verifies (a new reader).
          const verification = yield* verifyWorkspace().pipe(Effect.provide(storeLayer(store, workspace, true)), Effect.scoped)
          assert.isTrue(verificationOk(verification), JSON.stringify(verification))
          assert.strictEqual(verification.runs[0]?.seq, outcome.acknowledged.length)
          assert.strictEqual(verification.runs[0]?.digest, outcome.acknowledged[outcome.acknowledged.length - 1]?.digest)
        })))

    it.live(`${store}: on a read-only mount a writer is refused typed, naming the path, and readers still verify`, () =>
      withTmpfs("2m", (dir) =>
        Effect.gen(function*() {
          const workspace = NodePath.join(dir, "ws")
          const { first } = events(`ro-${store}`)
          const runId = RunId.make(`ro-${store}`)
          const acknowledged = yield* Effect.scoped(
            Effect.flatMap(RuntimeEventStore, (ledger) => ledger.append(runId, first))
          ).pipe(Effect.provide(storeLayer(store, workspace, false)))
          execFileSync("mount", ["-o", "remount,ro", dir])
          const refused = yield* Effect.either(Effect.scoped(
            Effect.flatMap(RuntimeEventStore, (ledger) => ledger.append(runId, [EventBuilder.make(`ro-${store}`).user("more")]))
          ).pipe(Effect.provide(storeLayer(store, workspace, false))))
          assert.isTrue(Either.isLeft(refused), "a writer on a read-only mount appended")
          if (Either.isLeft(refused)) {
            const error = refused.left as { readonly _tag: string; readonly message: string }
            assert.include(["StoreReadFailed", "StoreWriteFailed"], error._tag, JSON.stringify(error))
            assert.include(error.message, workspace, error.message)
          }
          const read = yield* Effect.either(verifyWorkspace().pipe(Effect.provide(storeLayer(store, workspace, true)), Effect.scoped))
          if (store === "sqlite" && Either.isLeft(read)) {
            // SQLite cannot read a cleanly closed WAL ledger where it may not create -wal/-shm: a typed refusal that
            // names the ledger and the next step (copy it to a writable disk), never a defect.
            assert.strictEqual(read.left._tag, "StoreReadFailed", JSON.stringify(read.left))
            assert.include(read.left.message, workspace)
            assert.include(read.left.message, "writable")
            return
          }
          assert.isTrue(Either.isRight(read), JSON.stringify(read))
          if (Either.isRight(read)) {
            assert.isTrue(verificationOk(read.right), JSON.stringify(read.right))
            assert.strictEqual(read.right.runs[0]?.digest, acknowledged[acknowledged.length - 1]?.digest)
          }
        })))
  }
})
