// The torture campaign's child process (docs/reliability.md, "Torture campaign"): appends to several runs through several fibers with compare-and-append,
// printing each acknowledged row on stdout only after its append succeeded; also the competing-writer modes of the tests.
// Usage: node <bundle>.mjs torture|hold|race <sqlite|jsonl> <workspace> ... (see `usage` below); it is bundled by esbuild.
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeStream from "@effect/platform-node/NodeStream"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { writeSync } from "node:fs"
import { resolve } from "node:path"
import { fileURLToPath } from "node:url"
import * as NodeLedgerFileSystem from "../src/Layers/NodeLedgerFileSystem.js"
import * as Digest from "../src/Domain/Digest.js"
import type { RuntimeOffsetMismatch } from "../src/Domain/Errors.js"
import { CallId, RunId } from "../src/Domain/Ids.js"
import * as RuntimeEvent from "../src/Domain/RuntimeEvent.js"
import * as JsonlRuntimeEventStore from "../src/Layers/JsonlRuntimeEventStore.js"
import * as NodeRuntimeEventStore from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import type { RunBatch, RuntimeEventStoreShape } from "../src/Services/RuntimeEventStore.js"

/** The persistent stores the campaign tortures. */
export type TortureStore = "sqlite" | "jsonl"

/** The runs the torture child extends, one fiber each (plus one fiber appending to several at once). */
export const TORTURE_RUNS = ["torture-1", "torture-2", "torture-3", "torture-4"] as const

/** The fiber names of the torture child: one per run, and `b` for the cross-run `appendBatch` fiber. */
export const TORTURE_FIBERS = ["r1", "r2", "r3", "r4", "b"] as const

/** The exit code of a `hold` child that found the workspace locked. */
export const LOCKED_EXIT_CODE = 3

/** One acknowledged row, as the child prints it (one JSON line per row). */
export interface Ack {
  readonly runId: string
  readonly seq: number
  readonly digest: string
}

/**
 * The event id the torture child gives the event at `seq` of `runId`, appended by `tag`
 * (`<iteration>.<fiber>.<append number>`): unique, because a (run, seq) pair is committed once.
 */
export const tortureEventId = (runId: string, seq: number, tag: string): string => `${runId}/${seq}/${tag}`

/** Parses a torture event id back into its run, seq, iteration, fiber and append number; `undefined` if it is not one. */
export const parseTortureEventId = (
  id: string
): { runId: string; seq: number; iteration: string; fiber: string; append: string } | undefined => {
  const parts = id.split("/")
  if (parts.length !== 3) return undefined
  const tag = parts[2]!.split(".")
  if (tag.length !== 3) return undefined
  return { runId: parts[0]!, seq: Number(parts[1]), iteration: tag[0]!, fiber: tag[1]!, append: tag[2]! }
}

/** A small seeded PRNG (mulberry32): the same seed gives the same sequence of numbers in [0, 1). */
export const prng = (seed: number): () => number => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

// Written synchronously to fd 1: `process.stdout.write` on a pipe buffers in user space when the pipe is full, and a
// SIGKILL would drop acknowledgements the parent must see. A write that returned is in the kernel's pipe buffer,
// which outlives the process.
const writeOut = (text: string): void => {
  let buf = Buffer.from(text, "utf8")
  while (buf.length > 0) {
    try {
      buf = buf.subarray(writeSync(1, buf))
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EAGAIN") throw error
    }
  }
}

const print = (value: unknown) => Effect.sync(() => writeOut(`${JSON.stringify(value)}\n`))

// One write per append, so the parent never sees half of an append's acknowledgements unless the kill cut the write.
const printAcks = (rows: ReadonlyArray<RuntimeEvent.CommittedRow>, extra: Record<string, unknown> = {}) =>
  Effect.sync(() => {
    let text = ""
    for (const row of rows) {
      text += `${JSON.stringify({ runId: row.event.runId, seq: row.seq, digest: row.digest, ...extra })}\n`
    }
    writeOut(text)
  })

/** The real store layer of one kind over a workspace, JSONL with its OS-level writer lock. */
const storeLayer = (store: TortureStore, workspace: string, lockTimeoutMs = 0) =>
  (store === "jsonl"
    ? JsonlRuntimeEventStore.layer({ workspace, readOnly: false, lockTimeoutMs })
    : NodeRuntimeEventStore.layerStore(store, { workspace, readOnly: false })).pipe(
      Layer.provide(NodeWorkspaceLock.layer)
    )

