// The recovery console (docs/spec/06-cli.md, "The recovery console"): an HTTP app over a workspace, served on loopback only, behind a random token.
// `layer` mounts it on a host's own HttpServer; `layerNode` serves it on 127.0.0.1 with Node's HTTP server.
import type * as FileSystem from "@effect/platform/FileSystem"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { createServer } from "node:http"
import { randomBytes, timingSafeEqual } from "node:crypto"
import { RuntimeEvent } from "../Domain/RuntimeEvent.js"
import { detectStore } from "../Layers/NodeRuntimeEventStore.js"
import { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type { WorkspaceLock } from "../Services/WorkspaceLock.js"
import type { PersistentStore } from "../Layers/NodeRuntimeEventStore.js"
import { layerWorkspaceStores } from "../Workspace/RepairWorkspace.js"
import type { ConsoleChoice } from "./ConsoleActions.js"
import { ConsoleActions } from "./ConsoleActions.js"
import { ASSETS } from "./internal/assets.js"
import * as Data from "./internal/data.js"
import * as Pages from "./internal/pages.js"
import { decodeIdSegment, isSuspiciousPath, ROUTES, runPath } from "./internal/paths.js"
import type { CommandContext, ConsoleRunState } from "./internal/state.js"
import { plannedOfGlance, plannedOfInspection, stateOf } from "./internal/state.js"

/**
 * What the console serves.
 *
 * @since 0.1.0
 * @category models
 */
export interface ConsoleOptions {
  readonly workspace: string
  /** The ledger to open (default: the one the workspace holds). */
  readonly store?: PersistentStore
  /** The access token (default: 24 fresh random bytes). */
  readonly token?: string
  /**
   * A run of at most this many events (a workspace of at most this many in all) is read in full, verified and planned
   * before its page is served. A larger one is served at once from indexed reads, marked "not yet verified", while it
   * is read in the background; the page updates itself when that is done. Default `INLINE_EVENTS`.
   */
  readonly inlineEvents?: number
  /** Read every run's summary and the workspace's verification in the background from the start (default true). */
  readonly warm?: boolean
  /**
   * How the pages print the next commands, as the CLI prints them (`Cli/internal/nextCommand.ts`): the words that start
   * the tool as the person invoked it (`["npx", "runtime-resume"]` through npx) and the store flags it was given.
   * Default: `runtime-resume`, no flags.
   */
  readonly invocation?: { readonly prefix: ReadonlyArray<string>; readonly storeArgs?: ReadonlyArray<string> }
}

/**
 * The default of `ConsoleOptions.inlineEvents`: runs up to this size are summarised before their page is served.
 *
 * @since 0.1.0
 * @category constants
 */
export const INLINE_EVENTS = 5000

/**
 * A running console: its URL (carrying the token), the token and the port. The token works once: the first request
 * carrying it gets the session cookie, and the same URL is refused afterwards (the browser's history holds nothing
 * usable); a browser that has the cookie is sent on to the page.
 *
 * @since 0.1.0
 * @category models
 */
export interface ConsoleInfo {
  readonly url: string
  readonly token: string
  readonly port: number
}

/**
 * The running console's address and token.
 *
 * @since 0.1.0
 * @category tags
 */
export class Console extends Context.Tag("runtime-resume/Console")<Console, ConsoleInfo>() {}

const encodeEvent = Schema.encodeSync(RuntimeEvent)

const same = (a: string, b: string): boolean => {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

const SECURITY_HEADERS = {
  "cache-control": "no-store",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  // Not `no-referrer`: with it Chromium sends `Origin: null` on the page's own form POSTs.
  "referrer-policy": "same-origin",
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
}

const page = (body: string, status = 200, headers: Record<string, string> = {}) =>
  HttpServerResponse.text(body, { status, contentType: "text/html; charset=utf-8", headers: { ...SECURITY_HEADERS, ...headers } })

const refuse = (status: number, title: string, message: string) => page(Pages.messagePage(title, message), status)

const redirect = (location: string, headers: Record<string, string> = {}) =>
  HttpServerResponse.empty({ status: 303, headers: { ...SECURITY_HEADERS, location, ...headers } })

const parseChoice = (form: URLSearchParams): ConsoleChoice | string => {
  const choice = form.get("choice")
  if (choice === "retry") return { _tag: "retry" }
  if (choice === "abort") return { _tag: "abort" }
  if (choice !== "edit") return "choose retry, edit or abort; nothing was recorded"
  const text = form.get("result") ?? ""
  if (text.trim() === "") return "edit needs the result the model should see, as JSON (the box was empty); nothing was recorded"
  let result: unknown
  try {
    result = JSON.parse(text)
  } catch (e) {
    return `the edited result is not valid JSON: ${(e as Error).message}; nothing was recorded`
  }
  return { _tag: "edit", result, isError: form.get("isError") === "true" }
}

const TONES: ReadonlySet<string> = new Set(["settled", "attention"])

/**
 * The console's HTTP app over `options.workspace` (and `warm`, which fills its caches), for a server listening on
 * loopback at `port`. Every request is refused unless its Host is the loopback address and port. Every page needs the
 * session: the URL's `?token=` is exchanged ONCE for an HttpOnly SameSite=Strict cookie holding a separate session
 * secret, then the token is dead. A POST also needs the CSRF token and the console's own Origin. Assets (stylesheet,
 * script, icon) come from memory only and hold no data; the stores are opened read-only per request; every page's
 * advice and admitted actions come from `internal/state.ts` (`RecoveryState.runState`); actions go through
 * `ConsoleActions`.
 *
 * @since 0.1.0
 * @category console
 */
export const makeApp = (
  options: ConsoleOptions,
  secrets: { readonly token: string; readonly session: string; readonly csrf: string },
  port: number,
  fork: (effect: Effect.Effect<void>) => Effect.Effect<unknown> = Effect.forkDaemon
) => {
  const cookieName = `rr_console_${port}`
  const hosts = new Set([`127.0.0.1:${port}`, `localhost:${port}`])
  // The URL's token, until its one exchange for the session cookie.
  let tokenUsed = false
  const commands: CommandContext = {
    prefix: options.invocation?.prefix ?? ["runtime-resume"],
    storeArgs: options.invocation?.storeArgs ?? [],
    workspace: options.workspace
  }
  const storeKind = detectStore(options.workspace, options.store)
  const withStores = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.flatMap(
      detectStore(options.workspace, options.store),
      (store) => Effect.provide(effect, layerWorkspaceStores(store, { workspace: options.workspace, readOnly: true }))
    )
  // The background reads see a store whose streams pause between chunks (the server stays responsive meanwhile).
  const inBackground = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    withStores(Effect.provideServiceEffect(effect, RuntimeEventStore, Effect.map(RuntimeEventStore, Data.yieldingStore)))
  const caches = Data.makeCaches()
  const inline = options.inlineEvents ?? INLINE_EVENTS
  // The background reads (a run's summary, the workspace's verification), one per key, shared by every request.
  const slots = new Map<string, Data.Pending<unknown>>()
  const running = () => [...slots].filter(([, slot]) => slot._tag === "Running").map(([name]) => name).sort().join(",")
  // What the page polls: the high-waters, and which background reads are still running (one ending updates the page).
  const hwKey = (hw: Record<string, number>) => Object.entries(hw).map(([k, v]) => `${k}=${v}`).join(",")
  const watchFrom = (hw: Record<string, number>) => `${hwKey(hw)}|${running()}`
  const watchOf = Effect.map(Data.highWaters, watchFrom)

  const summaryOf = (runId: string, key: string) =>
    Data.shared(slots as Map<string, Data.Pending<Data.RunSummary>>, `run:${runId}`, key, inBackground(Data.runSummary(runId, caches)), fork)
  const workspaceOf = (key: string) =>
    Data.shared(slots as Map<string, Data.Pending<Data.WorkspaceView>>, "workspace", key, inBackground(Data.workspaceView), fork)
  // A slot's outcome: now when it is done, after waiting when `wait`, else none yet.
  const outcome = <A>(slot: Data.Pending<A>, wait: boolean) =>
    slot._tag === "Done"
      ? Effect.succeed(slot.exit)
      : wait
      ? Effect.exit(Deferred.await(slot.done))
      : Effect.succeed(undefined)
  const failureOf = <A>(exit: Exit.Exit<A, string> | undefined) =>
    exit === undefined || Exit.isSuccess(exit) ? undefined : Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : "interrupted"

  // Reads every run's summary, then the workspace's verification, once at start (one at a time: the machine is shared),
  // through the same slots as the pages, so a page visited meanwhile waits for nothing twice.
  const warm = withStores(Data.highWaters).pipe(
    Effect.flatMap((hw) =>
      Effect.gen(function*() {
        for (const runId of Object.keys(hw)) {
          const high = yield* withStores(Effect.flatMap(Data.runGlance(runId), (g) => Effect.succeed(`${g.highWater.seq}:${g.highWater.digest}`)))
          yield* Effect.exit(Effect.flatMap(summaryOf(runId, high), (slot) => outcome(slot, true)))
        }
        yield* Effect.exit(Effect.flatMap(workspaceOf(hwKey(hw)), (slot) => outcome(slot, true)))
      })
    ),
    Effect.ignore
  )

  // The state of each run (the one function every verb takes its advice from), from what a page has read.
  const workspaceFacts = Effect.flatMap(
    Effect.zip(storeKind, Data.ownerLive(options.workspace)),
    ([store, live]) => withStores(Data.workspaceFacts(store, live))
  )

  const app = Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const host = request.headers["host"] ?? ""
    if (!hosts.has(host)) return refuse(421, "Wrong host", "this console answers only on its loopback address")
    const rawPath = request.url.split("?")[0]!
    if (isSuspiciousPath(rawPath)) return refuse(400, "Bad path", "paths outside the console are refused")
    const url = new URL(request.url, `http://${host}`)
    // The static assets hold no data: served on the console's Host without the session (the refusal pages use them too).
    const asset = request.method === "GET" || request.method === "HEAD" ? ASSETS.get(rawPath) : undefined
    if (asset !== undefined) {
      return HttpServerResponse.text(asset.body, { contentType: asset.contentType, headers: { ...SECURITY_HEADERS, "cache-control": "max-age=3600" } })
    }
    const cookie = request.cookies[cookieName]
    const session = cookie !== undefined && same(cookie, secrets.session)
    const given = url.searchParams.get("token")
    if (given !== null) {
      url.searchParams.delete("token")
      const rest = url.searchParams.toString()
      const clean = `${rawPath}${rest === "" ? "" : `?${rest}`}`
      // A browser that has the session is sent on to the page; nothing new is granted.
      if (session) return redirect(clean)
      if (!same(given, secrets.token)) return refuse(401, "Wrong token", "open the URL the console printed")
      if (tokenUsed) {
        return refuse(
          401,
          "This link was already used",
          "the console's URL works once, in the browser that opened it first; to open it elsewhere, restart `runtime-resume console` for a fresh URL"
        )
      }
      tokenUsed = true
      return redirect(clean, { "set-cookie": `${cookieName}=${secrets.session}; HttpOnly; SameSite=Strict; Path=/` })
    }
    if (!session) return refuse(401, "No token", "open the URL the console printed (it carries the token)")

    if (request.method === "POST") {
      if (request.headers["origin"] !== `http://${host}`) return refuse(403, "Cross-origin request", "refused")
      const match = ROUTES.action.exec(rawPath)
      if (match === null) return refuse(404, "Not found", "no such action")
      const body = yield* Effect.orElseSucceed(request.text, () => "")
      const form = new URLSearchParams(body)
      if (!same(form.get("csrf") ?? "", secrets.csrf)) return refuse(403, "Bad CSRF token", "reload the page and try again")
      const runId = decodeIdSegment(match[1]!)
      if (runId === undefined) return refuse(400, "Bad path", "run id")
      const back = (param: string) => redirect(`${runPath(runId)}?${param}`)
      const actions = yield* ConsoleActions
      let outcome
      if (match[2] === "reconcile") {
        outcome = yield* Effect.either(actions.reconcile(runId))
      } else {
        const callId = url.searchParams.get("call")
        if (callId === null || callId === "") return back(`error=${encodeURIComponent("no call named: open the run's page and use its form")}`)
        const actor = (form.get("actor") ?? "").trim()
        const choice = parseChoice(form)
        if (typeof choice === "string") return back(`error=${encodeURIComponent(`${callId}: ${choice}`)}`)
        if (actor === "") return back(`error=${encodeURIComponent(`${callId}: your name is required; nothing was recorded`)}`)
        outcome = yield* Effect.either(actions.resolve(runId, callId, choice, actor))
      }
      return back(
        outcome._tag === "Right"
          ? `notice=${encodeURIComponent(outcome.right.summary)}&tone=${outcome.right.tone}`
          : `error=${encodeURIComponent(`${outcome.left.reason}: ${outcome.left.message}`)}`
      )
    }
    if (request.method !== "GET" && request.method !== "HEAD") return refuse(405, "Method not allowed", request.method)

    if (rawPath === "/api/state") {
      const watch = yield* withStores(watchOf)
      return HttpServerResponse.unsafeJson({ watch }, { headers: SECURITY_HEADERS })
    }
    if (rawPath === "/") {
      const hw = yield* withStores(Data.highWaters)
      const total = Object.values(hw).reduce((n, seq) => n + seq, 0)
      const exit = yield* Effect.flatMap(workspaceOf(hwKey(hw)), (slot) => outcome(slot, total <= inline))
      const watch = watchFrom(hw)
      const facts = yield* workspaceFacts
      if (exit !== undefined && Exit.isSuccess(exit)) {
        const states = new Map<string, ConsoleRunState>(
          exit.value.runs.map((run) => [run.runId, stateOf(run.runId, plannedOfInspection(run), run.dispatch, facts)])
        )
        return page(Pages.workspacePage(exit.value, states, commands, secrets.csrf, watch))
      }
      // Not verified yet (or verification failed): the runs from indexed reads, never claimed verified.
      const glance = yield* withStores(Data.workspaceGlance)
      const states = new Map<string, ConsoleRunState>(
        glance.runs.map((run) => [run.runId, stateOf(run.runId, plannedOfGlance(run), run.dispatch, facts)])
      )
      return page(Pages.workspaceGlancePage(glance, states, commands, secrets.csrf, watch, failureOf(exit)))
    }
    const run = ROUTES.run.exec(rawPath)
    if (run !== null) {
      const runId = decodeIdSegment(run[1]!)
      if (runId === undefined) return refuse(400, "Bad path", "run id")
      if (!(yield* withStores(Data.runExists(runId)))) return refuse(404, "Not found", "no such run in this workspace")
      const p = Math.min(Number.MAX_SAFE_INTEGER / 1000, Math.max(1, Number.parseInt(url.searchParams.get("page") ?? "1", 10) || 1))
      // Indexed reads first (the high-water, the terminal event, the unsettled calls); the summary (the run read in
      // full, verified and planned) is waited for only when the run is small, else it is read in the background.
      const [glance, events, hw] = yield* withStores(Effect.all([Data.runGlance(runId), Data.eventPage(runId, p), Data.highWaters]))
      const slot = yield* summaryOf(runId, `${glance.highWater.seq}:${glance.highWater.digest}`)
      const exit = yield* outcome(slot, glance.highWater.seq <= inline)
      const watch = watchFrom(hw)
      const facts = yield* workspaceFacts
      const notice = url.searchParams.get("notice")
      const tone = url.searchParams.get("tone")
      const error = url.searchParams.get("error")
      const html = (notice !== null ? `<p class="notice ${tone !== null && TONES.has(tone) ? tone : "attention"}">${Pages.esc(notice)}</p>` : "") +
        (error !== null ? `<p class="notice error">${Pages.esc(error)}</p>` : "")
      const summary = exit !== undefined && Exit.isSuccess(exit) ? exit.value : undefined
      const state = summary !== undefined
        ? stateOf(runId, plannedOfInspection(summary.inspection), glance.dispatch, facts)
        : stateOf(runId, plannedOfGlance(glance), glance.dispatch, facts)
      // The args of each call a form offers to resolve (read by seq), shown beside its edit box, and where its T1
      // recorded it was sent (an MCP server and tool, as `inspect` names it: docs/mcp.md).
      const operations = summary?.inspection.plan?.operations ?? glance.unsettled
      const calls = new Map<string, Pages.ShownCall>()
      for (const op of state.admitted.resolve) {
        const found = operations.find((o) => o.callId === op.callId)
        const call = found !== undefined ? yield* withStores(Data.callArgs(runId, found.callSeq)) : undefined
        const sentTo = found?.dispatchSeq !== undefined ? yield* withStores(Data.sentTo(runId, found.dispatchSeq)) : undefined
        calls.set(op.callId, { ...(call !== undefined ? { args: call.args } : {}), ...(sentTo !== undefined ? { sentTo } : {}) })
      }
      if (summary !== undefined) return page(Pages.runPage(summary, state, calls, commands, events, p, secrets.csrf, watch, html))
      return page(Pages.runGlancePage(glance, state, calls, commands, events, p, secrets.csrf, watch, html, failureOf(exit)))
    }
    const event = ROUTES.event.exec(rawPath)
    if (event !== null) {
      const runId = decodeIdSegment(event[1]!)
      if (runId === undefined) return refuse(400, "Bad path", "run id")
      if (!(yield* withStores(Data.runExists(runId)))) return refuse(404, "Not found", "no such run in this workspace")
      const row = yield* withStores(Data.eventAt(runId, Number(event[2])))
      if (row === undefined) return refuse(404, "Not found", "no such event")
      return page(Pages.eventPage(runId, row, encodeEvent(row.event), secrets.csrf))
    }
    return refuse(404, "Not found", "no such page")
  }).pipe(
    // A typed error of the stores is shown by tag and message (never an event's content); defects likewise.
    Effect.catchAllCause((cause) =>
      Effect.succeed(refuse(500, "The console could not read the workspace", String(cause).split("\n")[0]!.slice(0, 500)))
    )
  )
  return { app, warm }
}

