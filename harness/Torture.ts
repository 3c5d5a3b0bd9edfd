// The random-kill campaign (docs/reliability.md, Torture campaign, `runtime-resume torture`): per iteration a child appends to the workspace's runs
// and is SIGKILLed after a seeded random delay; the parent reopens the ledger and checks every acknowledged row survived.
import * as Command from "@effect/platform/Command"
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Clock from "effect/Clock"
import * as Console from "effect/Console"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { fileURLToPath, pathToFileURL } from "node:url"
import { createRequire } from "node:module"
import * as Digest from "../src/Domain/Digest.js"
import { LedgerCorruption } from "../src/Domain/Errors.js"
import { RunId } from "../src/Domain/Ids.js"
import * as RuntimeEvent from "../src/Domain/RuntimeEvent.js"
import { quarantineTornTail } from "../src/Layers/JsonlRuntimeEventStore.js"
import * as NodeRuntimeEventStore from "../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import type { Ack, TortureStore } from "./TortureChild.js"
import { GO_LINE, parseTortureEventId, prng, TORTURE_RUNS, tortureEventId } from "./TortureChild.js"
import { childArgv, isCompiled } from "./ChildScript.js"

export type { Ack, TortureStore } from "./TortureChild.js"

/** The sentence every output of the campaign carries: what a SIGKILL campaign can and cannot prove. */
export const DURABILITY_NOTE = "A killed process's page cache survives the kill, so this campaign proves ordering and " +
  "atomicity only, never durability (power loss)."

/** When the campaign starts the next child ahead of its `go`. */
export type Prewarm = "during-delay" | "after-kill" | "off"

/**
 * Kills per workspace before the campaign starts a fresh one (`--rotate`). JSONL rotates sooner: its writer verifies
 * the whole file when it opens, so each child's start-up, and not only the parent's check, grows with the ledger.
 */
export const DEFAULT_ITERATIONS_PER_WORKSPACE: Readonly<Record<TortureStore, number>> = { sqlite: 25, jsonl: 10 }

/** The stores the campaign runs on, in output order. */
export const TORTURE_STORES: ReadonlyArray<TortureStore> = ["sqlite", "jsonl"]

const CHILD_TS = fileURLToPath(new URL("./TortureChild.ts", import.meta.url))
const PROJECT_ROOT = fileURLToPath(new URL("..", import.meta.url))
// How long a child may take to start and acknowledge its first row (a loaded CI machine), and to die once killed.
const FIRST_ACK_TIMEOUT = Duration.seconds(60)
const EXIT_TIMEOUT = Duration.seconds(10)

/** What `runTorture` runs. */
export interface TortureOptions {
  /** Both stores unless narrowed. */
  readonly stores?: ReadonlyArray<TortureStore>
  /** Kills per store; default 100. */
  readonly iterations?: number
  /** The PRNG seed of the kill delays and the children's choices; default 1. */
  readonly seed?: number
  /** Bundle the child with esbuild (default) or run it through `node --import tsx`. */
  readonly bundle?: boolean
  /** The kill delay after the child's first acknowledgement, drawn uniformly in [min, max] ms; default 50–400. */
  readonly delayMs?: { readonly min: number; readonly max: number }
  /**
   * Kills per workspace before a fresh one starts, so a long campaign's ledger (and the cost of reopening and
   * verifying it after every kill) stays bounded; default `DEFAULT_ITERATIONS_PER_WORKSPACE` of the store.
   */
  readonly iterationsPerWorkspace?: number
  /**
   * When the next child starts (it loads its modules, then waits for its `go`, which comes after the previous kill's
   * check): during the kill delay (two children of the store alive at once), once the child is dead, or at its `go`
   * (`off`). Default: during the delay when the stores run one after another; with stores in parallel, at most once
   * the child is dead, so that never more than two children are alive.
   */
  readonly prewarm?: Prewarm
  /** Each child fiber pauses up to this many ms between appends (bounds the ledger's growth); default 4. */
  readonly pauseMs?: number
  /** Stores run at once; default 1 (one after another). */
  readonly concurrency?: number
  /** Progress lines on stderr every this many iterations; default 25, 0 for none. */
  readonly progressEvery?: number
}

