// The recovery console in a real headless Chromium (docs/spec/06-cli.md, "The recovery console"): a run crashed by a real SIGKILL in its file write, its
// indeterminate operation on the timeline, the event page, the JSON editor's check, and the action buttons.
import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { existsSync, mkdirSync } from "node:fs"
import { join, resolve } from "node:path"
import type { BrowserContext, Page } from "playwright-core"
import { chromium } from "playwright-core"
import { CHILD_PATH, CHILD_RUN } from "../harness/FileWriteChild.js"
import type { ConsoleChoice } from "../src/Console/ConsoleActions.js"
import { ConsoleActions } from "../src/Console/ConsoleActions.js"
import * as ConsoleActionsLive from "../src/Console/ConsoleActionsLive.js"
import * as ConsoleServer from "../src/Console/ConsoleServer.js"
import * as NodeNoFollowFileSystem from "../src/Layers/NodeNoFollowFileSystem.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"
import * as NodeWorkspaceOwner from "../src/Layers/NodeWorkspaceOwner.js"
import { layerStore } from "../src/Layers/NodeRuntimeEventStore.js"
import { inspectWorkspace } from "../src/Programs/InspectWorkspace.js"
import { repairWorkspace } from "../src/Workspace/RepairWorkspace.js"
import { verificationOk, verifyWorkspace } from "../src/Programs/VerifyWorkspace.js"
import { shellWord } from "../src/Cli/internal/nextCommand.js"
import { HOSTILE_IDS, stuckRun, threeRuns, workspaceWith } from "./support/consoleWorkspace.js"

const CHROMIUM = "/usr/bin/chromium"
const hasChromium = existsSync(CHROMIUM)
if (!hasChromium) console.log(`ConsoleBrowser: ${CHROMIUM} is missing, the browser tests are skipped (apt-get install -y chromium)`)

/** The viewport of every page visit: a phone's (the pages must fit 360 px and up without sideways scroll). */
const PHONE = { width: 390, height: 844 }

/** Where the screenshots go (git-ignored). */
const SHOTS = resolve(import.meta.dirname, "..", "test-results", "console")

const browser = Effect.acquireRelease(
  Effect.promise(async () => {
    const fs = await import("node:fs/promises")
    const dir = await fs.mkdtemp(join((await import("node:os")).tmpdir(), "rr-chromium-"))
    const context = await chromium.launchPersistentContext(dir, {
      executablePath: CHROMIUM,
      headless: true,
      viewport: PHONE,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync"
      ]
    })
    return { context, dir }
  }),
  ({ context, dir }) =>
    Effect.promise(async () => {
      await context.close()
      await (await import("node:fs/promises")).rm(dir, { recursive: true, force: true })
    })
).pipe(Effect.map(({ context }) => context))

const shot = (page: Page, name: string) =>
  Effect.promise(async () => {
    mkdirSync(SHOTS, { recursive: true })
    await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true })
  })

/** Whether the page scrolls sideways: its document is wider than the viewport (at 390 px). */
const fits = (page: Page, what: string) =>
  Effect.promise(async () => {
    // A string: the test's TypeScript has no DOM types.
    const { scroll, width } = await page.evaluate<{ scroll: number; width: number }>(
      "({ scroll: document.documentElement.scrollWidth, width: window.innerWidth })"
    )
    assert.strictEqual(width, PHONE.width)
    assert.isAtMost(scroll, width, `${what}: the document is ${scroll} px wide in a ${width} px viewport`)
  })

/** Every response of the context with status 400 or more (the icon's included), as "status url". */
const failures = (context: BrowserContext) => {
  const seen: Array<string> = []
  context.on("response", (response) => {
    if (response.status() >= 400) seen.push(`${response.status()} ${response.url()}`)
  })
  return seen
}

// What the live actions need: Node's platform, the ledger FileSystem, the no-follow file system, the owner lock.
const ActionEnv = Layer.mergeAll(
  NodeContext.layer,
  NodeNoFollowFileSystem.layer,
  NodeWorkspaceLock.layerNode,
  NodeWorkspaceOwner.layerNode
)

