// The recovery console over real HTTP (docs/spec/06-cli.md, "The recovery console"): the pages, and the safety rules — no token, wrong token, wrong Host,
// cross-origin or CSRF-less POST, path traversal — each refused with nothing written and no action called.
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { request } from "node:http"
import type { ConsoleChoice } from "../src/Console/ConsoleActions.js"
import { ConsoleActions } from "../src/Console/ConsoleActions.js"
import * as ConsoleServer from "../src/Console/ConsoleServer.js"
import * as ConsoleActionsLive from "../src/Console/ConsoleActionsLive.js"
import * as NodeNoFollowFileSystem from "../src/Layers/NodeNoFollowFileSystem.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as NodeWorkspaceOwner from "../src/Layers/NodeWorkspaceOwner.js"
import { layerStore } from "../src/Layers/NodeRuntimeEventStore.js"
import { RuntimeEventStore } from "../src/Services/RuntimeEventStore.js"
import { FastCheck as fc } from "effect"
import { shellWord } from "../src/Cli/internal/nextCommand.js"
import { RunId } from "../src/Domain/Ids.js"
import { inspectWorkspace } from "../src/Programs/InspectWorkspace.js"
import { HOSTILE_IDS, largeRun, SECRET_ARG, stuckRun, threeRuns, workspaceWith } from "./support/consoleWorkspace.js"

interface Reply {
  readonly status: number
  readonly headers: Record<string, string | Array<string> | undefined>
  readonly body: string
}

// A raw HTTP request (fetch would not let a test set Host).
const http = (port: number, options: {
  readonly method?: string
  readonly path: string
  readonly headers?: Record<string, string>
  readonly body?: string
}) =>
  Effect.async<Reply>((resume) => {
    const req = request({
      host: "127.0.0.1",
      port,
      method: options.method ?? "GET",
      path: options.path,
      headers: { host: `127.0.0.1:${port}`, ...options.headers }
    }, (res) => {
      let body = ""
      res.setEncoding("utf8")
      res.on("data", (c) => body += c)
      res.on("end", () => resume(Effect.succeed({ status: res.statusCode ?? 0, headers: res.headers, body })))
    })
    req.on("error", (e) => resume(Effect.die(e)))
    req.end(options.body)
  })

// Records every action the console asks for; the safety tests expect none.
const recording = () => {
  const calls: Array<{ action: string; runId: string; callId?: string; choice?: ConsoleChoice; actor?: string }> = []
  const layer = Layer.succeed(ConsoleActions, {
    reconcile: (runId) =>
      Effect.sync(() => (calls.push({ action: "reconcile", runId }), { summary: "reconciled", tone: "settled" as const, report: {} })),
    resolve: (runId, callId, choice, actor) =>
      Effect.sync(() => (calls.push({ action: "resolve", runId, callId, choice, actor }), { summary: "resolved", tone: "settled" as const, report: {} }))
  })
  return { calls, layer }
}

const highWaters = (workspace: string) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const out: Array<string> = []
    for (const runId of yield* store.listRuns()) out.push(`${runId}=${(yield* store.highWater(runId)).seq}`)
    return out.join(",")
  }).pipe(
    Effect.provide(layerStore("sqlite", { workspace, readOnly: true }).pipe(Layer.provide(NodeWorkspaceLock.layer))),
    Effect.scoped
  )

// Starts the console over a fresh three-run workspace; returns its port, token, a logged-in cookie and the CSRF token.
const started = Effect.gen(function*() {
  const workspace = yield* workspaceWith(threeRuns(), { managed: true })
  const actions = recording()
  const context = yield* Layer.build(
    ConsoleServer.layerNode({ workspace }).pipe(Layer.provide(actions.layer), Layer.provide(NodeWorkspaceLock.layer))
  )
  const info = yield* Effect.provide(ConsoleServer.Console, context)
  const login = yield* http(info.port, { path: `/?token=${info.token}` })
  const setCookie = String(login.headers["set-cookie"])
  const cookie = setCookie.split(";")[0]!
  const home = yield* http(info.port, { path: "/", headers: { cookie } })
  const csrf = /data-csrf="([^"]+)"/.exec(home.body)![1]!
  return { workspace, info, login, setCookie, cookie, home, csrf, calls: actions.calls }
})

