// The `runtime-resume/ai` entry point (docs/spec/04-continuation.md, "Hosts"): it resolves by name; nothing reachable from the other entry points
// imports @effect/ai (an optional peer); and the example `examples/effect-ai-agent.ts` runs its crash and recovery.
import { Command } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { existsSync, readFileSync } from "node:fs"
import * as path from "node:path"
import * as Ai from "runtime-resume/ai"

const ROOT = path.resolve(import.meta.dirname, "..")

// Every module reachable from `entry` through relative imports (static `import … from` and `export … from`).
const reachable = (entry: string): Map<string, string> => {
  const seen = new Map<string, string>()
  const visit = (file: string) => {
    if (seen.has(file)) return
    const text = readFileSync(file, "utf8")
    seen.set(file, text)
    for (const match of text.matchAll(/(?:import|export)[^"']*?from\s+["']([^"']+)["']/g)) {
      const spec = match[1]!
      if (!spec.startsWith(".")) continue
      const resolved = path.resolve(path.dirname(file), spec.replace(/\.js$/, ".ts"))
      if (existsSync(resolved)) visit(resolved)
    }
  }
  visit(entry)
  return seen
}

describe("runtime-resume/ai", () => {
  it.effect("resolves by name with the durable turn, the host layer and the provider", () =>
    Effect.sync(() => {
      for (const name of ["DurableTurn", "AiToolkit", "AiPrompt", "AiFileWrite", "LanguageModelProvider", "ScriptedLanguageModel", "AiHostLayer", "AiHost"]) {
        assert.isDefined((Ai as Record<string, unknown>)[name], name)
      }
    }))

  it.effect("no module reachable from runtime-resume, /promise or /test imports @effect/ai", () =>
    Effect.sync(() => {
      for (const entry of ["src/index.ts", "src/Promise.ts", "src/Testing.ts"]) {
        const modules = reachable(path.join(ROOT, entry))
        assert.isAbove(modules.size, 10, entry)
        for (const [file, text] of modules) assert.notMatch(text, /from\s+["']@effect\/ai/, `${entry} reaches ${file}`)
      }
      // The check can fail: the ai entry itself does reach @effect/ai.
      assert.isTrue([...reachable(path.join(ROOT, "src/Ai.ts")).values()].some((t) => /from\s+["']@effect\/ai/.test(t)))
    }))

  it.scopedLive("the example runs: a SIGKILL after the write's T2, then a host that continues the turn on boot", () =>
    Effect.gen(function*() {
      const proc = yield* Command.make("node", "--import", "tsx", "examples/effect-ai-agent.ts").pipe(
        Command.workingDirectory(ROOT),
        Command.start
      )
      const [out, err, code] = yield* Effect.all([
        proc.stdout.pipe(Stream.decodeText(), Stream.mkString),
        proc.stderr.pipe(Stream.decodeText(), Stream.mkString),
        proc.exitCode
      ], { concurrency: 3 })
      assert.strictEqual(Number(code), 0, err)
      assert.include(out, "SIGKILLed right after write_file's result was committed")
      assert.include(out, "repair: turn-1 interrupted_run_closed")
      assert.match(out, /continuation of turn-1: continued as claim-.*:run/)
      assert.include(out, `summary.txt: "We ship on Friday.\\n" (written once)`)
    }).pipe(Effect.provide(NodeContext.layer)), 120_000)
})