/** One store's results. `pass` is true only when no acknowledged event was lost and every check held. */
export interface StoreSummary {
  readonly store: TortureStore
  readonly iterations: number
  readonly kills: number
  readonly acknowledged: number
  readonly lost: number
  readonly tornTails: number
  readonly repairs: number
  /** Appends committed but unacknowledged when the kill came (allowed: at most one per child fiber). */
  readonly inFlight: number
  /** Workspaces used, and kills per workspace (every kill reopens and fully verifies its workspace). */
  readonly workspaces: number
  readonly iterationsPerWorkspace: number
  /**
   * Mean ms from `go` (the workspace handed to the child) to its first acknowledgement, mean ms of the parent's
   * reopen, full verification and repair after a kill, and mean ms per whole iteration.
   */
  readonly startupMs: number
  readonly checkMs: number
  readonly msPerKill: number
  readonly problems: ReadonlyArray<string>
  readonly pass: boolean
}

/** A step of the campaign that could not be carried out (bundling, spawning, a child dying on its own). */
export class TortureStepFailed extends Data.TaggedError("TortureStepFailed")<{ readonly message: string }> {}

const failed = (message: string) => new TortureStepFailed({ message })

const errorMessage = (error: unknown): string =>
  typeof error === "object" && error !== null && "message" in error && typeof error.message === "string"
    ? error.message
    : String(error)

// ---------------------------------------------------------------------------------------------------------------
// The child: bundled once per campaign into one ESM file, so each start loads no TypeScript loader.

/** How to start the torture child: the command line before its own arguments. */
export interface ChildCommand {
  readonly argv: ReadonlyArray<string>
  readonly cwd: string
  readonly bundled: boolean
}

/** The child through `node --import tsx` (slow to start: tsx's hooks compile every module). */
export const tsxChild: ChildCommand = { argv: [process.execPath, "--import", "tsx", CHILD_TS], cwd: PROJECT_ROOT, bundled: false }

/** The child as the caller runs: through tsx from the sources, plain `node TortureChild.js` when compiled (dist). */
export const sourceChild: ChildCommand = isCompiled(import.meta.url)
  ? { argv: childArgv(import.meta.url, "TortureChild"), cwd: PROJECT_ROOT, bundled: true }
  : tsxChild

/**
 * Bundles `harness/TortureChild.ts` with esbuild into `<dir>/torture-child.mjs`: one ESM file with every dependency
 * inlined except better-sqlite3 (native), which it imports by absolute file URL so the bundle runs from any folder.
 */
export const bundleChild = (dir: string): Effect.Effect<ChildCommand, TortureStepFailed, Path.Path> =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const outfile = path.join(dir, "torture-child.mjs")
    const require = createRequire(pathToFileURL(path.join(PROJECT_ROOT, "package.json")).href)
    yield* Effect.tryPromise({
      try: async () => {
        const esbuild = await import("esbuild")
        await esbuild.build({
          entryPoints: [CHILD_TS],
          outfile,
          bundle: true,
          platform: "node",
          format: "esm",
          target: "node20",
          logLevel: "error",
          // Bundled CommonJS code may call `require` for Node's own modules.
          banner: {
            js: "import { createRequire as __rrCreateRequire } from 'node:module'; " +
              "const require = __rrCreateRequire(import.meta.url);"
          },
          plugins: [{
            name: "native-external",
            setup: (build) => {
              build.onResolve({ filter: /^better-sqlite3$/ }, (args) => ({
                path: pathToFileURL(require.resolve(args.path)).href,
                external: true
              }))
            }
          }]
        })
      },
      catch: (error) => failed(`could not bundle ${CHILD_TS} with esbuild: ${errorMessage(error)}`)
    })
    const command: ChildCommand = { argv: [process.execPath, outfile], cwd: dir, bundled: true }
    return command
  })

// ---------------------------------------------------------------------------------------------------------------
// One kill.

/** What one child said before it died. */
export interface KillOutcome {
  readonly acks: ReadonlyArray<Ack>
  /** ms from `go` (the workspace handed to the child) to its first acknowledgement. */
  readonly startupMs: number
  /** ms from the spawn to `go`: the child loading its modules, overlapped with the previous kill and its check. */
  readonly warmMs: number
  /** ms from the kill to the child's exit and the end of its stdout. */
  readonly reapMs: number
}

const parseAck = (line: string): Ack | undefined => {
  try {
    const value: unknown = JSON.parse(line)
    if (typeof value !== "object" || value === null) return undefined
    const { runId, seq, digest } = value as Record<string, unknown>
    return typeof runId === "string" && typeof seq === "number" && typeof digest === "string"
      ? { runId, seq, digest }
      : undefined
  } catch {
    return undefined
  }
}

