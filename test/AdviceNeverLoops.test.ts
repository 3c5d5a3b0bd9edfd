// The generated proof that the CLI's advice never loops (docs/recovery.md): random workspaces in every state of
// recovery, on SQLite and JSONL, and a person who does exactly what `inspect --json` tells them (its `next.person`
// for the first run that asks for a step; `resolve` answered with a random choice of retry, edit or abort), at most
// 6 steps. Every case must reach a workspace whose verdict is settled (exit 0: completed or safe to replay, a
// continued or abandoned run counting as settled), never be given the same advice twice, and never be refused
// (exit 2). The CLI runs in this process (Main.run on an argv), so a thousand cases fit in `npm test`.
import { afterAll, describe, expect, it } from "@effect/vitest"
import { inject } from "vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Scope from "effect/Scope"
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { WorkspaceOwner } from "../src/Services/WorkspaceOwner.js"
import type { CliRun } from "./support/inProcessCli.js"
import { makeCliRuntime, runCli } from "./support/inProcessCli.js"
import type { FileState, WorkspaceSpec } from "./support/recoveryWorkspaces.js"
import { arbWorkspace, RUN_STATES, writeWorkspace } from "./support/recoveryWorkspaces.js"

/** Cases per run of `npm test` (RR_ADVICE_RUNS overrides it: more for a campaign, fewer while debugging). */
const RUNS = Number(process.env["RR_ADVICE_RUNS"] ?? 1000)
const MAX_STEPS = 6
// A quarter of the cases start from one state at a time (a failure then names it), the rest from random workspaces.
const PER_STATE = Math.max(2, Math.floor(RUNS / 4 / RUN_STATES.length))
// The walks are many and each runs the CLI several times: minutes on a loaded machine.
const TIMEOUT_MS = 1_800_000
// The PostgreSQL test server (test/support/pgGlobalSetup.ts), when it runs: its workspaces join the cases.
const PG_URL: string = (() => {
  try {
    return inject("pgUrl") ?? ""
  } catch {
    return ""
  }
})()
const STORES: ReadonlyArray<WorkspaceSpec["store"]> = PG_URL !== "" ? ["sqlite", "jsonl", "postgres"] : ["sqlite", "jsonl"]
let pgWorkspaces = 0
// Workspaces in memory when the machine has a tmpfs (fsync is free there: the cases measure advice, not disks).
const SCRATCH = existsSync("/dev/shm") ? "/dev/shm" : tmpdir()

/** A step as `inspect --json` carries it (`next.person`): a command as argument arrays, or words for a person. */
interface Step {
  readonly kind: "command" | "instruction" | "nothing"
  readonly argv?: ReadonlyArray<string>
  readonly choices?: ReadonlyArray<ReadonlyArray<string>>
  readonly text?: string
}

/** One case's walk: what was done, and how it ended. */
interface Walk {
  readonly steps: Array<string>
  readonly ending: "settled" | "loop" | "refused" | "no_step" | "too_long" | "unreadable"
  readonly detail?: string
}

// The verb's arguments of a printed command: everything after `runtime-resume` (the prefix may be `npx runtime-resume`),
// with `$NAME` expanded from the environment as a shell would (`--pg-url "$RUNTIME_RESUME_PG_URL"`).
const verbArgs = (argv: ReadonlyArray<string>): Array<string> => {
  const at = argv.indexOf("runtime-resume")
  return (at < 0 ? argv : argv.slice(at + 1)).map((arg) => arg.replace(/^"?\$(\w+)"?$/, (_, name: string) => process.env[name] ?? ""))
}

// The steps a person may take after `inspect --json`: a failure's own `next`, else each run's that asks for one,
// commands first (a person types the first; instructions are read, and the one that can be done is done).
const nextSteps = (doc: any): ReadonlyArray<Step> => {
  if (doc?.next?.person !== undefined) return [doc.next.person as Step]
  const runs: ReadonlyArray<any> = doc?.runs ?? []
  const asking = runs.map((run) => run?.next?.person as Step | undefined).filter((step): step is Step => step !== undefined && step.kind !== "nothing")
  return [...asking.filter((step) => step.kind === "command"), ...asking.filter((step) => step.kind !== "command")]
}

// Whether the driver can do what an instruction asks (see followInstruction).
const doable = (text: string, host: unknown): boolean => (/host is running/i.test(text) && host !== undefined) || /move .* aside/i.test(text)

// A person's answer to a choice (`resolve`: retry, edit, abort) and to an edit placeholder.
const choose = (step: Step, pick: number, result: unknown): Array<string> => {
  const options = step.choices !== undefined && step.choices.length > 0 ? step.choices : [step.argv ?? []]
  const argv = options[Math.floor(pick * options.length) % options.length]!
  return verbArgs(argv).map((arg) => (/^<.*>$/.test(arg) ? JSON.stringify(result) : arg))
}

