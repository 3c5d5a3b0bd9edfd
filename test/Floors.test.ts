// Floors that only point down (docs/architecture.md, Floors): reads the relative imports of every module of src/ and fails when
// a lower floor imports a higher one, or when production code imports the test-only modules of src/Testing/.
import { assert, describe, it } from "@effect/vitest"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { fileURLToPath } from "node:url"

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const SRC = NodePath.join(ROOT, "src")

/** Lowest first; a module may import its own floor or a lower one. `Entry` is src/*.ts (the package's entry points). */
const RANK: Record<string, number> = {
  Domain: 0,
  Services: 1,
  Layers: 2,
  Programs: 3,
  Workspace: 4,
  // The @effect/ai adapter (runtime-resume/ai): the durable turn, the toolkit, the prompt and the host, on the
  // workspace's floor (it opens the stores the workspace opens).
  Ai: 4,
  // The MCP adapter (runtime-resume/mcp): tools over an MCP client, beside the @effect/ai adapter's floor.
  Mcp: 4,
  Cli: 5,
  // The recovery console (a verb's server, and a layer a host mounts): the CLI's floor.
  Console: 5,
  Entry: 6,
  Testing: 7
}

/** Imports of src/Testing/ from production code that are deliberate, with the reason. */
const TESTING_EXCEPTIONS: Record<string, string> = {
  "src/Ai.ts -> src/Testing/ScriptedLanguageModel.ts": "runtime-resume/ai exports the scripted LanguageModel",
  "src/Cli/Resume.ts -> src/Testing/ScriptedModelProvider.ts": "`resume --scripted-reply`, for tests and the demo"
}

const walk = (dir: string): Array<string> =>
  NodeFs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = NodePath.join(dir, entry.name)
    if (entry.isDirectory()) return walk(full)
    return /\.(ts|mts)$/.test(entry.name) && !entry.name.endsWith(".d.ts") ? [full] : []
  })

const rel = (file: string) => NodePath.relative(ROOT, file).split(NodePath.sep).join("/")

/** The floor of a repo path under src/. */
export const floorOf = (path: string): string => {
  const parts = path.split("/")
  if (parts.length === 2) return parts[1] === "Testing.ts" ? "Testing" : "Entry"
  return parts[1]!
}

// Static imports, re-exports, `import("…")` and `import type`: every relative module specifier.
const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)["'](\.{1,2}\/[^"']+)["']/g

const importsOf = (file: string): Array<string> => {
  const text = NodeFs.readFileSync(file, "utf8")
  const out: Array<string> = []
  for (const match of text.matchAll(SPECIFIER)) {
    const target = NodePath.resolve(NodePath.dirname(file), match[1]!.replace(/\.js$/, ".ts").replace(/\.mjs$/, ".mts"))
    out.push(rel(target))
  }
  return out
}

/** Every import of src/ that points up a floor, or into src/Testing/ from production code. */
export const violations = (): Array<string> => {
  const problems: Array<string> = []
  for (const file of walk(SRC)) {
    const from = rel(file)
    const a = floorOf(from)
    if (RANK[a] === undefined) problems.push(`${from}: unknown floor ${a} (add it to RANK in test/Floors.test.ts)`)
    for (const to of importsOf(file)) {
      if (!to.startsWith("src/")) {
        // The CLI runs the crash harness (harness/, compiled with src); nothing below it reaches outside src/.
        if ((RANK[a] ?? -1) < RANK.Cli!) problems.push(`${from} imports ${to}, outside src/`)
        continue
      }
      const b = floorOf(to)
      if (b === "Testing" && a !== "Testing") {
        if (TESTING_EXCEPTIONS[`${from} -> ${to}`] === undefined) problems.push(`${from} (production) imports ${to}`)
        continue
      }
      if ((RANK[b] ?? 99) > (RANK[a] ?? -1)) problems.push(`${from} (${a}) imports ${to} (${b})`)
      else if (a === "Programs" && b === "Layers") {
        problems.push(`${from} (Programs) imports the concrete layer ${to}: it belongs in src/Workspace`)
      }
    }
  }
  return problems
}

describe("Floors", () => {
  it("no module of src/ imports a higher floor", () => {
    assert.deepStrictEqual(violations(), [])
  })

  it("reads the import graph (the check sees the imports it judges)", () => {
    const layers = walk(NodePath.join(SRC, "Layers")).flatMap(importsOf)
    assert.isTrue(layers.some((to) => to.startsWith("src/Domain/Rules/")), "the stores import the ledger rules")
    assert.strictEqual(floorOf("src/Layers/X.ts"), "Layers")
    assert.strictEqual(floorOf("src/index.ts"), "Entry")
    assert.strictEqual(floorOf("src/Testing.ts"), "Testing")
  })
})