/** A started torture child that waits for `go` on stdin before it opens its workspace. */
export interface StartedChild {
  readonly pid: number
  readonly spawnedAt: number
  /** Writes `go` on the child's stdin (and closes it). */
  readonly go: Effect.Effect<void, TortureStepFailed>
  readonly isRunning: Effect.Effect<boolean>
  readonly kill: Effect.Effect<void, TortureStepFailed>
  /** Waits for the child's end: true when a signal ended it, false when it exited by itself. */
  readonly killedBySignal: Effect.Effect<boolean>
  /** Completes with the time of the first line on stdout, or `undefined` when stdout ended first. */
  readonly firstLine: Effect.Effect<number | undefined>
  /** Completes when stdout has ended, with every line read. */
  readonly allLines: Effect.Effect<ReadonlyArray<string>>
  /** What the child wrote on stderr (at most about 4 KB), once it ended. */
  readonly stderr: Effect.Effect<string>
  readonly exitCode: Effect.Effect<number | undefined>
}

/**
 * Spawns the torture child with `args` in the current scope (closing it ends the child): the child loads its modules
 * and waits for `go` on stdin, so the parent can start it ahead, while the previous kill runs and is checked.
 */
export const startChild = (
  child: ChildCommand,
  args: ReadonlyArray<string>
): Effect.Effect<StartedChild, TortureStepFailed, CommandExecutor.CommandExecutor | Scope.Scope> =>
  Effect.gen(function*() {
    const spawnedAt = yield* Clock.currentTimeMillis
    const proc = yield* Command.make(child.argv[0]!, ...child.argv.slice(1), ...args).pipe(
      Command.workingDirectory(child.cwd),
      Command.start,
      Effect.mapError((error) => failed(`could not start the torture child: ${error.message}`))
    )
    const firstLine = yield* Deferred.make<number | undefined>()
    const lines: Array<string> = []
    const stdout = yield* proc.stdout.pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.runForEach((line) =>
        Effect.suspend(() => {
          lines.push(line)
          return lines.length === 1 ? Effect.flatMap(Clock.currentTimeMillis, (t) => Deferred.succeed(firstLine, t)) : Effect.void
        })
      ),
      Effect.orElseSucceed(() => undefined),
      Effect.zipRight(Deferred.succeed(firstLine, undefined)),
      Effect.forkScoped
    )
    const stderr = yield* proc.stderr.pipe(
      Stream.decodeText(),
      Stream.runFold("", (text, chunk) => text.length > 4000 ? text : text + chunk),
      Effect.orElseSucceed(() => ""),
      Effect.forkScoped
    )
    const started: StartedChild = {
      pid: proc.pid,
      spawnedAt,
      go: Stream.run(Stream.make(new TextEncoder().encode(`${GO_LINE}\n`)), proc.stdin).pipe(
        Effect.mapError((error) => failed(`could not write go to child ${proc.pid}: ${error.message}`))
      ),
      isRunning: proc.isRunning.pipe(Effect.orElseSucceed(() => false)),
      kill: proc.kill("SIGKILL").pipe(
        Effect.timeoutFail({ duration: EXIT_TIMEOUT, onTimeout: () => failed(`child ${proc.pid} survived SIGKILL`) }),
        Effect.mapError((error) => error._tag === "TortureStepFailed" ? error : failed(`could not kill: ${error.message}`))
      ),
      // After a signal, `exitCode` fails instead of returning a code; a code means the child ended on its own.
      killedBySignal: Effect.isFailure(proc.exitCode),
      exitCode: proc.exitCode.pipe(Effect.orElseSucceed(() => undefined)),
      firstLine: Deferred.await(firstLine),
      allLines: Effect.as(Fiber.join(stdout), lines),
      stderr: Fiber.join(stderr).pipe(
        Effect.timeoutTo({ duration: EXIT_TIMEOUT, onTimeout: () => "", onSuccess: (text) => text.trim() })
      )
    }
    return started
  })

/**
 * Hands the workspace to a started child (`go`), waits for its first acknowledgement, SIGKILLs it `delayMs` later
 * (running `duringDelay` in that time), and returns every row it acknowledged (its stdout read to EOF). A child that
 * exits by itself, or never acknowledges, fails the step.
 */
