// Following the tool's own advice from outside, as a person would (docs/recovery.md): a real child SIGKILLed inside a
// file write, then only the `next` that `inspect --json` prints, run through the REAL executable, until the workspace
// is settled; never the same advice twice, never a refused command. One test per finding of the recovery issue.
import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { CHILD_PATH, CHILD_RUN } from "../harness/FileWriteChild.js"
import { RecoveryResolver, RuntimeEventStore } from "runtime-resume/promise"

const OWNER_CHILD = fileURLToPath(new URL("../harness/OwnerLockChild.ts", import.meta.url))
const ROOT = fileURLToPath(new URL("..", import.meta.url))
const BIN = fileURLToPath(new URL("../bin/runtime-resume", import.meta.url))
const FLAG = "MAKA_RUNTIME_SAFE_BOUNDARY_RESUME"
const CALL = "call-1"

interface CliResult {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

// Runs the real executable (the flag unset), with extra environment when given.
const cli = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.scoped(Effect.gen(function*() {
    const proc = yield* Command.make(BIN, ...args).pipe(
      Command.workingDirectory(ROOT),
      Command.env({ [FLAG]: "", RUNTIME_RESUME_INVOKED_AS: "", npm_command: "", ...env }),
      Command.start
    )
    const [out, err, code] = yield* Effect.all([
      proc.stdout.pipe(Stream.decodeText(), Stream.mkString),
      proc.stderr.pipe(Stream.decodeText(), Stream.mkString),
      proc.exitCode
    ], { concurrency: "unbounded" })
    return { code: Number(code), stdout: out, stderr: err } satisfies CliResult
  }))

const json = (result: CliResult) => JSON.parse(result.stdout) as any

// A real child runs one write_file call (managed: with a run header) and is SIGKILLed at `point`.
const crashInsideWrite = (store: "sqlite" | "jsonl", point: "before_rename" | "after_rename", managed: boolean) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-advice-" })
    const root = join(ws, "project")
    yield* fs.makeDirectory(root)
    yield* Effect.scoped(Effect.gen(function*() {
      const proc = yield* Command.make(process.execPath, "--import", "tsx", CHILD_PATH, store, ws, root, point, ...(managed ? ["managed"] : [])).pipe(
        Command.workingDirectory(ROOT),
        Command.start
      )
      const reached = yield* proc.stdout.pipe(Stream.decodeText(), Stream.splitLines, Stream.takeUntil((line) => line === `at ${point}`), Stream.runCollect)
      assert.include([...reached], `at ${point}`)
      yield* proc.kill("SIGKILL")
    }))
    return { fs, ws, root }
  })

/** Which `resolve` choice a person takes when the advice is resolve: its flags, with the result for `--edit`. */
type Choice = "--retry" | "--abort" | { readonly edit: string }

/**
 * Follows the printed advice: `inspect --json`, then the person's `next` of the first run that has one, as its
 * argument array, until `inspect` exits 0 (at most `max` steps). Fails on a refused command (exit 2) and on the same
 * advice twice. Returns the commands it ran and the last inspection.
 */
const follow = (ws: string, choice: Choice, max = 6) =>
  Effect.gen(function*() {
    const seen = new Set<string>()
    const ran: Array<ReadonlyArray<string>> = []
    for (let step = 0; step <= max; step++) {
      const inspected = yield* cli(["inspect", "--json", ws])
      const doc = json(inspected)
      if (inspected.code === 0) return { ran, doc }
      const next = doc.next?.person ?? doc.runs.find((run: any) => run.next?.person?.kind === "command")?.next.person
      assert.isDefined(next, `exit ${inspected.code} with no command to follow: ${inspected.stdout}`)
      assert.strictEqual(next.kind, "command", JSON.stringify(next))
      const key = JSON.stringify(next.argv)
      assert.isFalse(seen.has(key), `the same advice twice: ${key}`)
      seen.add(key)
      let argv: ReadonlyArray<string> = next.argv
      if (next.verb === "resolve") {
        const wanted = typeof choice === "string" ? choice : "--edit"
        argv = next.choices.find((c: ReadonlyArray<string>) => c.includes(wanted))
        if (typeof choice !== "string") argv = argv.map((a) => a === "<result JSON>" ? choice.edit : a)
      }
      const result = yield* cli(argv)
      assert.notStrictEqual(result.code, 2, `${argv.join(" ")} was refused: ${result.stdout}${result.stderr}`)
      ran.push(argv)
    }
    return assert.fail(`not settled after ${max} steps: ${ran.map((a) => a.join(" ")).join(" | ")}`)
  })

const verbsOf = (ran: ReadonlyArray<ReadonlyArray<string>>) => ran.map((argv) => argv.filter((a) => a.startsWith("-") || a === argv[0]).filter((a) => a !== "--run" && a !== "--call").join(" "))