const openStore = (store: TortureStore, workspace: string, lockTimeoutMs = 0) =>
  storeLayer(store, workspace, lockTimeoutMs).pipe(Layer.build, Effect.map(Context.get(RuntimeEventStore)))

// ---------------------------------------------------------------------------------------------------------------
// Events.

// What the child knows of a run's high-water; shared by the fibers, refreshed from `RuntimeOffsetMismatch`.
type HighWaters = Map<string, { seq: number; digest: string }>

const BIG_TEXT = "x".repeat(1024)

/**
 * One append's events for `runId`, starting at `seq + 1`: a single event, a call with its response, a dangling
 * call, 2–5 mixed events holding a call/response pair, or (rarely) a large text, so that a kill can cut a write.
 */
export const groupEvents = (
  runId: string,
  hw: { seq: number },
  tag: string,
  ts: number,
  random: () => number
): Array<RuntimeEvent.RuntimeEvent> => {
  const b = EventBuilder.make(runId, ts)
  let seq = hw.seq
  const id = () => ({ id: tortureEventId(runId, ++seq, tag) })
  if (seq === 0) {
    return [
      b.custom(new RuntimeEvent.RunOpened({ toolBoundary: "none" }), id()),
      b.custom(new RuntimeEvent.UserMessage({ text: `torture ${runId} opened by ${tag}` }), id())
    ]
  }
  const pair = (): Array<RuntimeEvent.RuntimeEvent> => {
    const callId = CallId.make(`c${seq + 1}.${tag}`)
    const name = random() < 0.5 ? "Bash" : "Read"
    return [
      b.custom(new RuntimeEvent.FunctionCall({ callId, name, args: { n: seq + 1, tag } }), id()),
      b.custom(new RuntimeEvent.FunctionResponse({ callId, name, result: { ok: true }, isError: random() < 0.2 }), id())
    ]
  }
  const text = (): RuntimeEvent.RuntimeEvent => {
    const r = random()
    return r < 0.4
      ? b.custom(new RuntimeEvent.UserMessage({ text: `user ${seq + 1}` }), id())
      : r < 0.8
      ? b.custom(new RuntimeEvent.ModelText({ text: `model ${seq + 1} ${tag}` }), id())
      : b.custom(new RuntimeEvent.Diagnostic({ message: `diagnostic ${seq + 1}` }), id())
  }
  const r = random()
  let events: Array<RuntimeEvent.RuntimeEvent>
  if (r < 0.01) {
    // A large event (128–384 KiB): its write takes long enough that a kill may cut it (a torn JSONL tail).
    events = [b.custom(new RuntimeEvent.ModelText({ text: BIG_TEXT.repeat(128 + Math.floor(random() * 256)) }), id())]
  } else if (r < 0.3) {
    events = [text()]
  } else if (r < 0.5) {
    events = pair()
  } else if (r < 0.55) {
    const callId = CallId.make(`c${seq + 1}.${tag}`)
    events = [b.custom(new RuntimeEvent.FunctionCall({ callId, name: "Bash", args: { dangling: true } }), id())]
  } else {
    const size = 2 + Math.floor(random() * 4)
    events = []
    const pairAt = Math.floor(random() * (size - 1))
    while (events.length < size) {
      if (events.length === pairAt) events.push(...pair())
      else events.push(text())
    }
  }
  return events
}

// Refreshes a run's known high-water from the store's answer to a failed compare-and-append.
const refresh = (highWaters: HighWaters, error: RuntimeOffsetMismatch) =>
  Effect.sync(() => {
    const known = highWaters.get(error.runId)
    if (known === undefined || error.actual.seq > known.seq) highWaters.set(error.runId, { ...error.actual })
  })

const remember = (highWaters: HighWaters, rows: ReadonlyArray<RuntimeEvent.CommittedRow>) => {
  const last = rows[rows.length - 1]
  if (last !== undefined) {
    const known = highWaters.get(last.event.runId)
    if (known === undefined || last.seq > known.seq) highWaters.set(last.event.runId, { seq: last.seq, digest: last.digest })
  }
}

// The run's high-water as the store says at start (empty when it has no rows yet).
const loadHighWater = (ledger: RuntimeEventStoreShape, highWaters: HighWaters, runId: string) =>
  ledger.highWater(RunId.make(runId)).pipe(
    Effect.map((hw) => ({ seq: hw.seq, digest: hw.digest })),
    Effect.catchTag("RunNotFound", () => Effect.succeed({ seq: 0, digest: Digest.genesis(runId) })),
    Effect.tap((hw) => Effect.sync(() => highWaters.set(runId, hw)))
  )