export const goAndKill = <R = never>(
  started: StartedChild,
  delayMs: number,
  duringDelay: Effect.Effect<void, never, R> = Effect.void
): Effect.Effect<KillOutcome, TortureStepFailed, R> =>
  Effect.gen(function*() {
    const goAt = yield* Clock.currentTimeMillis
    yield* started.go.pipe(
      Effect.catchAll((error) => Effect.flatMap(started.stderr, (text) => Effect.fail(failed(`${error.message}: ${text}`))))
    )
    const first = yield* started.firstLine.pipe(
      Effect.timeoutFail({
        duration: FIRST_ACK_TIMEOUT,
        onTimeout: () => failed(`child ${started.pid} acknowledged nothing within ${Duration.format(FIRST_ACK_TIMEOUT)}`)
      })
    )
    if (first === undefined) {
      return yield* failed(`the child ended before acknowledging anything: ${yield* started.stderr}`)
    }
    yield* duringDelay
    const elapsed = (yield* Clock.currentTimeMillis) - first
    if (elapsed < delayMs) yield* Effect.sleep(Duration.millis(delayMs - elapsed))
    const killedAt = yield* Clock.currentTimeMillis
    if (yield* started.isRunning) yield* started.kill
    const bySignal = yield* started.killedBySignal
    const lines = yield* started.allLines.pipe(
      Effect.timeoutFail({
        duration: EXIT_TIMEOUT,
        onTimeout: () => failed(`the stdout of child ${started.pid} did not end within ${Duration.format(EXIT_TIMEOUT)}`)
      })
    )
    const reapedAt = yield* Clock.currentTimeMillis
    if (!bySignal) {
      return yield* failed(
        `the child exited with code ${yield* started.exitCode} before the kill: ${yield* started.stderr}`
      )
    }
    const acks: Array<Ack> = []
    for (const line of lines) {
      const ack = parseAck(line)
      if (ack !== undefined) acks.push(ack)
    }
    const outcome: KillOutcome = {
      acks,
      startupMs: first - goAt,
      warmMs: goAt - started.spawnedAt,
      reapMs: reapedAt - killedAt
    }
    return outcome
  })

// ---------------------------------------------------------------------------------------------------------------
// The check after a kill.

/** What the parent knows of the ledger: every run's digests by seq, as last verified. */
export interface LedgerModel {
  readonly runs: Map<string, Array<string>>
  /** Whether the post-quarantine append check already ran in this campaign. */
  appendCheckedAfterRepair: boolean
}

/** An empty model (a fresh workspace). */
export const emptyModel = (): LedgerModel => ({ runs: new Map(), appendCheckedAfterRepair: false })

/** The verdict on a workspace after one kill. */
export interface CheckResult {
  /** Acknowledged (or previously verified) rows that are missing or differ. */
  readonly lost: number
  /** A torn JSONL tail was found (`LedgerCorruption torn_row`), and quarantined. */
  readonly tornTail: boolean
  readonly repaired: boolean
  /** Unacknowledged appends beyond the known ledger: the appends in flight at the kill. */
  readonly inFlight: number
  readonly problems: ReadonlyArray<string>
}

const readerLayer = (store: TortureStore, workspace: string) =>
  NodeRuntimeEventStore.layerStore(store, { workspace, readOnly: true })

// Every run's verified rows, through a new read-only store instance: one verified pass over the whole ledger
// (`exportRows` checks density, the chain, identities, the rules and group completeness of every run as it streams;
// a JSONL `readRun` scans the whole file once per run). With `perRun`, every run is also read with `readRun` and must
// give the same rows.
const readAll = (store: TortureStore, workspace: string, perRun: boolean) =>
  Effect.gen(function*() {
    const ledger = yield* readerLayer(store, workspace).pipe(Layer.build, Effect.map(Context.get(RuntimeEventStore)))
    const runIds = yield* ledger.listRuns()
    const runs = new Map<string, Array<RuntimeEvent.CommittedRow>>(runIds.map((runId) => [runId, []]))
    yield* Stream.runForEach(ledger.exportRows(), (row) =>
      Effect.suspend(() => {
        const rows = runs.get(row.event.runId)
        if (rows === undefined) return Effect.fail(failed(`exportRows gave a row of ${row.event.runId}, which listRuns does not name`))
        rows.push(row)
        return Effect.void
      }))
    if (perRun) {
      for (const runId of runIds) {
        const rows = yield* ledger.readRun(runId)
        const exported = runs.get(runId)!
        if (rows.length !== exported.length || rows.some((row, i) => row.digest !== exported[i]!.digest)) {
          return yield* failed(`readRun(${runId}) gave ${rows.length} rows, exportRows ${exported.length}, or other digests`)
        }
      }
    }
    return runs as Map<string, ReadonlyArray<RuntimeEvent.CommittedRow>>
  }).pipe(Effect.scoped)