const runtime = makeCliRuntime(100)
// Where the time goes (RR_ADVICE_PROFILE=1 prints it): writing workspaces, inspect, the verbs followed.
const profile = { write: 0, inspect: 0, inspects: 0, verb: 0, verbs: 0, cases: {} as Record<string, number> }
afterAll(() => {
  if (process.env["RR_ADVICE_PROFILE"] === "1") console.log(JSON.stringify(profile))
})

// Holds the workspace's owner lock shared, as a running host does, until `stop` (the host ends).
const liveHost = async (workspace: string) => {
  const scope = Effect.runSync(Scope.make())
  await runtime.runPromise(Effect.flatMap(WorkspaceOwner, (owner) => owner.acquire(workspace, "shared")).pipe(Scope.extend(scope)))
  return { stop: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}

// The things a person does that no command does, when an instruction asks for them: a host stops; a ledger that no
// verb can read is moved aside whole (kept) so the workspace starts clean.
const followInstruction = async (text: string, workspace: string, host: { stop: () => Promise<void> } | undefined) => {
  if (/host is running/i.test(text) && host !== undefined) {
    await host.stop()
    return "the host stops"
  }
  if (/move .* aside/i.test(text)) {
    const aside = join(workspace, `unreadable-${Date.now()}`)
    mkdirSync(aside)
    for (const name of readdirSync(workspace)) {
      if (/^runtime(-events)?\.(sqlite|jsonl)(-wal|-shm)?$|^runtime\.sqlite-(wal|shm)$/.test(name)) renameSync(join(workspace, name), join(aside, name))
    }
    return "the ledger is moved aside"
  }
  return undefined
}

/** Follows the advice from a freshly written workspace; never throws for what the CLI does. */
const walk = async (spec: WorkspaceSpec, picks: ReadonlyArray<number>, results: ReadonlyArray<unknown>): Promise<Walk> => {
  const folder = mkdtempSync(join(SCRATCH, "rr-advice-"))
  // On PostgreSQL the workspace is a name in the server's database (the folder holds the project's files only).
  const pg = spec.store === "postgres" ? { url: PG_URL, workspace: `advice_${process.pid}_${++pgWorkspaces}` } : undefined
  const workspace = pg?.workspace ?? folder
  let host: { stop: () => Promise<void> } | undefined
  try {
    profile.cases[spec.store] = (profile.cases[spec.store] ?? 0) + 1
    const t0 = performance.now()
    const written = await Effect.runPromise(writeWorkspace(folder, spec, pg).pipe(Effect.provide(NodeContext.layer)))
    profile.write += performance.now() - t0
    if (written.live && pg === undefined) host = await liveHost(folder)
    const steps: Array<string> = []
    const seen = new Set<string>()
    const store = ["--store", spec.store]
    // At most MAX_STEPS steps per run written (a workspace of three blocked runs takes up to three walks' steps), and two
    // for the workspace itself: its file's own step (a torn tail, an unreadable file) and stopping its live host.
    const budget = MAX_STEPS * spec.runs.length + 2
    for (let i = 0; i <= budget; i++) {
      const t1 = performance.now()
      const inspected: CliRun = await runCli(runtime, ["inspect", "--json", ...store, workspace], pg !== undefined ? { RUNTIME_RESUME_PG_URL: pg.url } : {})
      profile.inspect += performance.now() - t1
      profile.inspects++
      let doc: any
      try {
        doc = JSON.parse(inspected.stdout)
      } catch {
        return { steps, ending: "unreadable", detail: `inspect printed no JSON: ${inspected.stdout.slice(0, 300)} ${inspected.stderr.slice(0, 300)}` }
      }
      if (inspected.code === 0) return { steps, ending: "settled" }
      if (i === budget) return { steps, ending: "too_long", detail: `still exit ${inspected.code} after ${budget} steps` }
      const steps_ = nextSteps(doc)
      const step = steps_.find((s) => s.kind === "command") ?? steps_.find((s) => doable(s.text ?? "", host)) ?? steps_[0]
      if (step === undefined || step.kind === "nothing") {
        return { steps, ending: "no_step", detail: `exit ${inspected.code} and no next step: ${inspected.stdout.slice(0, 600)}` }
      }
      const key = JSON.stringify(step.kind === "command" ? [step.argv, step.choices] : step.text)
      if (seen.has(key)) return { steps, ending: "loop", detail: `the same advice again: ${key}` }
      seen.add(key)
      if (step.kind === "instruction") {
        const done = await followInstruction(step.text ?? "", folder, host)
        if (done === undefined) return { steps, ending: "no_step", detail: `an instruction no command performs: ${step.text}` }
        if (done === "the host stops") host = undefined
        steps.push(done)
        continue
      }
      const args = choose(step, picks[i] ?? 0, results[i] ?? { ok: true })
      const t2 = performance.now()
      const ran = await runCli(runtime, args, pg !== undefined ? { RUNTIME_RESUME_PG_URL: pg.url } : {})
      profile.verb += performance.now() - t2
      profile.verbs++
      steps.push(`${args.join(" ")} → exit ${ran.code}`)
      if (ran.code === 2) return { steps, ending: "refused", detail: `${ran.stdout.slice(0, 400)} ${ran.stderr.slice(0, 400)}` }
    }
    return { steps, ending: "too_long" }
  } finally {
    if (host !== undefined) await host.stop()
    rmSync(folder, { recursive: true, force: true })
  }
}

/**
 * The workspaces whose way out is not there yet (docs/recovery.md): each has its own skipped test below, naming it,
 * and the random workspaces leave them out until it is.
 */
const PENDING: ReadonlyArray<{ readonly store: WorkspaceSpec["store"]; readonly file: FileState; readonly why: string }> = []
const pending = (store: WorkspaceSpec["store"], file: FileState) => PENDING.find((p) => p.store === store && p.file === file)
// The rest: random workspaces (the damaged-ledger tests that run take PER_STATE each), so RUNS cases are walked.
const RANDOM = Math.max(10, RUNS - PER_STATE * (RUN_STATES.length + 4 - PENDING.length))

const arbCase = (options: Parameters<typeof arbWorkspace>[0] = {}) =>
  FastCheck.record({
    spec: arbWorkspace({ stores: STORES, allow: (store, file) => pending(store, file) === undefined, ...options }),
    picks: FastCheck.array(FastCheck.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), { minLength: 3 * MAX_STEPS, maxLength: 3 * MAX_STEPS }),
    results: FastCheck.array(FastCheck.jsonValue({ maxDepth: 2 }), { minLength: 3 * MAX_STEPS, maxLength: 3 * MAX_STEPS })
  })