// ---------------------------------------------------------------------------------------------------------------
// Mode `torture`.

/** The line the parent writes on the child's stdin once the workspace is the child's to open. */
export const GO_LINE = "go"

// The first line on stdin; `undefined` when stdin ends first (the parent is gone: touch nothing).
const awaitGo = NodeStream.fromReadable<unknown, Uint8Array>(() => process.stdin, (error) => error).pipe(
  Stream.decodeText(),
  Stream.splitLines,
  Stream.runHead,
  Effect.map(Option.getOrUndefined),
  Effect.orElseSucceed(() => undefined)
)

/**
 * Waits for `go` on stdin (the parent starts the child ahead, so its module loading overlaps the previous kill and
 * its check), then appends forever through one fiber per run and one `appendBatch` fiber, printing every
 * acknowledged row. Nothing touches the workspace before `go`; stdin ending without it ends the child.
 */
export const torture = (store: TortureStore, workspace: string, iteration: string, seed: number, pauseMs: number) =>
  Effect.gen(function*() {
    const go = yield* awaitGo
    if (go?.trim() !== GO_LINE) return
    const ledger = yield* openStore(store, workspace)
    const highWaters: HighWaters = new Map()
    for (const runId of TORTURE_RUNS) yield* loadHighWater(ledger, highWaters, runId)

    const runFiber = (runId: string, fiber: string, random: () => number) =>
      Effect.gen(function*() {
        let n = 0
        while (true) {
          const tag = `${iteration}.${fiber}.${++n}`
          const hw = highWaters.get(runId)!
          const ts = yield* Clock.currentTimeMillis
          const events = groupEvents(runId, hw, tag, ts, random)
          const rows = yield* ledger.append(RunId.make(runId), events, { expectedHighWater: hw }).pipe(
            Effect.catchTag("RuntimeOffsetMismatch", (error) => Effect.as(refresh(highWaters, error), undefined))
          )
          if (rows !== undefined) {
            remember(highWaters, rows)
            yield* printAcks(rows)
          }
          if (pauseMs > 0) yield* Effect.sleep(Math.floor(random() * pauseMs))
        }
      })

    const batchFiber = (random: () => number) =>
      Effect.gen(function*() {
        let n = 0
        while (true) {
          const tag = `${iteration}.b.${++n}`
          const count = 2 + Math.floor(random() * 2)
          const runs = [...TORTURE_RUNS].sort(() => random() - 0.5).slice(0, count)
          const ts = yield* Clock.currentTimeMillis
          const batches: Array<RunBatch> = runs.map((runId) => {
            const hw = highWaters.get(runId)!
            return { runId: RunId.make(runId), events: groupEvents(runId, hw, tag, ts, random), expectedHighWater: hw }
          })
          const rows = yield* ledger.appendBatch(batches).pipe(
            Effect.catchTag("RuntimeOffsetMismatch", (error) => Effect.as(refresh(highWaters, error), undefined))
          )
          if (rows !== undefined) {
            for (const r of rows) remember(highWaters, r)
            yield* printAcks(rows.flat())
          }
          if (pauseMs > 0) yield* Effect.sleep(Math.floor(random() * pauseMs))
        }
      })

    const base = prng(seed)
    const seeds = TORTURE_FIBERS.map(() => Math.floor(base() * 2 ** 32))
    yield* Effect.all([
      ...TORTURE_RUNS.map((runId, i) => runFiber(runId, TORTURE_FIBERS[i]!, prng(seeds[i]!))),
      batchFiber(prng(seeds[TORTURE_RUNS.length]!))
    ], { concurrency: "unbounded", discard: true })
  }).pipe(Effect.scoped)

// ---------------------------------------------------------------------------------------------------------------
// Mode `hold`: take the writer's store (and its lock) and keep it until killed.

/**
 * Prints `{"waiting":pid}`, opens the store for writing (waiting up to `lockTimeoutMs` for the lock), prints
 * `{"ready":pid}`, and waits forever; on `WorkspaceLocked` it prints `{"error":{…,"holderPid"}}` and exits 3.
 */