describe("following the advice ends in a settled workspace (docs/recovery.md)", () => {
  for (const store of ["sqlite", "jsonl"] as const) {
    it.scoped(`${store}: an unmanaged run killed inside a tool: adopt, reconcile, then the host continues; inspect and the facade agree (findings 1, 5)`, () =>
      Effect.gen(function*() {
        const { ws } = yield* crashInsideWrite(store, "after_rename", false)
        const table = yield* cli(["inspect", ws])
        assert.strictEqual(table.code, 1)
        assert.include(table.stdout, `next: runtime-resume repair --adopt ${ws}`)
        const { doc, ran } = yield* follow(ws, "--retry")
        assert.deepStrictEqual(verbsOf(ran), ["repair --adopt", "reconcile"])
        assert.strictEqual(doc.verdict, "safe_replay")
        const run = doc.runs[0]
        assert.deepStrictEqual([run.state, run.next.person.kind], ["awaiting_continuation", "instruction"])
        assert.include(run.next.person.text, "your host continues this turn on its next start")
        // The host's step (a ModelProvider: the scripted one here) continues it; the source run counts through it.
        const host = run.next.host
        assert.deepStrictEqual(host.argv.slice(0, 4), ["resume", "--run", CHILD_RUN, "--yes"])
        const continued = yield* cli([...host.argv.slice(0, -1), "--tool", "write_file", "--scripted-reply", "done", ws])
        assert.strictEqual(continued.code, 0, continued.stdout + continued.stderr)
        const after = yield* cli(["inspect", "--json", ws])
        assert.strictEqual(after.code, 0, after.stdout)
        const states = json(after).runs.map((r: any) => [r.state, r.verdict])
        assert.deepStrictEqual(states, [["continued", "completed"], ["completed", "completed"]])
        assert.notInclude((yield* cli(["inspect", ws])).stdout, "is blocked:")
        const facade = yield* Effect.promise(async () => new RecoveryResolver(await RuntimeEventStore.open(ws)).computeResumePlan())
        assert.strictEqual(facade, "completed")
      }).pipe(Effect.provide(NodeContext.layer)), { timeout: 180_000 })

    it.scoped(`${store}: killed before the rename: reconcile parks it, a person aborts; inspect exits 0 and the facade says completed (finding 3)`, () =>
      Effect.gen(function*() {
        const { ws } = yield* crashInsideWrite(store, "before_rename", true)
        const { doc, ran } = yield* follow(ws, "--abort")
        assert.deepStrictEqual(verbsOf(ran), ["repair", "reconcile", "resolve --abort"])
        assert.strictEqual(doc.verdict, "completed")
        assert.deepStrictEqual([doc.runs[0].state, doc.runs[0].abandonedBy.length], ["abandoned", 1])
        assert.include((yield* cli(["inspect", ws])).stdout, "abandoned by")
        const facade = yield* Effect.promise(async () => new RecoveryResolver(await RuntimeEventStore.open(ws)).computeResumePlan())
        assert.strictEqual(facade, "completed")
      }).pipe(Effect.provide(NodeContext.layer)), { timeout: 180_000 })
  }

  it.scoped("jsonl: a torn tail is quarantined; a line of garbage: the file moved aside whole (kept), start clean; never the same refused advice (finding 2)", () =>
    Effect.gen(function*() {
      const { fs, ws } = yield* crashInsideWrite("jsonl", "after_rename", true)
      const ledger = join(ws, "runtime-events.jsonl")
      const bytes = yield* fs.readFileString(ledger)
      // A torn tail: its own repair.
      yield* fs.writeFileString(ledger, `${bytes}{"digest":"sha2`)
      const torn = json(yield* cli(["inspect", "--json", ws]))
      assert.deepStrictEqual([torn.runs[0].state, torn.runs[0].next.person.argv], ["torn_tail", ["repair", "--quarantine-torn-tail", ws]])
      assert.strictEqual((yield* cli(["repair", "--quarantine-torn-tail", ws])).code, 0)
      assert.strictEqual(yield* fs.readFileString(ledger), bytes)
      // Garbage inside the file (schema_invalid): no repair mends it; the advice moves the file aside whole.
      const lines = bytes.split("\n")
      const garbage = [lines[0], `{"not":"a row"}`, ...lines.slice(1)].join("\n")
      yield* fs.writeFileString(ledger, garbage)
      const refused = yield* cli(["inspect", "--json", ws])
      assert.strictEqual(refused.code, 2)
      assert.deepStrictEqual(json(refused).runs[0].next.person.argv, ["repair", "--quarantine-ledger", ws])
      const { doc, ran } = yield* follow(ws, "--retry")
      assert.deepStrictEqual(verbsOf(ran), ["repair --quarantine-ledger"])
      assert.deepStrictEqual(doc.runs, [])
      assert.strictEqual(yield* fs.readFileString(join(ws, "runtime-events.jsonl.unreadable-1")), garbage, "kept whole")
      assert.isTrue(yield* fs.exists(join(ws, "run-headers.jsonl.unreadable-1")), "the run headers kept beside it")
    }).pipe(Effect.provide(NodeContext.layer)), { timeout: 180_000 })

  it.scoped("resolve --edit says what happens next, never `resume --yes` to type in the CLI (finding 4)", () =>
    Effect.gen(function*() {
      const { ws } = yield* crashInsideWrite("sqlite", "before_rename", true)
      assert.strictEqual((yield* cli(["repair", ws])).code, 0)
      const resolved = yield* cli(["resolve", "--run", CHILD_RUN, "--call", CALL, "--edit", '{"written":false}', ws])
      assert.strictEqual(resolved.code, 0, resolved.stderr)
      assert.include(resolved.stdout, "your host continues this turn on its next start")
      assert.notMatch(resolved.stdout, /next: \S*runtime-resume resume/)
      const doc = json(yield* cli(["resolve", "--run", CHILD_RUN, "--call", CALL, "--edit", '{"written":false}', "--json", ws]))
      assert.deepStrictEqual([doc.alreadyRecorded, doc.state, doc.next.person.kind], [true, "awaiting_continuation", "instruction"])
      // resume without the host's tools parks; it prints the same next step, not a command that must fail.
      const parked = yield* cli(["resume", ws])
      assert.strictEqual(parked.code, 1)
      assert.include(parked.stdout, "your host continues this turn on its next start")
    }).pipe(Effect.provide(NodeContext.layer)), { timeout: 180_000 })

  it.scoped("hints a person can type: as invoked (npx), the workspace named; a live host: wait, not repair; repair prints its next step (finding 6)", () =>
    Effect.gen(function*() {
      const { ws } = yield* crashInsideWrite("sqlite", "after_rename", true)
      // Through a project's own install (node_modules/.bin), from inside the project: the hint starts with npx.
      const fs = yield* FileSystem.FileSystem
      const project = yield* fs.makeTempDirectoryScoped({ prefix: "rr-project-" })
      yield* fs.makeDirectory(join(project, "node_modules", ".bin"), { recursive: true })
      yield* fs.symlink(BIN, join(project, "node_modules", ".bin", "runtime-resume"))
      const npx = yield* Effect.scoped(Effect.gen(function*() {
        const proc = yield* Command.make(join(project, "node_modules", ".bin", "runtime-resume"), "inspect", ws).pipe(
          Command.workingDirectory(project),
          Command.env({ [FLAG]: "", RUNTIME_RESUME_INVOKED_AS: "", npm_command: "" }),
          Command.start
        )
        return yield* proc.stdout.pipe(Stream.decodeText(), Stream.mkString)
      }))
      assert.include(npx, `next: npx runtime-resume repair ${ws}`)
      const plain = yield* cli(["inspect", ws], { npm_command: "exec" })
      assert.include(plain.stdout, `next: runtime-resume repair ${ws}`, "a checkout's bin is typed as it is")
      // A live host holds the owner lock shared: inspect says a host is running, not repair (which would fail WorkspaceLocked).
      yield* Effect.scoped(Effect.gen(function*() {
        const host = yield* Command.make(process.execPath, "--import", "tsx", OWNER_CHILD, "shared", ws).pipe(Command.workingDirectory(ROOT), Command.start)
        const line = yield* host.stdout.pipe(Stream.decodeText(), Stream.splitLines, Stream.runHead)
        assert.include(line._tag === "Some" ? line.value : "", "Holding")
        const live = json(yield* cli(["inspect", "--json", ws]))
        assert.deepStrictEqual([live.runs[0].state, live.runs[0].next.person.kind], ["open_live", "instruction"])
        assert.include(live.runs[0].next.person.text, "a host is running")
        yield* host.kill("SIGKILL")
      }))
      const repaired = yield* cli(["repair", ws])
      assert.strictEqual(repaired.code, 0)
      assert.include(repaired.stdout, `next: runtime-resume reconcile --run ${CHILD_RUN} ${ws}`)
      const rebuilt = yield* cli(["repair", "--rebuild-derived", ws])
      assert.strictEqual(rebuilt.code, 0, rebuilt.stderr)
      assert.include(rebuilt.stdout, `check: runtime-resume verify ${ws}`)
      const reconciled = yield* cli(["reconcile", ws])
      assert.include(reconciled.stdout, "your host continues this turn on its next start")
    }).pipe(Effect.provide(NodeContext.layer)), { timeout: 180_000 })
})
