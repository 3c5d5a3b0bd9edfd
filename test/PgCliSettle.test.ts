// Settling a blocked turn on PostgreSQL through the real executable: a host process SIGKILLed inside a real file write
// (after the rename) on a PostgreSQL workspace, then repair → reconcile, or resolve --edit / --abort, each with
// --store postgres; the ledger read back after each (recovery decision in the call index, nothing left unsettled,
// every run verifies), the file never written again, and the password never printed.
import { afterEach, assert, describe, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { execFile } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { RunId } from "../src/Domain/Ids.js"
import * as PgWorkspace from "../src/Layers/PgWorkspace.js"
import { pgUrl } from "./support/pg.js"
import { killAllHosts, startHost } from "./support/pgHosts.js"

const bin = fileURLToPath(new URL("../bin/runtime-resume", import.meta.url))
const RUN = "pg-write-run"
const CALL = "call-1"

interface Ran {
  readonly args: ReadonlyArray<string>
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

const outputs: Array<Ran> = []
const cli = (...args: ReadonlyArray<string>) =>
  Effect.async<Ran>((resume) => {
    execFile(
      "node",
      [bin, ...args],
      { env: { ...process.env, MAKA_RUNTIME_SAFE_BOUNDARY_RESUME: "", RUNTIME_RESUME_PG_URL: Redacted.value(pgUrl()) } },
      (error, stdout, stderr) => {
        const ran = { args, code: error === null ? 0 : typeof error.code === "number" ? error.code : -1, stdout, stderr }
        outputs.push(ran)
        resume(Effect.succeed(ran))
      }
    )
  })
const show = (ran: Ran) => `${ran.args.join(" ")} -> ${ran.code}\n${ran.stdout}${ran.stderr}`
const json = (ran: Ran) => JSON.parse(ran.stdout) as any

// A host process on a fresh workspace runs one write_file call and is SIGKILLed after the rename.
const crashInsideWrite = Effect.gen(function*() {
  const workspace = `settle_${Math.random().toString(36).slice(2, 10)}`
  const dir = mkdtempSync(join(tmpdir(), "rr-pg-settle-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
  const root = join(dir, "project")
  mkdirSync(root)
  const host = startHost({ mode: "file-write", url: Redacted.value(pgUrl()), workspace, host: "writer", shared: RUN, root })
  yield* Effect.promise(() => host.waitFor("at after_rename"))
  host.child.kill("SIGKILL")
  yield* Effect.promise(() => host.exited)
  return { workspace, root, target: join(root, "notes.txt") }
})

// The ledger as a reader sees it: the call's recovery decision, what is left unsettled, and every run's verdict.
const ledgerOf = (workspace: string) =>
  Effect.scoped(Effect.gen(function*() {
    const ws = yield* PgWorkspace.make({ url: pgUrl(), workspace, readOnly: true })
    const state = yield* ws.store.toolCallState(RunId.make(RUN), CALL)
    const rows = yield* ws.store.readRun(RunId.make(RUN))
    return {
      recovery: state.call?.recovery === undefined
        ? undefined
        : [state.call.recovery.kind, state.call.recovery.disposition, state.call.recovery.reasonCode, state.call.recovery.actor],
      responded: state.call?.responseSeq !== undefined,
      unsettled: (yield* ws.store.unsettledOperations()).map((o) => o.call.callId),
      sealed: state.terminalSeq !== undefined,
      tags: rows.map((r) => r.event.body._tag),
      header: (yield* ws.headers.list()).map((h) => `${h.runId} ${h.status}`)
    }
  }))

describe("settling a blocked turn on PostgreSQL through the CLI", () => {
  afterEach(killAllHosts)

  it.scopedLive("a crash after the rename: repair, reconcile completes it (reconcile_matches_expected_state); resume plans the continuation; the file is not written again", () =>
    Effect.gen(function*() {
      const { root, target, workspace } = yield* crashInsideWrite
      assert.strictEqual(readFileSync(target, "utf8"), "after")
      const blocked = yield* ledgerOf(workspace)
      assert.deepStrictEqual([blocked.sealed, blocked.responded, blocked.unsettled], [false, false, [CALL]])
      const repaired = yield* cli("repair", workspace, "--store", "postgres", "--json")
      assert.strictEqual(repaired.code, 0, show(repaired))
      assert.deepStrictEqual(json(repaired).repaired.map((r: any) => [r.runId, r.status]), [[RUN, "failed"]])
      const reconciled = yield* cli("reconcile", workspace, "--store", "postgres", "--json")
      assert.strictEqual(reconciled.code, 0, show(reconciled))
      assert.deepStrictEqual(json(reconciled).operations.map((o: any) => [o.runId, o.callId, o.outcome, o.reason]), [
        [RUN, CALL, "completed", "reconcile_matches_expected_state"]
      ])
      const after = yield* ledgerOf(workspace)
      assert.deepStrictEqual(after.recovery, ["reconciler", "completed", "reconcile_matches_expected_state", "reconcile:write_file"])
      assert.deepStrictEqual(after.unsettled, [])
      assert.deepStrictEqual(after.header, [`${RUN} failed`])
      assert.strictEqual(after.tags.slice(0, 5).join(","), "RunOpened,UserMessage,FunctionCall,ToolDispatched,RunTerminated")
      // Again: nothing left to reconcile, nothing written.
      const again = yield* cli("reconcile", workspace, "--store", "postgres", "--json")
      assert.strictEqual(again.code, 0, show(again))
      assert.deepStrictEqual(json(again).operations, [])
      assert.deepStrictEqual(yield* ledgerOf(workspace), after)
      assert.strictEqual((yield* cli("verify", workspace, "--store", "postgres")).code, 0)
      const plan = yield* cli("resume", "--plan", "--json", "--tool", "write_file", workspace, "--store", "postgres")
      assert.strictEqual(plan.code, 1, show(plan))
      assert.strictEqual(json(plan).plan._tag, "AwaitingConfirmation", show(plan))
      const replay = json(plan).plan.candidate.replay.flatMap((s: any) => s.refs.map((r: any) => r.id))
      assert.match(replay[replay.length - 1], /:reconcile:response$/)
      assert.strictEqual(readFileSync(target, "utf8"), "after", "the file was not written again")
      void root
    }), { timeout: 180_000 })

  it.scopedLive("the file changed by someone else: reconcile parks reconcile_diverged (exit 1); resolve --edit records the person's result once; abort is then refused", () =>
    Effect.gen(function*() {
      const { target, workspace } = yield* crashInsideWrite
      writeFileSync(target, "their version")
      assert.strictEqual((yield* cli("repair", workspace, "--store", "postgres")).code, 0)
      const parked = yield* cli("reconcile", workspace, "--store", "postgres")
      assert.strictEqual(parked.code, 1, show(parked))
      assert.include(parked.stdout, "reconcile_diverged")
      const diverged = yield* ledgerOf(workspace)
      assert.deepStrictEqual(diverged.recovery, ["reconciler", "parked", "reconcile_diverged", "reconcile:write_file"])
      const resolved = yield* cli("resolve", "--run", RUN, "--call", CALL, "--edit", '{"kept":"their version"}', "--actor", "alice", "--json", workspace, "--store", "postgres")
      assert.strictEqual(resolved.code, 0, show(resolved))
      const doc = json(resolved)
      assert.deepStrictEqual([doc.store, doc.runId, doc.callId, doc.disposition, doc.reasonCode, doc.actor, doc.alreadyRecorded], [
        "postgres", RUN, CALL, "completed", "manual_edit", "alice", false
      ])
      const edited = yield* ledgerOf(workspace)
      assert.deepStrictEqual(edited.recovery, ["manual", "completed", "manual_edit", "alice"])
      assert.deepStrictEqual(edited.unsettled, [])
      // The same decision again is already recorded (exit 0, nothing written); another one is refused (exit 2).
      const again = yield* cli("resolve", "--run", RUN, "--call", CALL, "--edit", '{"kept":"their version"}', "--actor", "alice", workspace, "--store", "postgres")
      assert.strictEqual(again.code, 0, show(again))
      assert.include(again.stdout, "already recorded")
      const other = yield* cli("resolve", "--run", RUN, "--call", CALL, "--abort", "--json", workspace, "--store", "postgres")
      assert.strictEqual(other.code, 2, show(other))
      assert.deepStrictEqual([json(other).error._tag, json(other).error.reason], ["ResolutionRefused", "already_settled"])
      assert.deepStrictEqual(yield* ledgerOf(workspace), edited)
      assert.strictEqual((yield* cli("verify", workspace, "--store", "postgres")).code, 0)
      const plan = json(yield* cli("resume", "--plan", "--json", "--tool", "write_file", workspace, "--store", "postgres"))
      const replay = plan.plan.candidate.replay.flatMap((s: any) => s.refs.map((r: any) => r.id))
      assert.match(replay[replay.length - 1], /:manual:response$/, "the replay ends with the person's result")
      assert.strictEqual(readFileSync(target, "utf8"), "their version", "outside changes are never overwritten")
    }), { timeout: 180_000 })

  it.scopedLive("resolve --abort: the operation parked manual_abandon; resume then has no run to continue; verify clean; the password never printed", () =>
    Effect.gen(function*() {
      const { workspace } = yield* crashInsideWrite
      assert.strictEqual((yield* cli("repair", workspace, "--store", "postgres")).code, 0)
      const aborted = yield* cli("resolve", "--run", RUN, "--call", CALL, "--abort", "--actor", "bob", "--json", workspace, "--store", "postgres")
      assert.strictEqual(aborted.code, 0, show(aborted))
      assert.deepStrictEqual([json(aborted).disposition, json(aborted).reasonCode, json(aborted).actor], ["parked", "manual_abandon", "bob"])
      const ledger = yield* ledgerOf(workspace)
      assert.deepStrictEqual(ledger.recovery, ["manual", "parked", "manual_abandon", "bob"])
      assert.deepStrictEqual(ledger.unsettled, [])
      assert.isFalse(ledger.responded)
      const resume = yield* cli("resume", "--plan", "--json", workspace, "--store", "postgres")
      assert.strictEqual(resume.code, 2, show(resume))
      assert.strictEqual(json(resume).error._tag, "NoResumableRun")
      // reconcile reports the decided operation as parked by bob (the turn stays stopped: exit 1) and writes nothing.
      const reconciled = yield* cli("reconcile", workspace, "--store", "postgres", "--json")
      assert.deepStrictEqual(
        [reconciled.code, json(reconciled).operations.map((o: any) => [o.callId, o.outcome, o.reason])],
        [1, [[CALL, "parked", "manual_abandon"]]],
        show(reconciled)
      )
      assert.strictEqual((yield* cli("verify", workspace, "--store", "postgres")).code, 0)
      assert.deepStrictEqual(yield* ledgerOf(workspace), ledger)
      const password = new URL(Redacted.value(pgUrl())).password
      for (const ran of outputs) assert.notInclude(ran.stdout + ran.stderr, password, `the password was printed: ${ran.args.join(" ")}`)
    }), { timeout: 180_000 })
  it.scopedLive("following the printed advice on PostgreSQL (docs/recovery.md): every hint names --store postgres and the variable holding the server, never the URL; it ends settled", () =>
    Effect.gen(function*() {
      const { target, workspace } = yield* crashInsideWrite
      const url = Redacted.value(pgUrl())
      const seen = new Set<string>()
      for (let step = 0; ; step++) {
        assert.isBelow(step, 6, "settled within 6 steps")
        // The URL given as a literal --pg-url that RUNTIME_RESUME_PG_URL also holds: the hint names that variable.
        const inspected = yield* cli("inspect", "--json", "--store", "postgres", "--pg-url", url, workspace)
        const table = yield* cli("inspect", "--store", "postgres", "--pg-url", url, workspace)
        if (inspected.code === 0) {
          assert.notInclude(table.stdout, "next: ")
          break
        }
        const next = json(inspected).runs[0].next.person
        assert.strictEqual(next.kind, "command", show(inspected))
        assert.include(next.shell, `--store postgres --pg-url "$RUNTIME_RESUME_PG_URL" ${workspace}`)
        assert.include(table.stdout, `next: ${next.shell}`)
        assert.isFalse(seen.has(next.shell), `the same advice twice: ${next.shell}`)
        seen.add(next.shell)
        // The argument array runs as is: the server comes from RUNTIME_RESUME_PG_URL.
        const ran = yield* cli(...next.argv)
        assert.notStrictEqual(ran.code, 2, show(ran))
      }
      assert.deepStrictEqual([...seen].map((shell) => shell.split(" ").slice(1, 3).join(" ")), ["repair --store", "reconcile --run"])
      assert.strictEqual(readFileSync(target, "utf8"), "after", "the file was not written again")
      const password = new URL(url).password
      for (const ran of outputs) assert.notInclude(ran.stdout + ran.stderr, password, `the password was printed: ${ran.args.join(" ")}`)
    }), { timeout: 180_000 })
})
