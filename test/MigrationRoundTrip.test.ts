// Migration keeps what recovery needs (docs/wire-format.md, "Export file"): a blocked run, SIGKILLed inside a real file
// write on SQLite, JSONL or PostgreSQL and sealed by repair, exported and imported into each store (3×3, same kind
// included) through the real executable, is managed there: inspect shows it blocked, reconcile or resolve settles it,
// resume --plan offers the continuation.
import { afterAll, afterEach, assert, describe, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { execFile, spawn } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { CHILD_PATH, CHILD_RUN } from "../harness/FileWriteChild.js"
import { pgUrl } from "./support/pg.js"
import { killAllHosts, startHost } from "./support/pgHosts.js"

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const BIN = fileURLToPath(new URL("../bin/runtime-resume", import.meta.url))
const CALL = "call-1"
const PG_RUN = "pg-write-run"

type Kind = "sqlite" | "jsonl" | "postgres"
const KINDS: ReadonlyArray<Kind> = ["sqlite", "jsonl", "postgres"]

interface Ran {
  readonly args: ReadonlyArray<string>
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

const cli = (...args: ReadonlyArray<string>) =>
  Effect.async<Ran>((resume) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { cwd: ROOT, env: { ...process.env, MAKA_RUNTIME_SAFE_BOUNDARY_RESUME: "", RUNTIME_RESUME_PG_URL: Redacted.value(pgUrl()) } },
      (error, stdout, stderr) => {
        resume(Effect.succeed({ args, code: error === null ? 0 : typeof error.code === "number" ? error.code : -1, stdout, stderr }))
      }
    )
  })
const show = (ran: Ran) => `${ran.args.join(" ")} -> ${ran.code}\n${ran.stdout}${ran.stderr}`
const json = (ran: Ran) => JSON.parse(ran.stdout) as any

const dirs: Array<string> = []
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  dirs.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

// The workspace argument and store flags of a workspace of `kind` (a folder, or a name on the test server).
interface Workspace {
  readonly kind: Kind
  readonly args: ReadonlyArray<string>
}
const newWorkspace = (kind: Kind, dir: string, name: string): Workspace =>
  kind === "postgres"
    ? { kind, args: [`${name}_${Math.random().toString(36).slice(2, 10)}`, "--store", "postgres"] }
    : { kind, args: [join(dir, name), "--store", kind] }

// A host SIGKILLed inside a real write_file call after its rename, on a fresh workspace of `kind`; returns the
// workspace, its blocked run and the file the tool wrote.
const crashInsideWrite = (kind: Kind) =>
  Effect.gen(function*() {
    const dir = tempDir("rr-migrate-")
    const root = join(dir, "project")
    mkdirSync(root)
    const source = newWorkspace(kind, dir, "source")
    if (kind === "postgres") {
      const host = startHost({ mode: "file-write", url: Redacted.value(pgUrl()), workspace: source.args[0], host: "writer", shared: PG_RUN, root })
      yield* Effect.promise(() => host.waitFor("at after_rename"))
      host.child.kill("SIGKILL")
      yield* Effect.promise(() => host.exited)
      return { dir, source, runId: PG_RUN, target: join(root, "notes.txt") }
    }
    yield* Effect.async<void>((resume) => {
      const child = spawn(process.execPath, ["--import", "tsx", CHILD_PATH, kind, source.args[0]!, root, "after_rename", "managed"], {
        cwd: ROOT,
        stdio: ["ignore", "pipe", "inherit"]
      })
      let out = ""
      child.stdout.on("data", (chunk: Buffer) => {
        out += chunk.toString("utf8")
        if (out.includes("at after_rename")) child.kill("SIGKILL")
      })
      child.on("exit", () => resume(Effect.void))
    })
    return { dir, source, runId: CHILD_RUN, target: join(root, "notes.txt") }
  })