const describeSpec = (spec: WorkspaceSpec) =>
  `${spec.store}${spec.file !== "none" ? ` (${spec.file})` : ""}: ${spec.runs.map((run) => `${run.state}[${run.calls.map((c) => `${c.kind}/${c.disk}`).join(",")}]${run.state === "unmanaged" ? (run.sealed ? " sealed" : " open") : ""}`).join(" + ")}`

describe("following the CLI's advice always ends in a settled workspace (docs/recovery.md)", () => {
  // One state at a time first: a failure names the state that loops.
  for (const state of RUN_STATES) {
    it(`from ${state}: settled within ${MAX_STEPS} steps, no advice twice, nothing refused`, async () => {
      await FastCheck.assert(
        FastCheck.asyncProperty(arbCase({ states: [state] }), async ({ picks, results, spec }) => {
          const walked = await walk({ ...spec, file: "none" }, picks, results)
          expect(walked.ending, `${describeSpec(spec)}\n  ${walked.steps.join("\n  ")}\n  ${walked.detail ?? ""}`).toBe("settled")
        }),
        { numRuns: PER_STATE }
      )
    }, TIMEOUT_MS)
  }

  // Each damaged ledger on its own store: its way out is a command (repair --quarantine-…) or a manual step.
  for (const [store, file] of [["sqlite", "corrupt"], ["jsonl", "corrupt"], ["jsonl", "torn_tail"], ["jsonl", "garbage"]] as const) {
    const waiting = pending(store, file)
    const test = waiting === undefined ? it : it.skip
    test(`from a ${file} ${store} ledger: settled, no advice twice, nothing refused${waiting !== undefined ? ` (pending: ${waiting.why})` : ""}`, async () => {
      await FastCheck.assert(
        FastCheck.asyncProperty(arbCase({ stores: [store], files: [file], allow: () => true }), async ({ picks, results, spec }) => {
          const walked = await walk(spec, picks, results)
          expect(walked.ending, `${describeSpec(spec)}\n  ${walked.steps.join("\n  ")}\n  ${walked.detail ?? ""}`).toBe("settled")
        }),
        { numRuns: PER_STATE }
      )
    }, TIMEOUT_MS)
  }

  it(`random workspaces (${RANDOM} cases: several runs, every state, damaged files)`, async () => {
    await FastCheck.assert(
      FastCheck.asyncProperty(arbCase(), async ({ picks, results, spec }) => {
        const walked = await walk(spec, picks, results)
        expect(walked.ending, `${describeSpec(spec)}\n  ${walked.steps.join("\n  ")}\n  ${walked.detail ?? ""}`).toBe("settled")
      }),
      {
        numRuns: RANDOM,
        // Found by CI: a live host over a torn JSONL tail, three stuck calls: seven steps, all of them needed.
        examples: [[{
          spec: {
            store: "jsonl",
            runs: [{
              state: "open_live",
              calls: [{ kind: "file_write", disk: "diverged" }, { kind: "idempotent", disk: "landed" }, { kind: "file_write", disk: "prior" }],
              sealed: false
            }],
            file: "torn_tail"
          },
          picks: Array.from({ length: 3 * MAX_STEPS }, () => 0),
          results: [{}, null, [], [], [], {}, [], {}, {}, [], "", {}, {}, {}, false, {}, 0, []]
        } as any]]
      }
    )
  }, TIMEOUT_MS)
})