// After a quarantine: a writer opens the ledger, appends with compare-and-append, and the chain continues.
const appendAfterRepair = (store: TortureStore, workspace: string, iteration: string) =>
  Effect.gen(function*() {
    const ledger = yield* NodeRuntimeEventStore.layerStore(store, { workspace, readOnly: false }).pipe(
      Layer.build,
      Effect.map(Context.get(RuntimeEventStore))
    )
    const runIds = yield* ledger.listRuns()
    const runId = runIds[0] ?? RunId.make(TORTURE_RUNS[0])
    const hw = yield* ledger.highWater(runId)
    const ts = yield* Clock.currentTimeMillis
    const event = EventBuilder.make(runId, ts).custom(
      new RuntimeEvent.Diagnostic({ message: "appended by the torture parent after a quarantine" }),
      { id: tortureEventId(runId, hw.seq + 1, `${iteration}.p.1`) }
    )
    const rows = yield* ledger.append(runId, [event], { expectedHighWater: { seq: hw.seq, digest: hw.digest } })
    const text = RuntimeEvent.canonicalText(event)
    const row = rows[0]
    if (rows.length !== 1 || row === undefined || row.seq !== hw.seq + 1 || Either.isLeft(text)) {
      return yield* failed(`after the quarantine, the append to ${runId} returned ${rows.length} rows, not seq ${hw.seq + 1}`)
    }
    const expected = Digest.next(hw.digest, row.seq, text.right)
    if (row.digest !== expected) {
      return yield* failed(`after the quarantine, the chain of ${runId} does not continue: ${row.digest} != ${expected}`)
    }
    const ack: Ack = { runId, seq: row.seq, digest: row.digest }
    return ack
  }).pipe(Effect.scoped)

/**
 * Reopens the workspace after a kill and checks it against the model and the child's acknowledgements: a torn JSONL
 * tail is counted and quarantined (and, once per model, a direct append proves the chain continues); every run
 * verifies; every previously verified row and every acknowledged row is there with its digest (else it is lost);
 * every group is complete; and the unacknowledged new rows are at most one append per child fiber of `iteration`.
 * The model is updated to the ledger as read. It never fails: problems are reported.
 */