// Imports `file` into a fresh workspace of `kind`, then follows the advice a person would: inspect, reconcile (or
// resolve with an edited result), resume --plan.
const settleThere = (file: string, dir: string, kind: Kind, runId: string, settle: "reconcile" | "resolve") =>
  Effect.gen(function*() {
    const ws = newWorkspace(kind, dir, `into_${kind}`)
    const imported = yield* cli("import", "--json", ...ws.args, file)
    assert.strictEqual(imported.code, 0, show(imported))
    assert.deepStrictEqual(json(imported).runHeaders, { restored: 1, skipped: 0 }, show(imported))
    // The run is managed and blocked there, with the next command to type.
    const inspected = yield* cli("inspect", ...ws.args)
    assert.strictEqual(inspected.code, 1, show(inspected))
    assert.include(inspected.stdout, `${CALL}:write_file:indeterminate`, show(inspected))
    assert.include(inspected.stdout, `reconcile --run ${runId}`, show(inspected))
    if (settle === "reconcile") {
      const reconciled = yield* cli("reconcile", "--json", ...ws.args)
      assert.strictEqual(reconciled.code, 0, show(reconciled))
      assert.deepStrictEqual(json(reconciled).operations.map((o: any) => [o.runId, o.callId, o.outcome, o.reason]), [
        [runId, CALL, "completed", "reconcile_matches_expected_state"]
      ], show(reconciled))
    } else {
      const resolved = yield* cli("resolve", "--run", runId, "--call", CALL, "--edit", '{"kept":"after"}', "--actor", "alice", "--json", ...ws.args)
      assert.strictEqual(resolved.code, 0, show(resolved))
      assert.deepStrictEqual([json(resolved).disposition, json(resolved).reasonCode, json(resolved).actor], ["completed", "manual_edit", "alice"])
    }
    // Settled: the continuation is offered there (it waits for a person's confirmation).
    const plan = yield* cli("resume", "--plan", "--json", "--tool", "write_file", ...ws.args)
    assert.strictEqual(plan.code, 1, show(plan))
    assert.strictEqual(json(plan).plan._tag, "AwaitingConfirmation", show(plan))
    assert.strictEqual((yield* cli("verify", ...ws.args)).code, 0)
    // Importing the same file again adds nothing and keeps the headers as they are now.
    const again = yield* cli("import", "--json", ...ws.args, file)
    assert.strictEqual(again.code, 0, show(again))
    assert.deepStrictEqual([json(again).added, json(again).runHeaders], [0, { restored: 0, skipped: 1 }], show(again))
  })

describe("export → import keeps what recovery needs, across every pair of stores", () => {
  afterEach(killAllHosts)

  for (const [i, from] of KINDS.entries()) {
    it.live(`a blocked run exported from ${from}, imported into sqlite, jsonl and postgres: inspect, reconcile/resolve, resume --plan`, () =>
      Effect.gen(function*() {
        const { dir, runId, source, target } = yield* crashInsideWrite(from)
        assert.strictEqual((yield* cli("repair", ...source.args)).code, 0)
        const file = join(dir, "export.jsonl")
        const exported = yield* cli("export", "--json", ...source.args, file)
        assert.strictEqual(exported.code, 0, show(exported))
        assert.deepStrictEqual([json(exported).runHeaders, json(exported).claims], [1, 0])
        const lines = readFileSync(file, "utf8").trimEnd().split("\n")
        assert.strictEqual(lines[0], `{"format":"runtime-resume.export","version":2}`)
        assert.match(lines[lines.length - 2]!, new RegExp(`^\\{"runHeader":\\{.*"runId":"${runId}","sessionId"`))
        assert.strictEqual(lines[lines.length - 1], `{"trailer":{"claims":0,"rows":${lines.length - 3},"runHeaders":1}}`)
        for (const [j, to] of KINDS.entries()) {
          yield* settleThere(file, dir, to, runId, (i + j) % 2 === 0 ? "reconcile" : "resolve")
        }
        assert.strictEqual(readFileSync(target, "utf8"), "after", "the file was never written again")
      }), { timeout: 600_000 })
  }
})