/**
 * Forks a background read of the console in `fibers` (interrupted with their scope).
 *
 * @since 0.1.0
 * @category console
 */
export const forkBackground = (fibers: FiberSet.FiberSet<void, never>) => (effect: Effect.Effect<void>) =>
  FiberSet.run(fibers, effect)

/**
 * A fresh random token.
 *
 * @since 0.1.0
 * @category console
 */
export const freshToken = (): string => randomBytes(24).toString("base64url")

/**
 * The console on the HttpServer in context (a host's own, or `layerNode`'s): serves the app and provides `Console`
 * (its URL with the token). The server must listen on loopback; any other address is refused at build time.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: ConsoleOptions) =>
  Layer.unwrapScoped(Effect.gen(function*() {
    const server = yield* HttpServer.HttpServer
    const address = server.address
    if (address._tag !== "TcpAddress" || address.hostname !== "127.0.0.1") {
      return yield* Effect.dieMessage("the recovery console serves on 127.0.0.1 only")
    }
    const token = options.token ?? freshToken()
    const secrets = { token, session: freshToken(), csrf: freshToken() }
    // The background reads live in the console's scope: closing the layer interrupts them.
    const fibers = yield* FiberSet.make<void, never>()
    const context = yield* Effect.context<FileSystem.FileSystem | WorkspaceLock>()
    const { app, warm } = makeApp(options, secrets, address.port, forkBackground(fibers))
    const info: ConsoleInfo = { url: `http://127.0.0.1:${address.port}/?token=${token}`, token, port: address.port }
    return Layer.mergeAll(HttpServer.serve(app), Layer.succeed(Console, info), Layer.scopedDiscard(options.warm === false ? Effect.void : forkBackground(fibers)(Effect.provide(warm, context))))
  }))

/**
 * The console served by Node on 127.0.0.1 (`port` 0 or absent: a free port).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerNode = (options: ConsoleOptions & { readonly port?: number }) =>
  layer(options).pipe(Layer.provide(NodeHttpServer.layer(() => createServer(), { host: "127.0.0.1", port: options.port ?? 0 })))