export const hold = (store: TortureStore, workspace: string, lockTimeoutMs: number) =>
  Effect.gen(function*() {
    yield* print({ waiting: process.pid })
    yield* openStore(store, workspace, lockTimeoutMs)
    yield* print({ ready: process.pid })
    return yield* Effect.never
  }).pipe(
    Effect.scoped,
    Effect.catchTag("WorkspaceLocked", (error) =>
      Effect.zipRight(
        print({ error: { _tag: error._tag, holderPid: error.holderPid ?? null, message: error.message } }),
        Effect.sync(() => process.exit(LOCKED_EXIT_CODE))
      ))
  )

// ---------------------------------------------------------------------------------------------------------------
// Mode `race`: two of these append to their own run and to one shared run, with compare-and-append.

/** The run every `race` child appends to. */
export const RACE_SHARED_RUN = "race-shared"

/**
 * Opens the store, prints `{"ready":pid}`, waits for the file `goFile`, then makes `count` rounds of one append to
 * `race-<writer>` and one compare-and-append to the shared run (retried on `RuntimeOffsetMismatch`, each printed as
 * `{"mismatch":runId}`). Every acknowledged row is printed with `writer` and `t` (Clock ms); then `{"done":n}`.
 */
export const race = (store: TortureStore, workspace: string, writer: string, count: number, goFile: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const ledger = yield* openStore(store, workspace)
    const highWaters: HighWaters = new Map()
    const own = `race-${writer}`
    yield* loadHighWater(ledger, highWaters, own)
    yield* loadHighWater(ledger, highWaters, RACE_SHARED_RUN)
    yield* print({ ready: process.pid })
    while (!(yield* fs.exists(goFile))) yield* Effect.sleep(5)
    const random = prng(writer.length * 7919 + count)
    let mismatches = 0
    const appendTo = (runId: string, n: number) =>
      Effect.gen(function*() {
        while (true) {
          const hw = highWaters.get(runId)!
          const ts = yield* Clock.currentTimeMillis
          const events = groupEvents(runId, hw, `w${writer}.${writer}.${n}`, ts, () => random() * 0.99 + 0.01)
          const rows = yield* ledger.append(RunId.make(runId), events, { expectedHighWater: hw }).pipe(
            Effect.catchTag("RuntimeOffsetMismatch", (error) =>
              Effect.gen(function*() {
                mismatches++
                yield* print({ mismatch: runId, expected: error.expected, actual: error.actual })
                yield* refresh(highWaters, error)
                return undefined
              }))
          )
          if (rows !== undefined) {
            remember(highWaters, rows)
            const t = yield* Clock.currentTimeMillis
            yield* printAcks(rows, { writer, t })
            return
          }
        }
      })
    for (let n = 1; n <= count; n++) {
      yield* appendTo(own, n)
      yield* appendTo(RACE_SHARED_RUN, n)
    }
    yield* print({ done: count, mismatches })
  }).pipe(Effect.scoped)

// ---------------------------------------------------------------------------------------------------------------
// Entry point.

const usage = "usage: TortureChild torture <store> <workspace> <iteration> <seed> <pauseMs> (then `go` on stdin) | " +
  "hold <store> <workspace> <lockTimeoutMs> | race <store> <workspace> <writer> <count> <goFile>"

const main = (argv: ReadonlyArray<string>) =>
  Effect.suspend(() => {
    const [mode, store, workspace, a, b, c] = argv
    if ((store !== "sqlite" && store !== "jsonl") || workspace === undefined || workspace === "") {
      return Effect.dieMessage(usage)
    }
    if (mode === "torture" && a !== undefined) return torture(store, workspace, a, Number(b ?? 1), Number(c ?? 0))
    if (mode === "hold") return hold(store, workspace, Number(a ?? 0))
    if (mode === "race" && a !== undefined) return race(store, workspace, a, Number(b ?? 10), c ?? "")
    return Effect.dieMessage(usage)
  })

// Entry point only when run as a script (bundled or through tsx), so the parent can import the helpers above.
if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  NodeRuntime.runMain(
    main(process.argv.slice(2)).pipe(
      // The FileSystem a Node host gives the stores (the CLI's): synchronous file writes and fsync.
      Effect.provide(NodeLedgerFileSystem.layer),
      // Failures go to stderr, which the parent collects (runMain would report on stdout).
      Effect.tapErrorCause((cause) =>
        Effect.sync(() => {
          const failure = Cause.failureOption(cause)
          process.stderr.write(
            `${Option.isSome(failure) ? `${failure.value._tag}: ${failure.value.message}` : Cause.pretty(cause)}\n`
          )
        })
      )
    ),
    { disableErrorReporting: true }
  )
}