const serve = <E>(workspace: string, actions: Layer.Layer<ConsoleActions, E, Layer.Layer.Success<typeof ActionEnv>>) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(
      ConsoleServer.layerNode({ workspace }).pipe(Layer.provide(actions), Layer.provide(NodeWorkspaceLock.layer), Layer.provide(ActionEnv))
    )
    return yield* Effect.provide(ConsoleServer.Console, context)
  })

// A workspace whose run was SIGKILLed for real after its file write's rename (harness/FileWriteChild.ts).
const crashedFileWrite = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const ws = yield* fs.makeTempDirectoryScoped({ prefix: "rr-console-fw-" })
  const root = join(ws, "project")
  yield* fs.makeDirectory(root)
  yield* fs.writeFileString(join(root, "notes.txt"), "before")
  // With the actions wired, the run is managed (it has a header, as a host makes it), so repair can seal it.
  const managed = ConsoleActionsLive.WIRED ? ["managed"] : []
  const proc = yield* Command.make(process.execPath, "--import", "tsx", CHILD_PATH, "sqlite", ws, root, "after_rename", ...managed).pipe(
    Command.workingDirectory(resolve(import.meta.dirname, "..")),
    Command.start
  )
  const reached = yield* proc.stdout.pipe(
    Stream.decodeText(),
    Stream.splitLines,
    Stream.filter((line) => line === "at after_rename"),
    Stream.runHead,
    Effect.timeout("90 seconds")
  )
  assert.isTrue(Option.isSome(reached), "the child reached after_rename")
  yield* proc.kill("SIGKILL")
  yield* proc.exitCode.pipe(Effect.ignore)
  return ws
})

const open = (context: BrowserContext, url: string) =>
  Effect.promise(async () => {
    const page = await context.newPage()
    await page.goto(url)
    return page
  })

const Live = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.provide(effect, NodeContext.layer)

