// `runtime-resume demo --keep DIR`, then `runtime-resume console` over each crashed workspace it leaves (the real CLI,
// real processes, real HTTP through the console's own routes): the crashed run is shown; story C's file write is
// settled by the page's reconcile button, story D's diverged write by the page's edit form; `verify` passes after.
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as FileSystem from "@effect/platform/FileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { spawn, spawnSync } from "node:child_process"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const CLI_TS = fileURLToPath(new URL("../bin/cli.ts", import.meta.url))

const cli = (...args: ReadonlyArray<string>) =>
  Effect.sync(() => {
    const r = spawnSync(process.execPath, ["--import", "tsx", CLI_TS, ...args], { cwd: ROOT, encoding: "utf8", timeout: 200_000 })
    return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr }
  })

interface Served {
  readonly pid: number
  readonly base: string
  readonly port: string
  readonly token: string
}

// A `runtime-resume console FOLDER` process (its own process group, killed with the scope) and the URL it printed for
// each workspace: one bare URL for a workspace, "<url> <name>" lines for a folder of workspaces (`expect` of them).
const consoleOf = (folder: string, expect: ReadonlyArray<string>) =>
  Effect.acquireRelease(
    Effect.async<{ readonly pid: number; readonly served: ReadonlyMap<string, Served> }, Error>((resume) => {
      const child = spawn(process.execPath, ["--import", "tsx", CLI_TS, "console", folder], {
        cwd: ROOT,
        detached: true,
        stdio: ["ignore", "pipe", "pipe"]
      })
      let out = ""
      let err = ""
      child.stderr!.on("data", (c: Buffer) => err += c.toString("utf8"))
      child.on("exit", (code) => resume(Effect.fail(new Error(`console exited ${code}: ${err}`))))
      child.stdout!.on("data", (c: Buffer) => {
        out += c.toString("utf8")
        const served = new Map<string, Served>()
        for (const m of out.matchAll(/^(http:\/\/127\.0\.0\.1:(\d+))\/\?token=(\S+)(?: (\S+))?$/gm)) {
          served.set(m[4] ?? "", { pid: child.pid!, base: m[1]!, port: m[2]!, token: m[3]! })
        }
        if (expect.every((name) => served.has(name))) resume(Effect.succeed({ pid: child.pid!, served }))
      })
    }),
    (c) =>
      Effect.sync(() => {
        try {
          process.kill(-c.pid, "SIGKILL")
        } catch {
          // gone already
        }
      })
  )

// GET/POST through the console's routes with its cookie (and, for a POST, its Origin and the page's CSRF token). The
// URL's token is exchanged once for the session cookie, as a browser does when it opens the printed URL.
const client = (c: { readonly base: string; readonly port: string; readonly token: string }) =>
  Effect.promise(async () => {
    const login = await fetch(`${c.base}/?token=${c.token}`, { redirect: "manual" })
    assert.strictEqual(login.status, 303)
    const cookie = (login.headers.get("set-cookie") ?? "").split(";")[0]!
    assert.match(cookie, new RegExp(`^rr_console_${c.port}=`))
    return session(c, cookie)
  })

const session = (c: { readonly base: string }, cookie: string) => {
  return {
    get: (path: string) =>
      Effect.promise(async () => {
        const res = await fetch(`${c.base}${path}`, { headers: { cookie } })
        return { status: res.status, body: await res.text() }
      }),
    post: (path: string, form: Record<string, string>) =>
      Effect.promise(async () => {
        const res = await fetch(`${c.base}${path}`, {
          method: "POST",
          redirect: "manual",
          headers: { cookie, origin: c.base, "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams(form).toString()
        })
        return { status: res.status, location: decodeURIComponent(res.headers.get("location") ?? "") }
      })
  }
}

describe("demo --keep, then the console settles its crashed runs", () => {
  it.live("console DIR serves each kept workspace; story C by the reconcile button, story D by an edit with the person's name; verify passes after", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = join(yield* fs.makeTempDirectoryScoped({ prefix: "rr-console-demo-" }), "practice")
      const ran = yield* cli("demo", "--keep", dir)
      assert.strictEqual(ran.code, 0, `${ran.stdout}\n${ran.stderr}`)
      // `console DIR` on the folder demo --keep left: one console per crashed workspace, each URL with its name.
      const served = (yield* consoleOf(dir, ["story-C", "story-D"])).served
      assert.deepStrictEqual([...served.keys()].sort(), ["story-C", "story-D"])
      const settle = (story: "C" | "D") =>
        Effect.gen(function*() {
          const workspace = join(dir, `story-${story}`)
          const http = yield* client(served.get(`story-${story}`)!)
          const home = yield* http.get("/")
          assert.strictEqual(home.status, 200)
          assert.include(home.body, "file-write-run")
          // The workspace table: the run's state, the stuck tool, and the person's next step (reconcile the write).
          assert.match(home.body, /class="badge s-unsettled"/)
          assert.match(home.body, /<td data-label="stuck tool">\S+ \(call-1\)<\/td>/)
          // As the tool was invoked (`npx runtime-resume` when npm ran this test), with the workspace.
          assert.match(home.body, /<pre class="cmd"><code>(npx )?runtime-resume reconcile --run file-write-run \S+story-[CD]<\/code>/)
          const csrf = /data-csrf="([^"]+)"/.exec(home.body)![1]!
          const page = yield* http.get("/run/file-write-run")
          assert.match(page.body, /data-call="call-1" data-status="indeterminate"/)
          const reconciled = yield* http.post("/run/file-write-run/reconcile", { csrf })
          assert.strictEqual(reconciled.status, 303)
          if (story === "C") {
            assert.include(reconciled.location, "notice=Reconcile settled 1 operation.")
            assert.include(reconciled.location, "tone=settled")
          } else {
            // Diverged: reconcile parks it, and says so (never a green "reconciled"); a person edits the result.
            assert.match(reconciled.location, /notice=Reconcile settled nothing, parked 1\. call-1 \(\S+\) parked as diverged/)
            assert.include(reconciled.location, "tone=attention")
            const parked = yield* http.get("/run/file-write-run")
            assert.notMatch(parked.body, /class="reconcile"/)
            assert.match(parked.body, /data-call="call-1" data-status="parked"/)
            const edited = yield* http.post("/run/file-write-run/resolve?call=call-1", {
              csrf,
              choice: "edit",
              result: "{\"kept\":\"their version\"}",
              actor: "alice"
            })
            assert.strictEqual(edited.status, 303)
            assert.include(edited.location, "by alice", edited.location)
          }
          const after = yield* http.get("/run/file-write-run")
          assert.match(after.body, new RegExp(`data-call="call-1" data-status="${story === "C" ? "settled-reconciler" : "settled-person"}"`))
          const verify = yield* cli("verify", workspace)
          assert.strictEqual(verify.code, 0, verify.stdout + verify.stderr)
          const inspected = JSON.parse((yield* cli("inspect", "--json", workspace)).stdout)
          const recovery = inspected.runs[0].plan.operations[0].recovery
          assert.deepStrictEqual([recovery.disposition, recovery.provenance.kind], ["completed", story === "C" ? "reconciler" : "manual"])
        }).pipe(Effect.scoped)
      yield* settle("C")
      yield* settle("D")
      // One workspace alone still prints its bare URL (what scripts read).
      const alone = (yield* consoleOf(join(dir, "story-C"), [""])).served
      assert.strictEqual((yield* (yield* client(alone.get("")!)).get("/")).status, 200)
    }).pipe(Effect.scoped, Effect.provide(NodeContext.layer)), { timeout: 600_000 })
})