export const checkWorkspace = (
  store: TortureStore,
  workspace: string,
  model: LedgerModel,
  acks: ReadonlyArray<Ack>,
  iteration: string,
  options: { readonly perRun?: boolean } = {}
): Effect.Effect<CheckResult, never, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const problems: Array<string> = []
    let tornTail = false
    let repaired = false
    const extraAcks: Array<Ack> = []
    const perRun = options.perRun ?? true
    let read = yield* Effect.either(readAll(store, workspace, perRun))
    if (read._tag === "Left" && read.left instanceof LedgerCorruption && read.left.reason === "torn_row") {
      tornTail = true
      const quarantine = yield* Effect.either(quarantineTornTail(workspace))
      if (quarantine._tag === "Left") {
        problems.push(`quarantining the torn tail failed: ${quarantine.left._tag}: ${quarantine.left.message}`)
      } else if (!quarantine.right.quarantined) {
        problems.push("the reader reported a torn tail but quarantine found none")
      } else {
        repaired = true
        if (!model.appendCheckedAfterRepair) {
          model.appendCheckedAfterRepair = true
          const appended = yield* Effect.either(appendAfterRepair(store, workspace, iteration))
          if (appended._tag === "Left") {
            problems.push(`appending after the quarantine failed: ${errorMessage(appended.left)}`)
          } else {
            extraAcks.push(appended.right)
          }
        }
      }
      read = yield* Effect.either(readAll(store, workspace, perRun))
    }
    if (read._tag === "Left") {
      const error = read.left
      problems.push(`reopening and verifying the ledger failed: ${error._tag}: ${errorMessage(error)}`)
      const known = [...model.runs.values()].reduce((n, digests) => n + digests.length, 0)
      const result: CheckResult = { lost: known + acks.length, tornTail, repaired, inFlight: 0, problems }
      return result
    }
    const runs = read.right
    let lost = 0

    // Every group complete: rows s..e of one append carry end e, and the run's last row closes its group.
    for (const [runId, rows] of runs) {
      let groupEnd = 0
      for (const row of rows) {
        if (groupEnd === 0 || row.seq > groupEnd) groupEnd = row.end
        if (row.end !== groupEnd || row.end < row.seq) {
          problems.push(`run ${runId} seq ${row.seq}: end ${row.end} breaks its group (expected ${groupEnd})`)
          break
        }
      }
      const last = rows[rows.length - 1]
      if (last !== undefined && last.end !== last.seq) {
        problems.push(`run ${runId}: its last group is cut (seq ${last.seq}, end ${last.end}): a half append`)
      }
    }

    // Nothing verified before is lost or rewritten.
    for (const [runId, digests] of model.runs) {
      const rows = runs.get(runId) ?? []
      for (let i = 0; i < digests.length; i++) {
        const row = rows[i]
        if (row === undefined || row.digest !== digests[i]) {
          lost++
          if (lost <= 5) {
            problems.push(`run ${runId} seq ${i + 1}: a previously verified row is ${row === undefined ? "missing" : "rewritten"}`)
          }
        }
      }
    }

    // Every acknowledged row is there, byte for byte (equal digest at (run, seq) means equal bytes by the chain).
    const acked = new Set<string>()
    for (const ack of [...acks, ...extraAcks]) {
      acked.add(`${ack.runId}#${ack.seq}`)
      const row = runs.get(ack.runId)?.[ack.seq - 1]
      if (row === undefined || row.seq !== ack.seq || row.digest !== ack.digest) {
        lost++
        if (lost <= 5) {
          problems.push(
            `acknowledged row ${ack.runId} seq ${ack.seq} (${ack.digest}) is ${row === undefined ? "missing" : `different (${row.digest})`}`
          )
        }
      }
    }

    // Unacknowledged new rows: at most the appends in flight, one per child fiber.
    const inFlightByFiber = new Map<string, Set<string>>()
    for (const [runId, rows] of runs) {
      const known = model.runs.get(runId)?.length ?? 0
      for (const row of rows.slice(known)) {
        if (acked.has(`${runId}#${row.seq}`)) continue
        const id = parseTortureEventId(row.event.id)
        if (id === undefined || id.iteration !== iteration) {
          problems.push(`run ${runId} seq ${row.seq}: unacknowledged row ${row.event.id} is not from this iteration's child`)
          continue
        }
        const appends = inFlightByFiber.get(id.fiber) ?? new Set<string>()
        appends.add(id.append)
        inFlightByFiber.set(id.fiber, appends)
      }
    }
    let inFlight = 0
    for (const [fiber, appends] of inFlightByFiber) {
      inFlight += appends.size
      if (appends.size > 1) {
        problems.push(`fiber ${fiber} has ${appends.size} unacknowledged appends (${[...appends].join(", ")}); at most one can be in flight`)
      }
    }

    model.runs.clear()
    for (const [runId, rows] of runs) model.runs.set(runId, rows.map((row) => row.digest))
    const result: CheckResult = { lost, tornTail, repaired, inFlight, problems }
    return result
  }).pipe(Effect.provide(NodeWorkspaceLock.layer))

// ---------------------------------------------------------------------------------------------------------------
// The campaign.

const round = (n: number) => Math.round(n * 10) / 10

// Per-phase ms summed over a progress window.
interface PhaseTimes {
  n: number
  spawn: number
  warm: number
  startup: number
  delay: number
  reap: number
  check: number
  total: number
}

const noTimes = (): PhaseTimes => ({ n: 0, spawn: 0, warm: 0, startup: 0, delay: 0, reap: 0, check: 0, total: 0 })

const PHASES: ReadonlyArray<keyof PhaseTimes> = ["n", "spawn", "warm", "startup", "delay", "reap", "check", "total"]

// One planned kill: its workspace, its drawn delay, and its child, started ahead (it waits for `go`).
interface PlannedKill {
  readonly workspace: Workspace
  readonly delayMs: number
  readonly spawnMs: number
  readonly scope: Scope.CloseableScope
  readonly started: Either.Either<StartedChild, TortureStepFailed>
}

interface Workspace {
  readonly dir: string
  readonly scope: Scope.CloseableScope
}