describe.skipIf(!hasChromium)("recovery console in headless Chromium", () => {
  it.scopedLive("a SIGKILLed file write: the workspace, the indeterminate operation on the timeline, its event", () =>
    Live(Effect.gen(function*() {
      const ws = yield* crashedFileWrite
      const info = yield* serve(ws, ConsoleActionsLive.layer({ workspace: ws }))
      const context = yield* browser
      const failed = failures(context)
      const page = yield* open(context, info.url)
      const home = yield* Effect.promise(async () => {
        await page.waitForSelector("#runs")
        return { url: page.url(), text: await page.locator("#runs").innerText() }
      })
      assert.strictEqual(home.url, `http://127.0.0.1:${info.port}/`, "the token left the address bar")
      assert.include(home.text, CHILD_RUN)
      // The workspace table: the stuck tool and the person's next step (repair seals the interrupted run).
      assert.include(home.text, "open dead")
      assert.match(home.text, /\n\w+ \([^)]+\)\n/)
      assert.match(home.text, /runtime-resume repair \S+/)
      yield* fits(page, "workspace")
      yield* shot(page, "workspace")
      const bar = yield* Effect.promise(async () => {
        await page.click(`a[href="/run/${CHILD_RUN}"]`)
        const op = page.locator("svg.timeline a.op").first()
        await op.waitFor()
        return { status: await op.getAttribute("data-status"), plan: await page.locator(".plan").innerText() }
      })
      assert.strictEqual(bar.status, "indeterminate")
      assert.include(bar.plan, "blocked")
      // Not sealed yet: no action is offered, the next step says repair.
      const open1 = yield* Effect.promise(async () => ({
        reconcile: await page.locator("form.reconcile").count(),
        resolve: await page.locator("form.resolve").count(),
        next: await page.locator(".next-step").innerText()
      }))
      assert.deepStrictEqual([open1.reconcile, open1.resolve], [0, 0])
      assert.include(open1.next, "runtime-resume repair")
      yield* fits(page, "run (open)")
      yield* shot(page, "run-crashed")
      const event = yield* Effect.promise(async () => {
        await page.locator("svg.timeline a.op").first().click()
        await page.waitForSelector("pre.event")
        return page.locator("pre.event").innerText()
      })
      assert.include(event, "FunctionCall")
      assert.include(event, "notes.txt")
      yield* fits(page, "event")
      yield* shot(page, "event")
      if (ConsoleActionsLive.WIRED) {
        // What the person types first (the page's next step): `runtime-resume repair` seals the crashed run.
        yield* repairWorkspace({ workspace: ws }).pipe(Effect.provide(ActionEnv))
        const settled = yield* Effect.promise(async () => {
          await page.goto(`http://127.0.0.1:${info.port}/run/${CHILD_RUN}`)
          const next = await page.locator(".next-step").innerText()
          await page.click("form.reconcile button")
          await page.waitForSelector("p.notice")
          await page.waitForSelector(`svg.timeline a.op[data-status="settled-reconciler"]`, { timeout: 3000 })
          return {
            next,
            notice: await page.locator("p.notice").innerText(),
            tone: await page.locator("p.notice").getAttribute("class"),
            forms: await page.locator("form.resolve, form.reconcile").count()
          }
        })
        assert.include(settled.next, "runtime-resume reconcile --run")
        assert.match(settled.notice, /^Reconcile settled 1 operation\./)
        assert.strictEqual(settled.tone, "notice settled")
        // Settled: no form is left to click.
        assert.strictEqual(settled.forms, 0)
        yield* fits(page, "run (reconciled)")
        yield* shot(page, "run-reconciled")
      }
      assert.deepStrictEqual(failed, [], "no request failed (the icon included)")
    })), 180_000)

  it.scopedLive("the JSON editor refuses what is not JSON before sending; the edit goes out with the actor's name", () =>
    Live(Effect.gen(function*() {
      const ws = yield* workspaceWith(threeRuns(), { managed: true })
      const calls: Array<{ callId: string; choice: ConsoleChoice; actor: string }> = []
      const actions = Layer.succeed(ConsoleActions, {
        reconcile: () => Effect.succeed({ summary: "reconciled", tone: "settled" as const, report: {} }),
        resolve: (_runId, callId, choice, actor) =>
          Effect.sync(() => (calls.push({ callId, choice, actor }), { summary: `resolved ${callId}`, tone: "settled" as const, report: {} }))
      })
      const info = yield* serve(ws, actions)
      const context = yield* browser
      const page = yield* open(context, `${info.url.replace("/?", "/run/run-crashed?")}`)
      // One click on the untouched form records nothing: no choice is made, the result box is empty.
      const untouched = yield* Effect.promise(async () => {
        const form = page.locator("form.resolve[data-call=w1]")
        const box = await form.locator("textarea").inputValue()
        await form.locator("input.actor").fill("ann")
        await form.locator("button").click()
        await page.waitForTimeout(300)
        return { box, url: page.url() }
      })
      assert.strictEqual(untouched.box, "")
      assert.notInclude(untouched.url, "notice=")
      assert.deepStrictEqual(calls, [], "one click sent nothing")
      // Edit chosen, the box still empty: refused in the page.
      const empty = yield* Effect.promise(async () => {
        const form = page.locator("form.resolve[data-call=w1]")
        await form.locator("input[name=choice][value=edit]").check()
        await form.locator("button").click()
        await page.waitForSelector(".jsonerr:not([hidden])")
        return page.locator(".jsonerr").innerText()
      })
      assert.match(empty, /edit needs the result/)
      assert.deepStrictEqual(calls, [], "nothing was sent")
      yield* fits(page, "run (form)")
      const refused = yield* Effect.promise(async () => {
        const form = page.locator("form.resolve[data-call=w1]")
        await form.locator("textarea").fill("{\"written\": tru")
        await form.locator("input.actor").fill("ann")
        await form.locator("button").click()
        await page.waitForSelector(".jsonerr:not([hidden])")
        return page.locator(".jsonerr").innerText()
      })
      assert.match(refused, /not valid JSON/)
      assert.deepStrictEqual(calls, [], "nothing was sent")
      yield* shot(page, "json-editor")
      const notice = yield* Effect.promise(async () => {
        const form = page.locator("form.resolve[data-call=w1]")
        await form.locator("textarea").fill("{\"written\": true}")
        await form.locator("button").click()
        await page.waitForSelector("p.notice")
        return page.locator("p.notice").innerText()
      })
      assert.strictEqual(notice, "resolved w1")
      yield* fits(page, "run (notice)")
      assert.deepStrictEqual(calls, [{ callId: "w1", choice: { _tag: "edit", result: { written: true }, isError: false }, actor: "ann" }])
    })), 120_000)

  // Runs once ConsoleActionsLive connects the reconcile/resolve programs (WIRED); skipped until then.
  it.scopedLive.skipIf(!ConsoleActionsLive.WIRED)("edit an indeterminate result in the page: settled by the person, in the page and in the ledger", () =>
    Live(Effect.gen(function*() {
      const ws = yield* workspaceWith(threeRuns(), { managed: true })
      const info = yield* serve(ws, ConsoleActionsLive.layer({ workspace: ws }))
      const context = yield* browser
      const page = yield* open(context, `${info.url.replace("/?", "/run/run-crashed?")}`)
      yield* Effect.promise(async () => {
        const form = page.locator("form.resolve[data-call=w1]")
        await form.locator("input[name=choice][value=edit]").check()
        await form.locator("textarea").fill("{\"written\": true}")
        await form.locator("input.actor").fill("ann")
        await form.locator("button").click()
        await page.waitForSelector(`svg.timeline a.op[data-status="settled-person"]`)
      })
      // Settled by the person: the state asks for the continuation, and offers no form any more.
      const after = yield* Effect.promise(async () => ({
        forms: await page.locator("form.resolve, form.reconcile").count(),
        next: await page.locator(".next-step").innerText(),
        notice: await page.locator("p.notice").innerText()
      }))
      assert.strictEqual(after.forms, 0)
      assert.include(after.next, "awaiting continuation")
      assert.include(after.notice, "w1: your result is recorded")
      yield* fits(page, "run (settled)")
      yield* shot(page, "run-settled")
      const ledger = yield* Effect.gen(function*() {
        const verification = yield* verifyWorkspace()
        const inspection = yield* inspectWorkspace({ runId: "run-crashed" })
        return { ok: verificationOk(verification), op: inspection.runs[0]!.plan!.operations[0]! }
      }).pipe(
        Effect.provide(layerStore("sqlite", { workspace: ws, readOnly: true }).pipe(Layer.provide(NodeWorkspaceLock.layer))),
        Effect.scoped
      )
      assert.isTrue(ledger.ok, "verify passes")
      assert.strictEqual(ledger.op.recovery?.provenance.kind, "manual")
      assert.strictEqual(ledger.op.recovery?.provenance.actor, "ann")
      assert.strictEqual(ledger.op.recovery?.reasonCode, "manual_edit")
    })), 120_000)
})

