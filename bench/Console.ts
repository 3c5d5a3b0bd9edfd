// The recovery console's cold page loads (docs/spec/06-cli.md, "The recovery console"): a fresh `runtime-resume console` process over a generated run of
// 100k (and, without --quick, 1M) events (the built bin, dist/esm/bin/cli.js, by plain node), the token exchanged for
// the session cookie, then one HTTP GET with the cookie, timed from request to last byte. Cases:
// the run page, and page N of its events. Baseline: the same fresh process answering its stylesheet after the same
// token exchange (the floor of any request in a just-opened console). Each figure is the median of 3 fresh processes. Fixtures are written once into
// `.bench-cache/console-N` (outside the scratch folder: 1M events take minutes to write) and reused.
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { spawn, spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { join } from "node:path"
import { BenchFailed } from "./internal/Child.js"
import type { BenchOptions } from "./internal/Options.js"
import { ROOT } from "./internal/Paths.js"
import type { BenchResult, ReportRow } from "./internal/Report.js"
import { row } from "./internal/Report.js"
import { median } from "./internal/Stats.js"

const CACHE = join(ROOT, ".bench-cache")
const ROUNDS = 3

const fixture = (events: number) =>
  Effect.gen(function*() {
    const dir = join(CACHE, `console-${events}`)
    if (existsSync(join(dir, "runtime.sqlite"))) return dir
    const r = yield* Effect.sync(() =>
      spawnSync(process.execPath, ["--import", "tsx", "bench/ConsoleFixture.ts", String(events), dir], { cwd: ROOT, stdio: "ignore" })
    )
    if (r.status !== 0) return yield* new BenchFailed({ message: `writing the ${events}-event console fixture failed (exit ${r.status})` })
    return dir
  })

// Starts a fresh console over `workspace` (its own process group), exchanges its token for the session cookie, GETs
// `path` with the cookie once (timed), stops it.
const coldGet = (workspace: string, path: string) =>
  Effect.async<number, BenchFailed>((resume) => {
    const child = spawn(process.execPath, ["dist/esm/bin/cli.js", "console", workspace], {
      cwd: ROOT,
      detached: true,
      stdio: ["ignore", "pipe", "ignore"]
    })
    let out = ""
    let done = false
    const finish = (result: Effect.Effect<number, BenchFailed>) => {
      if (done) return
      done = true
      try {
        process.kill(-child.pid!, "SIGKILL")
      } catch {
        // already gone
      }
      resume(result)
    }
    child.on("exit", () => finish(Effect.fail(new BenchFailed({ message: "the console exited before answering" }))))
    child.stdout!.on("data", async (chunk: Buffer) => {
      out += chunk.toString("utf8")
      const match = /^(http:\/\/127\.0\.0\.1:(\d+))\/\?token=(\S+)$/m.exec(out)
      if (match === null || done) return
      out = ""
      const [, base, port, token] = match
      try {
        // The URL's token is exchanged once for the session cookie (a redirect, as a browser's first visit), then the
        // page is asked with the cookie: the timed request.
        const exchange = await fetch(`${base}/?token=${token}`, { redirect: "manual" })
        const session = /rr_console_\d+=([^;]+)/.exec(exchange.headers.get("set-cookie") ?? "")?.[1]
        if (session === undefined) return finish(Effect.fail(new BenchFailed({ message: `token exchange: ${exchange.status}, no session cookie` })))
        const t0 = performance.now()
        const res = await fetch(`${base}${path}`, { headers: { cookie: `rr_console_${port}=${session}` } })
        const body = await res.text()
        const ms = performance.now() - t0
        finish(res.status === 200 && body.length > 0 ? Effect.succeed(ms) : Effect.fail(new BenchFailed({ message: `GET ${path}: ${res.status}` })))
      } catch (e) {
        finish(Effect.fail(new BenchFailed({ message: `GET ${path}: ${String(e)}` })))
      }
    })
  })

const medianOf = (workspace: string, path: string) =>
  Effect.gen(function*() {
    const times: Array<number> = []
    for (let i = 0; i < ROUNDS; i++) times.push(yield* coldGet(workspace, path))
    return { median: median(times), times }
  })

/** Runs the console benchmark: cold run page and cold page N of the events, at 100k (and 1M) events. */
export const run = (options: BenchOptions): Effect.Effect<BenchResult, BenchFailed> =>
  Effect.gen(function*() {
    const t0 = yield* Clock.currentTimeNanos
    const sizes = options.quick ? [100_000] : [100_000, 1_000_000]
    const rows: Array<ReportRow> = []
    const details: Record<string, unknown> = {}
    for (const events of sizes) {
      const workspace = yield* fixture(events)
      const floor = yield* medianOf(workspace, "/assets/console.css")
      const lastPage = Math.ceil(events / 100)
      const cases = [
        ["run page", "/run/run-large"],
        [`events page ${lastPage}`, `/run/run-large?page=${lastPage}`]
      ] as const
      for (const [name, path] of cases) {
        const ours = yield* medianOf(workspace, path)
        details[`${events} ${name}`] = { ours: ours.times, floor: floor.times }
        rows.push(row({
          bench: "console",
          case: `${events.toLocaleString("en")} events: ${name}, cold`,
          metric: "GET to last byte, fresh process, median of 3",
          unit: "ms",
          ours: ours.median,
          baseline: floor.median,
          target: "< 2000 ms",
          note: "baseline: the same fresh console answering its stylesheet"
        }))
      }
    }
    const wallMs = Number((yield* Clock.currentTimeNanos) - t0) / 1e6
    return { name: "console", wallMs, rows, details }
  })