const runStore = (
  store: TortureStore,
  child: ChildCommand,
  options: TortureOptions,
  storeIndex: number,
  prewarm: Prewarm
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const storeScope = yield* Effect.scope
    const iterations = options.iterations ?? 100
    const perWorkspace = Math.max(1, options.iterationsPerWorkspace ?? DEFAULT_ITERATIONS_PER_WORKSPACE[store])
    const delay = options.delayMs ?? { min: 50, max: 400 }
    const progressEvery = options.progressEvery ?? 25
    const random = prng(((options.seed ?? 1) * 2654435761 + storeIndex * 97) >>> 0)
    const problems: Array<string> = []
    let kills = 0, acknowledged = 0, lost = 0, tornTails = 0, repairs = 0, inFlight = 0, workspaces = 0
    const all = noTimes()
    let window = noTimes()
    const campaignStart = yield* Clock.currentTimeMillis

    // A workspace lives in its own scope: closing it removes the folder once its last kill is checked.
    let workspace: Workspace | undefined
    let workspaceOf = 0
    const workspaceFor = (i: number) =>
      Effect.gen(function*() {
        if (workspace === undefined || (i > workspaceOf && (i - 1) % perWorkspace === 0)) {
          const scope = yield* Scope.fork(storeScope, ExecutionStrategy.sequential)
          const dir = yield* fs.makeTempDirectoryScoped({ prefix: `rr-torture-${store}-` }).pipe(
            Scope.extend(scope),
            Effect.mapError((error) => failed(`could not create a workspace: ${error.message}`))
          )
          workspace = { dir, scope }
          workspaces++
        }
        workspaceOf = i
        return workspace
      })
    // Draws kill i's delay and its child's seed (in iteration order, so a seed replays) and starts its child.
    const plan = (i: number) =>
      Effect.gen(function*() {
        const ws = yield* workspaceFor(i)
        const delayMs = Math.floor(delay.min + random() * (delay.max - delay.min))
        const childSeed = Math.floor(random() * 2 ** 32)
        const scope = yield* Scope.fork(storeScope, ExecutionStrategy.sequential)
        const before = yield* Clock.currentTimeMillis
        const args = ["torture", store, ws.dir, `i${i}`, String(childSeed), String(options.pauseMs ?? 4)]
        const started = yield* Effect.either(Scope.extend(startChild(child, args), scope))
        const spawnMs = (yield* Clock.currentTimeMillis) - before
        const planned: PlannedKill = { workspace: ws, delayMs, spawnMs, scope, started }
        return planned
      })

    let model = emptyModel()
    let previousEnd = campaignStart
    let next: PlannedKill | undefined
    for (let i = 1; i <= iterations; i++) {
      const current: PlannedKill = next ?? (yield* plan(i))
      next = undefined
      const iteration = `i${i}`
      // The next child starts ahead (it touches nothing before its `go`, which comes after this kill's check):
      // during this child's kill delay, or once this child is dead.
      const planNext = i < iterations ? Effect.map(plan(i + 1), (planned) => {
        next = planned
      }) : Effect.void
      const outcome: Either.Either<KillOutcome, TortureStepFailed> = Either.isLeft(current.started)
        ? Either.left(current.started.left)
        : yield* Effect.either(
          goAndKill(current.started.right, current.delayMs, prewarm === "during-delay" ? Effect.ignore(planNext) : Effect.void)
        )
      yield* Scope.close(current.scope, Exit.void)
      if (next === undefined && prewarm !== "off") yield* planNext
      const acks = Either.isRight(outcome) ? outcome.right.acks : []
      const times = noTimes()
      times.spawn = current.spawnMs
      if (Either.isLeft(outcome)) problems.push(`${store} ${iteration}: ${outcome.left.message}`)
      else {
        kills++
        times.warm = outcome.right.warmMs
        times.startup = outcome.right.startupMs
        times.reap = outcome.right.reapMs
        times.delay = current.delayMs
      }
      acknowledged += acks.length
      const leaving = i % perWorkspace === 0 || i === iterations
      // Every run is also read with `readRun` every tenth kill and before a workspace is left.
      const perRun = i % 10 === 0 || leaving
      const checkStart = yield* Clock.currentTimeMillis
      const check = yield* checkWorkspace(store, current.workspace.dir, model, acks, iteration, { perRun })
      const end = yield* Clock.currentTimeMillis
      times.check = end - checkStart
      times.total = end - previousEnd
      previousEnd = end
      times.n = 1
      for (const key of PHASES) {
        window[key] += times[key]
        all[key] += times[key]
      }
      lost += check.lost
      inFlight += check.inFlight
      if (check.tornTail) tornTails++
      if (check.repaired) repairs++
      for (const problem of check.problems) problems.push(`${store} ${iteration}: ${problem}`)
      if (leaving) {
        yield* Scope.close(current.workspace.scope, Exit.void)
        model = emptyModel()
      }
      if (progressEvery > 0 && (i % progressEvery === 0 || i === iterations)) {
        const elapsed = end - campaignStart
        const mean = (key: keyof PhaseTimes) => round(window[key] / Math.max(1, window.n))
        yield* Console.error(
          `torture: ${store} ${i}/${iterations} kills, ${acknowledged} acknowledged, ${lost} lost, ${tornTails} torn tails, ` +
            `${repairs} repairs, ${problems.length} problems, ${round(elapsed / i)} ms/kill; last ${window.n}: ` +
            `${mean("total")} ms/kill = start ${mean("startup")} + delay ${mean("delay")} + reap ${mean("reap")} + ` +
            `check ${mean("check")} (spawn ${mean("spawn")} and warm-up ${mean("warm")} overlapped)`
        )
        window = noTimes()
      }
    }
    const elapsed = (yield* Clock.currentTimeMillis) - campaignStart
    const summary: StoreSummary = {
      store,
      iterations,
      kills,
      acknowledged,
      lost,
      tornTails,
      repairs,
      inFlight,
      workspaces,
      iterationsPerWorkspace: perWorkspace,
      startupMs: kills > 0 ? round(all.startup / kills) : 0,
      checkMs: iterations > 0 ? round(all.check / iterations) : 0,
      msPerKill: iterations > 0 ? round(elapsed / iterations) : 0,
      problems,
      pass: lost === 0 && problems.length === 0 && kills === iterations
    }
    return summary
  }).pipe(
    Effect.scoped,
    Effect.catchAll((error) =>
      Effect.succeed<StoreSummary>({
        store,
        iterations: options.iterations ?? 100,
        kills: 0,
        acknowledged: 0,
        lost: 0,
        tornTails: 0,
        repairs: 0,
        inFlight: 0,
        workspaces: 0,
        iterationsPerWorkspace: Math.max(1, options.iterationsPerWorkspace ?? DEFAULT_ITERATIONS_PER_WORKSPACE[store]),
        startupMs: 0,
        checkMs: 0,
        msPerKill: 0,
        problems: [`${store}: ${error.message}`],
        pass: false
      })
    )
  )