describe.skipIf(!hasChromium)("recovery console in headless Chromium: hostile run ids, the one-use URL, phone width", () => {
  it.scopedLive("every run id the ledger admits is reachable by the console's own links, and its form records on that run", () =>
    Live(Effect.gen(function*() {
      const ws = yield* workspaceWith(HOSTILE_IDS.map((id) => stuckRun(id, `call ${id}`)), { managed: true })
      const info = yield* serve(ws, ConsoleActionsLive.layer({ workspace: ws }))
      const context = yield* browser
      const failed = failures(context)
      // The pages' live poll (a page reloads itself when the ledger changes) is held in this test: each form below
      // changes the ledger, and a reload racing a click would test the race, not the links.
      yield* Effect.promise(() =>
        context.addInitScript(
          "(() => { const f = window.fetch.bind(window); window.fetch = (input, init) => String(input).includes('/api/state') ? new Promise(() => {}) : f(input, init) })()"
        )
      )
      const page = yield* open(context, info.url)
      yield* fits(page, "workspace (hostile ids)")
      yield* shot(page, "workspace-hostile")
      const count = yield* Effect.promise(() => page.locator("#runs td[data-label=run] a").count())
      assert.strictEqual(count, HOSTILE_IDS.length)
      const reached: Array<string> = []
      for (let i = 0; i < count; i++) {
        const seen = yield* Effect.promise(async () => {
          await page.goto(`http://127.0.0.1:${info.port}/`)
          const link = page.locator("#runs td[data-label=run] a").nth(i)
          const id = (await link.textContent())!
          await link.click()
          await page.waitForSelector("h1 code")
          const title = await page.locator("h1 code").textContent()
          const next = await page.locator(".next-step pre.cmd").first().textContent()
          // The run's own event link, then back to the run by the event page's link.
          await page.locator("#events td[data-label=seq] a").first().click()
          await page.waitForSelector("pre.event")
          const event = await page.locator("h1 code").textContent()
          await page.locator("main > p > a").first().click()
          await page.waitForSelector("form.resolve")
          // The run's form: abort, by ann.
          const form = page.locator("form.resolve").first()
          await form.locator("input[name=choice][value=abort]").check()
          await form.locator("input.actor").fill("ann")
          await form.locator("button").click()
          await page.waitForSelector("p.notice")
          return { id, title, event, next, notice: await page.locator("p.notice").innerText(), after: await page.locator("h1 code").textContent() }
        })
        assert.strictEqual(seen.title, seen.id)
        assert.strictEqual(seen.event, seen.id)
        assert.strictEqual(seen.after, seen.id)
        assert.match(seen.notice, /abandoned: the turn stays stopped \(by ann\)/, seen.id)
        // The next step names the run as one shell word (shellWord: the same quoting as the CLI).
        assert.include(seen.next!, ` --run ${shellWord(seen.id)} `)
        if (seen.id === "..") yield* fits(page, "run ..")
        reached.push(seen.id)
      }
      assert.deepStrictEqual([...reached].sort(), [...HOSTILE_IDS].sort())
      // The ledger: every run's own operation was abandoned by ann (each form wrote on its own run, no other).
      const runs = yield* inspectWorkspace().pipe(
        Effect.provide(layerStore("sqlite", { workspace: ws, readOnly: true }).pipe(Layer.provide(NodeWorkspaceLock.layer))),
        Effect.scoped
      )
      for (const run of runs.runs) {
        const op = run.plan!.operations[0]!
        assert.strictEqual(op.callId, `call ${run.runId}`)
        assert.deepStrictEqual([op.recovery?.reasonCode, op.recovery?.provenance.actor], ["manual_abandon", "ann"], run.runId)
      }
      assert.deepStrictEqual(failed, [])
    })), 300_000)

  it.scopedLive("the printed URL works once: a browser without the cookie is refused the same URL; the cookie still works; the refusal fits too", () =>
    Live(Effect.gen(function*() {
      const ws = yield* workspaceWith(threeRuns(), { managed: true })
      const info = yield* serve(ws, ConsoleActionsLive.layer({ workspace: ws }))
      const context = yield* browser
      const failed = failures(context)
      const page = yield* open(context, info.url)
      const cookies = yield* Effect.promise(async () => {
        await page.waitForSelector("#runs")
        return context.cookies()
      })
      assert.strictEqual(cookies.length, 1)
      assert.notStrictEqual(cookies[0]!.value, info.token)
      // Another browser (no cookie) opening the same URL, as from the history: refused.
      const refused = yield* Effect.promise(async () => {
        await context.clearCookies()
        const response = await page.goto(info.url)
        return { status: response!.status(), text: await page.locator("body").innerText(), cookies: await context.cookies() }
      })
      assert.strictEqual(refused.status, 401)
      assert.include(refused.text, "This link was already used")
      assert.deepStrictEqual(refused.cookies, [])
      yield* fits(page, "refusal")
      yield* shot(page, "link-used")
      // The first browser's cookie still works.
      const back = yield* Effect.promise(async () => {
        await context.addCookies(cookies)
        const response = await page.goto(`http://127.0.0.1:${info.port}/run/run-crashed`)
        return { status: response!.status(), title: await page.locator("h1 code").textContent() }
      })
      assert.deepStrictEqual(back, { status: 200, title: "run-crashed" })
      // The only failing request is the refused page itself (never the icon).
      assert.deepStrictEqual(failed, [`401 ${info.url}`])
    })), 120_000)
})
