// The CLI over PostgreSQL: the documented migration (export from SQLite, import --store postgres, and back to JSONL,
// byte-identical), bad input as exit 2 with a typed error, and the server's password (a canary) never printed.
import { assert, describe, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { execFile } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as Either from "effect/Either"
import { canonicalText } from "../src/Domain/RuntimeEvent.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as PgWorkspace from "../src/Layers/PgWorkspace.js"
import { RunHeaderStore } from "../src/Services/RunHeaderStore.js"
import { pgUrl } from "./support/pg.js"
import { headerOf } from "./support/runHeaders.js"

const bin = fileURLToPath(new URL("../bin/runtime-resume", import.meta.url))

interface Ran {
  readonly code: number
  readonly out: string
}

// Runs the CLI with the test server in RUNTIME_RESUME_PG_URL (unless `env` says otherwise).
const cli = (args: ReadonlyArray<string>, env: Record<string, string | undefined> = {}) =>
  Effect.async<Ran>((resume) => {
    execFile("node", [bin, ...args], { env: { ...process.env, RUNTIME_RESUME_PG_URL: Redacted.value(pgUrl()), ...env } }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1
      resume(Effect.succeed({ code, out: stdout + stderr }))
    })
  })

describe("the CLI with --store postgres", () => {
  it.live("export from SQLite, import --store postgres, verify, export and import into JSONL: the same bytes; the password never printed", () =>
    Effect.gen(function*() {
      const password = new URL(Redacted.value(pgUrl())).password
      assert.isAbove(password.length, 5)
      const dir = mkdtempSync(join(tmpdir(), "rr-pg-cli-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const lines: Array<string> = []
      for (const r of ["run-a", "run-b"]) {
        const b = EventBuilder.make(r)
        for (const e of [b.opened(), b.user("hi"), b.model("hello"), b.terminated("completed")]) lines.push(Either.getOrThrow(canonicalText(e)))
      }
      writeFileSync(join(dir, "events.jsonl"), lines.join("\n") + "\n")
      const workspace = `cli_${Math.random().toString(36).slice(2, 10)}`
      const outputs: Array<string> = []
      const step = (args: ReadonlyArray<string>, code: number, env?: Record<string, string | undefined>) =>
        Effect.map(cli(args, env), (ran) => {
          outputs.push(ran.out)
          assert.strictEqual(ran.code, code, `${args.join(" ")}: ${ran.out}`)
          return ran.out
        })
      yield* step(["import", join(dir, "sq"), join(dir, "events.jsonl"), "--store", "sqlite"], 0)
      yield* step(["export", join(dir, "sq"), join(dir, "from-sqlite.jsonl")], 0)
      yield* step(["import", workspace, join(dir, "from-sqlite.jsonl"), "--store", "postgres"], 0)
      assert.include(yield* step(["verify", workspace, "--store", "postgres"], 0), "run-b")
      // --pg-url instead of the environment variable.
      yield* step(["export", workspace, join(dir, "from-pg.jsonl"), "--store", "postgres", "--pg-url", Redacted.value(pgUrl())], 0, {
        RUNTIME_RESUME_PG_URL: undefined
      })
      assert.strictEqual(readFileSync(join(dir, "from-pg.jsonl"), "utf8"), readFileSync(join(dir, "from-sqlite.jsonl"), "utf8"))
      yield* step(["import", join(dir, "js"), join(dir, "from-pg.jsonl"), "--store", "jsonl"], 0)
      // Bad input: exit 2, a typed error, nothing written.
      assert.include(yield* step(["verify", "bad-name", "--store", "postgres", "--json"], 2), "not a plain identifier")
      assert.include(yield* step(["verify", "missing_ws", "--store", "postgres", "--json"], 2), "WorkspaceNotFound")
      const wrong = Redacted.value(pgUrl()).replace(`:${password}@`, `:${password}x@`)
      assert.include(yield* step(["verify", workspace, "--store", "postgres", "--pg-url", wrong], 2), "password authentication failed")
      const down = Redacted.value(pgUrl()).replace(/:\d+\//, ":1/")
      assert.include(yield* step(["import", workspace, join(dir, "events.jsonl"), "--store", "postgres", "--pg-url", down, "--json"], 2), "StoreReadFailed")
      assert.include(yield* step(["verify", workspace, "--store", "postgres"], 2, { RUNTIME_RESUME_PG_URL: undefined }), "--pg-url")
      for (const out of outputs) assert.notInclude(out, password, `the password was printed: ${out}`)
    }).pipe(Effect.scoped))

  it.live("repair, reconcile and resolve on PostgreSQL: an interrupted managed run sealed, verify clean, the password never printed", () =>
    Effect.gen(function*() {
      const password = new URL(Redacted.value(pgUrl())).password
      const dir = mkdtempSync(join(tmpdir(), "rr-pg-cli-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const b = EventBuilder.make("run-int")
      const lines = [b.opened(), b.user("hi"), b.model("hello")].map((e) => Either.getOrThrow(canonicalText(e)))
      writeFileSync(join(dir, "events.jsonl"), lines.join("\n") + "\n")
      const workspace = `cli_${Math.random().toString(36).slice(2, 10)}`
      const outputs: Array<string> = []
      const step = (args: ReadonlyArray<string>, code: number) =>
        Effect.map(cli(args), (ran) => {
          outputs.push(ran.out)
          assert.strictEqual(ran.code, code, `${args.join(" ")}: ${ran.out}`)
          return ran.out
        })
      // A missing workspace: WorkspaceNotFound, nothing created.
      assert.include(yield* step(["repair", `${workspace}_none`, "--store", "postgres", "--json"], 2), "WorkspaceNotFound")
      yield* step(["import", workspace, join(dir, "events.jsonl"), "--store", "postgres"], 0)
      // The host's header for the run, as a host on PostgreSQL creates it: the run is managed and interrupted.
      yield* Effect.flatMap(RunHeaderStore, (headers) => headers.create(headerOf(b))).pipe(
        Effect.provide(PgWorkspace.layer({ url: pgUrl(), workspace }))
      )
      const repaired = JSON.parse(yield* step(["repair", workspace, "--store", "postgres", "--json"], 0))
      assert.deepStrictEqual(repaired.repaired.map((r: { runId: string; status: string }) => [r.runId, r.status]), [["run-int", "failed"]])
      assert.include(yield* step(["verify", workspace, "--store", "postgres"], 0), "run-int")
      // Again: nothing to do.
      assert.deepStrictEqual(JSON.parse(yield* step(["repair", workspace, "--store", "postgres", "--json"], 0)).repaired, [])
      const reconciled = JSON.parse(yield* step(["reconcile", workspace, "--store", "postgres", "--json"], 0))
      assert.deepStrictEqual(reconciled.operations, [])
      assert.strictEqual(reconciled.store, "postgres")
      // resolve over PostgreSQL reaches the ledger: a call that is not there is refused, nothing written.
      assert.include(
        yield* step(["resolve", workspace, "--store", "postgres", "--run", "run-int", "--call", "nope", "--abort", "--json"], 2),
        "operation_not_found"
      )
      assert.include(yield* step(["verify", workspace, "--store", "postgres"], 0), "run-int")
      for (const out of outputs) assert.notInclude(out, password, `the password was printed: ${out}`)
    }).pipe(Effect.scoped))
})