/**
 * Runs the random-kill campaign on each store (its own workspaces, one child at a time per store) and returns one
 * summary per store. It bundles the child once (or uses tsx), prints the durability note and progress on stderr,
 * and never fails: problems are in the summaries.
 */
export const runTorture = (
  options: TortureOptions = {}
): Effect.Effect<
  ReadonlyArray<StoreSummary>,
  never,
  CommandExecutor.CommandExecutor | FileSystem.FileSystem | Path.Path
> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const stores = TORTURE_STORES.filter((store) => options.stores === undefined || options.stores.includes(store))
    yield* Console.error(
      `torture: ${options.iterations ?? 100} kills per store on ${stores.join(", ")}, seed ${options.seed ?? 1}. ${DURABILITY_NOTE}`
    )
    let child = sourceChild
    // Compiled (dist), the child is already plain JavaScript: nothing to bundle.
    if (options.bundle !== false && !isCompiled(import.meta.url)) {
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "rr-torture-child-" }).pipe(Effect.orDie)
      const start = yield* Clock.currentTimeMillis
      const bundled = yield* Effect.either(bundleChild(dir))
      if (bundled._tag === "Right") {
        child = bundled.right
        yield* Console.error(`torture: bundled the child in ${(yield* Clock.currentTimeMillis) - start} ms`)
      } else {
        yield* Console.error(`torture: ${bundled.left.message}; falling back to node --import tsx (slower start-up)`)
      }
    }
    const concurrency = Math.max(1, Math.min(options.concurrency ?? 1, stores.length))
    // Never more than two children alive: a store that starts its next child during the delay has two of its own.
    const prewarm: Prewarm = concurrency > 1
      ? (options.prewarm === "off" ? "off" : "after-kill")
      : options.prewarm ?? "during-delay"
    yield* Console.error(
      `torture: ${concurrency > 1 ? "stores in parallel" : "one store after another"}; a fresh workspace every ` +
        stores.map((store) => `${options.iterationsPerWorkspace ?? DEFAULT_ITERATIONS_PER_WORKSPACE[store]} ${store}`)
          .join(", ") +
        " kills, and every kill reopens and fully verifies its workspace through a new reader"
    )
    return yield* Effect.forEach(
      stores,
      (store) => runStore(store, child, options, TORTURE_STORES.indexOf(store), prewarm),
      { concurrency }
    )
  }).pipe(Effect.scoped)

/** Whether the campaign passed: every store's summary passed (no event lost, every check held). */
export const tortureOk = (summaries: ReadonlyArray<StoreSummary>): boolean =>
  summaries.length > 0 && summaries.every((summary) => summary.pass)