const Live = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.provide(effect, NodeContext.layer)

describe("recovery console (real HTTP against the real server)", () => {
  it.scopedLive("binds 127.0.0.1, exchanges the URL's token for an HttpOnly SameSite=Strict cookie, shows every run", () =>
    Live(Effect.gen(function*() {
      const s = yield* started
      assert.match(s.info.url, /^http:\/\/127\.0\.0\.1:\d+\/\?token=[A-Za-z0-9_-]{32}$/)
      assert.strictEqual(s.login.status, 303)
      assert.strictEqual(s.login.headers["location"], "/")
      assert.match(s.setCookie, /HttpOnly/)
      assert.match(s.setCookie, /SameSite=Strict/)
      assert.strictEqual(s.home.status, 200)
      for (const run of ["run-crashed", "run-completed", "run-chat"]) assert.include(s.home.body, run)
      assert.include(s.home.body, "verify: <strong class=\"ok\">passed</strong>")
      assert.notInclude(s.home.body, SECRET_ARG)
      assert.isUndefined(s.home.headers["access-control-allow-origin"])
    })))

  it.scopedLive("a run's page: the operation on the timeline; the edit box starts empty, the call's args beside it and nowhere else", () =>
    Live(Effect.gen(function*() {
      const s = yield* started
      const run = yield* http(s.info.port, { path: "/run/run-crashed", headers: { cookie: s.cookie } })
      assert.strictEqual(run.status, 200)
      assert.match(run.body, /<svg class="timeline"/)
      assert.match(run.body, /data-call="w1" data-status="indeterminate"/)
      assert.include(run.body, "ms-terminal")
      assert.include(run.body, "replay size")
      // The form: no choice made, an empty result box with its help text, the call's args beside it.
      const form = /<form method="post" action="[^"]*" class="resolve" data-call="w1">.*?<\/form>/s.exec(run.body)![0]
      assert.match(form, /<textarea name="result"[^>]*><\/textarea>/)
      assert.notMatch(form, /checked/)
      assert.include(form, "starts empty on purpose")
      assert.match(form, /<pre class="args">[^<]*s3cr3t-argument-value/)
      // The args are in that form only: not in the timeline, the tables, or the workspace page.
      assert.strictEqual(run.body.split(SECRET_ARG).length, 2)
      assert.notInclude(s.home.body, SECRET_ARG)
      const event = yield* http(s.info.port, { path: "/run/run-crashed/event/3", headers: { cookie: s.cookie } })
      assert.strictEqual(event.status, 200)
      assert.include(event.body, SECRET_ARG)
    })))

  it.scopedLive("a run above the inline size: served at once from indexed reads, 'not yet verified', then verified in the background", () =>
    Live(Effect.gen(function*() {
      const workspace = yield* workspaceWith([...threeRuns(), largeRun(260)], { managed: true })
      const actions = recording()
      const context = yield* Layer.build(
        ConsoleServer.layerNode({ workspace, inlineEvents: 0, warm: false }).pipe(Layer.provide(actions.layer), Layer.provide(NodeWorkspaceLock.layer))
      )
      const info = yield* Effect.provide(ConsoleServer.Console, context)
      const login = yield* http(info.port, { path: `/?token=${info.token}` })
      const cookie = String(login.headers["set-cookie"]).split(";")[0]!
      const get = (path: string) => http(info.port, { path, headers: { cookie } })
      // The first visit starts the run's background read and does not wait for it: the page claims nothing verified.
      const first = yield* get("/run/run-crashed")
      assert.strictEqual(first.status, 200)
      assert.include(first.body, "not yet verified")
      assert.notInclude(first.body, "verified: seq")
      assert.notInclude(first.body, "replay size")
      // The indeterminate call from the call index is on the timeline, with its resolve form.
      assert.match(first.body, /data-call="w1" data-status="indeterminate"/)
      assert.include(first.body, "failed (process_interrupted) at seq 5")
      assert.match(first.body, /<form method="post" action="\/run\/run-crashed\/resolve\?call=w1" class="resolve" data-call="w1">/)
      // The call's args once: beside the form's edit box.
      assert.strictEqual(first.body.split(SECRET_ARG).length, 2)
      // The background read ends; then the page is the full one, verified from seq 1.
      let body = ""
      for (let i = 0; i < 200 && !body.includes("verified: seq 1 to 5"); i++) {
        yield* Effect.sleep("50 millis")
        body = (yield* get("/run/run-crashed")).body
      }
      assert.include(body, "verified: seq 1 to 5, read in full for this plan")
      assert.include(body, "replay size")
      assert.notInclude(body, "not yet verified")
      // An events page is read by seq: page 3 of the 260-event run holds seqs 201..260.
      const page3 = yield* get("/run/run-large?page=3")
      const seqs = [...page3.body.matchAll(/<tr><td data-label="seq" class="num"><a href="\/run\/run-large\/event\/(\d+)">/g)].map((m) => Number(m[1]))
      assert.deepStrictEqual([seqs[0], seqs[seqs.length - 1], seqs.length], [201, 260, 60])
      const event = yield* get("/run/run-large/event/259")
      assert.include(event.body, "Event 259 of")
      // The workspace page: the runs at once, never "passed" before verify ran; then verify's result.
      const home = yield* get("/")
      assert.include(home.body, "not yet verified")
      assert.notInclude(home.body, "passed")
      for (let i = 0; i < 400 && !body.includes("passed"); i++) {
        yield* Effect.sleep("50 millis")
        body = (yield* get("/")).body
      }
      assert.include(body, "verify: <strong class=\"ok\">passed</strong>")
      for (const run of ["run-crashed", "run-completed", "run-chat", "run-large"]) assert.include(body, run)
      assert.deepStrictEqual(actions.calls, [])
    })))

  it.scopedLive("the URL's token works once: the same URL again is refused (no cookie), the cookie still works; the token is no cookie", () =>
    Live(Effect.gen(function*() {
      const s = yield* started
      // The cookie holds a session secret, never the URL's token.
      assert.notInclude(s.setCookie, s.info.token)
      const again = yield* http(s.info.port, { path: `/?token=${s.info.token}` })
      assert.strictEqual(again.status, 401)
      assert.include(again.body, "already used")
      assert.isUndefined(again.headers["set-cookie"])
      assert.notInclude(again.body, "run-crashed")
      const tokenAsCookie = yield* http(s.info.port, { path: "/", headers: { cookie: `rr_console_${s.info.port}=${s.info.token}` } })
      assert.strictEqual(tokenAsCookie.status, 401)
      // The browser that has the cookie and opens the URL again is sent on to the page, granted nothing new.
      const withCookie = yield* http(s.info.port, { path: `/run/run-crashed?token=${s.info.token}`, headers: { cookie: s.cookie } })
      assert.strictEqual(withCookie.status, 303)
      assert.strictEqual(withCookie.headers["location"], "/run/run-crashed")
      assert.isUndefined(withCookie.headers["set-cookie"])
      const home = yield* http(s.info.port, { path: "/", headers: { cookie: s.cookie } })
      assert.strictEqual(home.status, 200)
      assert.include(home.body, "run-crashed")
    })))

  it.scopedLive("the icon and the assets are served on every page's Host, with or without the session, holding no data", () =>
    Live(Effect.gen(function*() {
      const s = yield* started
      for (const path of ["/favicon.ico", "/favicon.svg", "/assets/console.css", "/assets/console.js"]) {
        for (const headers of [{}, { cookie: s.cookie }]) {
          const r = yield* http(s.info.port, { path, headers })
          assert.strictEqual(r.status, 200, path)
          assert.notInclude(r.body, "run-crashed")
        }
      }
      assert.match((yield* http(s.info.port, { path: "/favicon.ico" })).headers["content-type"] as string, /image\/svg\+xml/)
      const wrongHost = yield* http(s.info.port, { path: "/favicon.ico", headers: { host: "evil.example" } })
      assert.strictEqual(wrongHost.status, 421)
      // Every page, the refusals included, names the icon (so no browser asks for a missing one).
      for (const body of [s.home.body, (yield* http(s.info.port, { path: "/" })).body]) assert.include(body, `<link rel="icon" href="/favicon.svg"`)
    })))

  it.scopedLive("refused: no token, wrong token (URL or cookie) — nothing shown, nothing called", () =>
    Live(Effect.gen(function*() {
      const s = yield* started
      const none = yield* http(s.info.port, { path: "/" })
      const wrongUrl = yield* http(s.info.port, { path: "/?token=AAAA" })
      const wrongCookie = yield* http(s.info.port, { path: "/run/run-crashed", headers: { cookie: `rr_console_${s.info.port}=AAAA` } })
      const api = yield* http(s.info.port, { path: "/api/state" })
      for (const r of [none, wrongUrl, wrongCookie, api]) {
        assert.strictEqual(r.status, 401)
        assert.notInclude(r.body, "run-crashed")
        assert.isUndefined(r.headers["set-cookie"])
      }
      const post = yield* http(s.info.port, {
        method: "POST",
        path: "/run/run-crashed/reconcile",
        headers: { origin: `http://127.0.0.1:${s.info.port}`, "content-type": "application/x-www-form-urlencoded" },
        body: `csrf=${s.csrf}`
      })
      assert.strictEqual(post.status, 401)
      assert.deepStrictEqual(s.calls, [])
    })))

  it.scopedLive("refused: a Host other than the loopback address and port (DNS rebinding)", () =>
    Live(Effect.gen(function*() {
      const s = yield* started
      for (const host of ["evil.example", `evil.example:${s.info.port}`, "127.0.0.1", `127.0.0.1:${s.info.port + 1}`]) {
        const r = yield* http(s.info.port, { path: "/", headers: { host, cookie: s.cookie } })
        assert.strictEqual(r.status, 421, host)
        assert.notInclude(r.body, "run-crashed")
        const login = yield* http(s.info.port, { path: `/?token=${s.info.token}`, headers: { host } })
        assert.strictEqual(login.status, 421, host)
        assert.isUndefined(login.headers["set-cookie"])
      }
    })))

  it.scopedLive("refused: cross-origin POST, POST without Origin, bad CSRF token, GET to an action — nothing written", () =>
    Live(Effect.gen(function*() {
      const s = yield* started
      const before = yield* highWaters(s.workspace)
      const form = { "content-type": "application/x-www-form-urlencoded", cookie: s.cookie }
      const body = `csrf=${s.csrf}&choice=abort&actor=eve`
      const attempts = [
        { headers: { ...form, origin: "http://evil.example" }, body },
        { headers: { ...form, origin: `http://localhost:${s.info.port + 1}` }, body },
        { headers: form, body },
        { headers: { ...form, origin: `http://127.0.0.1:${s.info.port}` }, body: "choice=abort&actor=eve" },
        { headers: { ...form, origin: `http://127.0.0.1:${s.info.port}` }, body: `csrf=${s.info.token}&choice=abort&actor=eve` }
      ]
      for (const a of attempts) {
        const r = yield* http(s.info.port, { method: "POST", path: "/run/run-crashed/resolve?call=w1", headers: a.headers, body: a.body })
        assert.strictEqual(r.status, 403)
      }
      const get = yield* http(s.info.port, { path: `/run/run-crashed/resolve?call=w1&${body}`, headers: { cookie: s.cookie } })
      assert.strictEqual(get.status, 404)
      assert.deepStrictEqual(s.calls, [])
      assert.strictEqual(yield* highWaters(s.workspace), before)
    })))

  it.scopedLive("refused: path traversal out of the console's assets", () =>
    Live(Effect.gen(function*() {
      const s = yield* started
      const paths = [
        "/assets/../package.json",
        "/assets/../../../../etc/passwd",
        "/assets/%2e%2e/%2e%2e/package.json",
        "/assets/..%2f..%2fpackage.json",
        "/assets/..\\..\\package.json",
        "/package.json",
        "/assets/",
        "/run/..%2f..%2fetc/event/1"
      ]
      for (const path of paths) {
        const r = yield* http(s.info.port, { path, headers: { cookie: s.cookie } })
        assert.oneOf(r.status, [400, 404], path)
        assert.notInclude(r.body, "\"name\": \"runtime-resume\"", path)
        assert.notInclude(r.body, "root:x:", path)
      }
    })))

  it.scopedLive("a same-origin POST with the CSRF token calls the action; no choice, an empty or non-JSON edit are refused first", () =>
    Live(Effect.gen(function*() {
      const s = yield* started
      const headers = {
        "content-type": "application/x-www-form-urlencoded",
        cookie: s.cookie,
        origin: `http://127.0.0.1:${s.info.port}`
      }
      const csrf = `csrf=${encodeURIComponent(s.csrf)}`
      // What one click on an untouched form sends (no choice, an empty box), an empty edit, a result that is not JSON.
      for (const body of [`${csrf}&result=&actor=ann`, `${csrf}&choice=edit&result=&actor=ann`, `${csrf}&choice=edit&result=%20%0A&actor=ann`, `${csrf}&choice=edit&result=${encodeURIComponent("{nope")}&actor=ann`]) {
        const bad = yield* http(s.info.port, { method: "POST", path: "/run/run-crashed/resolve?call=w1", headers, body })
        assert.strictEqual(bad.status, 303)
        const location = decodeURIComponent(String(bad.headers["location"]))
        assert.match(location, /^\/run\/run-crashed\?error=w1: .*nothing was recorded/, body)
      }
      assert.deepStrictEqual(s.calls, [])
      const ok = yield* http(s.info.port, {
        method: "POST",
        path: "/run/run-crashed/resolve?call=w1",
        headers,
        body: `${csrf}&choice=edit&result=${encodeURIComponent("{\"written\":true}")}&actor=ann`
      })
      assert.strictEqual(ok.status, 303)
      assert.deepStrictEqual(s.calls, [{
        action: "resolve",
        runId: "run-crashed",
        callId: "w1",
        choice: { _tag: "edit", result: { written: true }, isError: false },
        actor: "ann"
      }])
    })))

  it.scopedLive.skipIf(ConsoleActionsLive.WIRED)("before the programs are connected, a button says not_wired and writes nothing", () =>
    Live(Effect.gen(function*() {
      const workspace = yield* workspaceWith(threeRuns())
      const before = yield* highWaters(workspace)
      const env = Layer.mergeAll(NodeContext.layer, NodeNoFollowFileSystem.layer, NodeWorkspaceLock.layerNode, NodeWorkspaceOwner.layerNode)
      const context = yield* Layer.build(
        ConsoleServer.layerNode({ workspace }).pipe(
          Layer.provide(ConsoleActionsLive.layer({ workspace })),
          Layer.provide(NodeWorkspaceLock.layer),
          Layer.provide(env)
        )
      )
      const info = yield* Effect.provide(ConsoleServer.Console, context)
      const login = yield* http(info.port, { path: `/?token=${info.token}` })
      const cookie = String(login.headers["set-cookie"]).split(";")[0]!
      const home = yield* http(info.port, { path: "/", headers: { cookie } })
      const csrf = /data-csrf="([^"]+)"/.exec(home.body)![1]!
      const r = yield* http(info.port, {
        method: "POST",
        path: "/run/run-crashed/reconcile",
        headers: { cookie, origin: `http://127.0.0.1:${info.port}`, "content-type": "application/x-www-form-urlencoded" },
        body: `csrf=${encodeURIComponent(csrf)}`
      })
      assert.strictEqual(r.status, 303)
      assert.match(String(r.headers["location"]), /error=not_wired/)
      assert.strictEqual(yield* highWaters(workspace), before)
    })))

  it.scopedLive("generated run and call ids: the console's own links reach each run, its form records on that run only", () =>
    Live(Effect.gen(function*() {
      // Ids the ledger admits (no lone surrogate), drawn with a fixed seed, plus the hand-picked traps.
      const drawn = fc.sample(
        fc.string({ minLength: 1, maxLength: 10, unit: fc.oneof(fc.constantFrom(".", "/", "\\", "%", "~", " ", "'", "\"", "\n", "?", "#", ";", "&"), fc.string({ minLength: 1, maxLength: 1, unit: "grapheme" })) }),
        { numRuns: 40, seed: 24 }
      ).filter((id) => {
        try {
          RunId.make(id)
          return true
        } catch {
          return false
        }
      })
      const ids = [...new Set([...HOSTILE_IDS, ...drawn])]
      const workspace = yield* workspaceWith(ids.map((id) => stuckRun(id, `c:${id}`)), { managed: true })
      const env = Layer.mergeAll(NodeContext.layer, NodeNoFollowFileSystem.layer, NodeWorkspaceLock.layerNode, NodeWorkspaceOwner.layerNode)
      const context = yield* Layer.build(
        ConsoleServer.layerNode({ workspace, warm: false }).pipe(
          Layer.provide(ConsoleActionsLive.layer({ workspace })),
          Layer.provide(NodeWorkspaceLock.layer),
          Layer.provide(env)
        )
      )
      const info = yield* Effect.provide(ConsoleServer.Console, context)
      const login = yield* http(info.port, { path: `/?token=${info.token}` })
      const cookie = String(login.headers["set-cookie"]).split(";")[0]!
      const home = yield* http(info.port, { path: "/", headers: { cookie } })
      const csrf = /data-csrf="([^"]+)"/.exec(home.body)![1]!
      const unescape = (text: string) =>
        text.replace(/&(amp|lt|gt|quot|#39);/g, (_, e: string) => ({ amp: "&", lt: "<", gt: ">", quot: "\"", "#39": "'" })[e]!)
      // Every run's link, as the workspace page writes it (an href, HTML-escaped), and the id it shows.
      const links = [...home.body.matchAll(/<td data-label="run"><a href="([^"]+)">([^<]*)<\/a><\/td>/g)].map((m) => ({ href: unescape(m[1]!), id: unescape(m[2]!) }))
      assert.deepStrictEqual(links.map((l) => l.id).sort(), [...ids].sort())
      for (const { href, id } of links) {
        // What a browser sends for that href: the URL parser's path (nothing normalised away).
        const path = new URL(href, `http://127.0.0.1:${info.port}`).pathname
        const run = yield* http(info.port, { path, headers: { cookie } })
        assert.strictEqual(run.status, 200, id)
        assert.strictEqual(unescape(/<h1>Run <code>([^<]*)<\/code>/.exec(run.body)![1]!), id)
        // The next step names the run as one shell word, as the CLI quotes it.
        assert.include(unescape(run.body), ` --run ${shellWord(id)} `)
        // Its event link and the event page's link back.
        const eventHref = unescape(/<td data-label="seq" class="num"><a href="([^"]+)">3<\/a>/.exec(run.body)![1]!)
        const event = yield* http(info.port, { path: new URL(eventHref, "http://x").pathname, headers: { cookie } })
        assert.strictEqual(event.status, 200, id)
        assert.include(event.body, `<p><a href="${/<p><a href="([^"]+)">← run/.exec(event.body)![1]!}">← run`)
        assert.strictEqual(unescape(/<p><a href="([^"]+)">← run/.exec(event.body)![1]!), href)
        // Its form: the action as written, abort, by ann.
        const action = unescape(/<form method="post" action="([^"]+)" class="resolve"/.exec(run.body)![1]!)
        const target = new URL(action, "http://x")
        const posted = yield* http(info.port, {
          method: "POST",
          path: `${target.pathname}${target.search}`,
          headers: { cookie, origin: `http://127.0.0.1:${info.port}`, "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({ csrf, choice: "abort", actor: "ann" }).toString()
        })
        assert.strictEqual(posted.status, 303, id)
        const back = String(posted.headers["location"])
        assert.strictEqual(back.split("?")[0], href)
        assert.include(decodeURIComponent(back), `c:${id}: abandoned`)
      }
      const inspected = yield* inspectWorkspace().pipe(
        Effect.provide(layerStore("sqlite", { workspace, readOnly: true }).pipe(Layer.provide(NodeWorkspaceLock.layer))),
        Effect.scoped
      )
      assert.strictEqual(inspected.runs.length, ids.length)
      for (const r of inspected.runs) {
        const op = r.plan!.operations[0]!
        assert.deepStrictEqual([op.callId, op.recovery?.reasonCode, op.recovery?.provenance.actor], [`c:${r.runId}`, "manual_abandon", "ann"], r.runId)
      }
    })), 180_000)
})
