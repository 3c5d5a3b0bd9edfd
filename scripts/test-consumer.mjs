// `npm run test:consumer`: proves the package works as published. Packs the tarball, installs it into a fresh project
// in a temp folder (with the peers, effect on another 3.x patch), then runs every check below with plain node, and
// every code block of README.md as written (scripts/readme-blocks.mjs says how each kind runs); exit 1 on any failure.
import { spawn, spawnSync } from "node:child_process"
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { constants, tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { expectedOutput, isExcerptOf, readmeBlocks, shellCommands } from "./readme-blocks.mjs"

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..")
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"))
// The host runs effect one patch below the version the repo pins: npm must still install one copy.
const HOST_EFFECT = process.env["RR_CONSUMER_EFFECT"] ?? "3.22.3"
const VERSION_WARNING = /Executing an Effect versioned/
const started = Date.now()
const failures = []
const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`

const run = (label, command, args, options = {}) => {
  const t = Date.now()
  const r = spawnSync(command, args, {
    cwd: options.cwd ?? consumer,
    encoding: "utf8",
    timeout: options.timeout ?? 120_000,
    env: { ...process.env, NO_COLOR: "1", ...options.env },
    maxBuffer: 64 * 1024 * 1024
  })
  // A process killed by a signal: the shell's code for it (128 + the signal's number), as `$?` shows it.
  const code = r.status ?? (r.signal ? 128 + (constants.signals[r.signal] ?? 0) : null)
  const out = { code, stdout: r.stdout ?? "", stderr: r.stderr ?? "", ms: Date.now() - t }
  const problems = []
  if (r.error) problems.push(String(r.error))
  if ((options.code ?? 0) !== out.code) problems.push(`exit ${out.code} (expected ${options.code ?? 0})`)
  if (VERSION_WARNING.test(out.stdout + out.stderr)) problems.push("printed an Effect version mismatch warning")
  for (const [stream, pattern] of options.expect ?? []) {
    if (!pattern.test(out[stream])) problems.push(`${stream} does not match ${pattern}`)
  }
  if (options.check) problems.push(...options.check(out))
  if (problems.length > 0) {
    failures.push(label)
    console.log(`FAIL ${label} (${seconds(out.ms)}): ${problems.join("; ")}`)
    console.log(`  stdout: ${out.stdout.trim().slice(-2000)}`)
    console.log(`  stderr: ${out.stderr.trim().slice(-2000)}`)
  } else {
    console.log(`ok   ${label} (${seconds(out.ms)})`)
  }
  return out
}

// `run`, without blocking: for the two type-checks that can share the machine's cores.
const runAsync = (label, command, args) =>
  new Promise((resolve) => {
    const t = Date.now()
    const child = spawn(command, args, { cwd: consumer, env: { ...process.env, NO_COLOR: "1" } })
    let output = ""
    child.stdout.on("data", (chunk) => (output += chunk))
    child.stderr.on("data", (chunk) => (output += chunk))
    child.on("close", (code) => {
      if (code === 0) console.log(`ok   ${label} (${seconds(Date.now() - t)})`)
      else {
        failures.push(label)
        console.log(`FAIL ${label} (${seconds(Date.now() - t)}): exit ${code}\n  ${output.trim().slice(-3000)}`)
      }
      resolve(code)
    })
  })

const work = mkdtempSync(join(tmpdir(), "rr-consumer-"))
const consumer = join(work, "host")
mkdirSync(join(consumer, "src"), { recursive: true })
try {
  // 1. The tarball, as `npm publish` would make it (dist/ is built by `prepare`; build it here if it is missing).
  run("build dist/ if stale", "node", ["scripts/build.mjs", "--if-stale"], { cwd: ROOT, timeout: 300_000 })
  const packed = run("npm pack", "npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", work], { cwd: ROOT })
  const info = JSON.parse(packed.stdout)[0]
  const tarball = join(work, info.filename)
  const outside = info.files.map((f) => f.path).filter((p) => !/^(dist\/|src\/|README\.md$|LICENSE$|package\.json$)/.test(p))
  if (outside.length > 0) failures.push(`the tarball holds ${outside.join(", ")}`)
  console.log(`     tarball: ${(info.size / 1024).toFixed(1)} kB packed, ${(info.unpackedSize / 1024).toFixed(1)} kB unpacked, ${info.entryCount} files`)

  // 2. A fresh project: the host program, its test suite, the article's example; and the README's code blocks.
  writeFileSync(join(consumer, "package.json"), JSON.stringify({ name: "consumer-host", private: true, type: "module" }, null, 2))
  copyFileSync(join(ROOT, "test", "consumer", "tsconfig.json"), join(consumer, "tsconfig.json"))
  for (const [from, to] of [
    ["test/consumer/host.ts", "host.ts"],
    ["test/consumer/host.test.ts", "host.test.ts"],
    ["examples/evaluate-crash-recovery.ts", "evaluate-crash-recovery.ts"]
  ]) copyFileSync(join(ROOT, from), join(consumer, "src", to))
  const blocks = readmeBlocks(readFileSync(join(ROOT, "README.md"), "utf8"))
  const where = (block) => `README.md:${block.line}`
  const check = (label, problem) => {
    if (problem === undefined) return console.log(`ok   ${label}`)
    failures.push(label)
    console.log(`FAIL ${label}: ${problem}`)
  }
  for (const block of blocks.filter((b) => b.marker?.kind === "excerpt")) {
    const found = isExcerptOf(block.code, readFileSync(join(ROOT, block.marker.arg), "utf8"))
    check(`${where(block)}: an excerpt of ${block.marker.arg}`, found === true ? undefined : `not in ${block.marker.arg}: ${found}`)
  }
  for (const block of blocks.filter((b) => b.marker?.kind === "skip")) console.log(`skip ${where(block)} (${block.lang}): ${block.marker.arg}`)
  const unmarked = blocks.filter((b) => b.marker === undefined || b.marker.kind === "repo")
  const unknown = unmarked.filter((b) => !["ts", "sh", "text"].includes(b.lang))
  if (unknown.length > 0) check("README blocks: ts, sh or text", `${unknown.map(where).join(", ")}: a block of another language needs a marker`)
  // The suite of "Testing your host" is test/consumer/host.test.ts, which `npm test` runs in the repository too.
  const suites = unmarked.filter((b) => b.lang === "ts" && b.code.includes(`from "@effect/vitest"`))
  for (const block of suites) {
    check(`${where(block)}: the suite is test/consumer/host.test.ts`, block.code === readFileSync(join(ROOT, "test/consumer/host.test.ts"), "utf8").replace(/^(\/\/[^\n]*\n)+/, "") ? undefined : "they differ (but for the file's header comment)")
  }
  const programs = unmarked.filter((b) => b.lang === "ts" && !suites.includes(b))
  const file = (block) => `block-${block.line}`
  mkdirSync(join(consumer, "readme"))
  for (const block of programs) writeFileSync(join(consumer, "readme", `${file(block)}.ts`), block.code)
  // Strict as the host's tsconfig, plus the DOM lib that @effect/platform-node's root needs with @types/ws (the README's note).
  writeFileSync(join(consumer, "tsconfig.readme.json"), JSON.stringify({
    extends: "./tsconfig.json",
    compilerOptions: { lib: ["ES2022", "DOM"], rootDir: "readme", outDir: "build-readme" },
    files: programs.map((block) => `readme/${file(block)}.ts`)
  }, null, 2))
  const installs = unmarked.filter((b) => b.lang === "sh" && shellCommands(b.code).every((c) => c.command.startsWith("npm install ")))

  // 3. Install the tarball by path with every peer at the repo's pinned version (effect at HOST_EFFECT), and the
  // consumer's own tools. Install scripts off: better-sqlite3's native build is copied from the repo's identical version
  // (compiling it again takes ~2 minutes here), or rebuilt when the versions differ.
  // First the README's first install command, as written but for the tarball's path (install scripts off: see
  // below); then, in one more install, the README's other install commands' packages (effect aside), the optional
  // peers, the consumer's tools, and effect one patch below the repo's (a host on another patch).
  const [first, ...others] = installs.flatMap((block) => shellCommands(block.code).map(({ command }) => ({ block, command })))
  const packagesOf = (command) => command.split(" ").slice(2).map((a) => (a === "runtime-resume" ? tarball : a))
  if (first !== undefined) {
    run(`${where(first.block)}: ${first.command.slice(0, 60)}… (the tarball for runtime-resume)`, "npm", ["install", "--ignore-scripts", "--no-audit", "--no-fund", ...packagesOf(first.command)], {
      timeout: 240_000
    })
  }
  const dev = pkg.devDependencies
  const peers = Object.keys(pkg.peerDependencies).map((name) => `${name}@${name === "effect" ? HOST_EFFECT : dev[name]}`)
  // @types/ws and @types/pg: what a strict type-check of @effect/platform-node's root and of @effect/sql-pg needs
  // (the README's note); ws's types at the version @effect/platform-node asks for.
  const tools = [...["typescript", "vitest", "@effect/vitest", "@types/node", "@types/pg"].map((name) => `${name}@${dev[name]}`), "@types/ws@8.18.2"]
  const readmeRest = others.flatMap(({ command }) => packagesOf(command)).filter((p) => p !== tarball && !p.startsWith("effect@"))
  run(`npm install (${others.map(({ block }) => where(block)).join(", ")} but effect, the peers with effect@${HOST_EFFECT}, the tools)`, "npm", ["install", "--ignore-scripts", "--no-audit", "--no-fund", tarball, ...readmeRest, ...peers, ...tools], {
    timeout: 240_000
  })
  const sqliteVersion = (dir) => JSON.parse(readFileSync(join(dir, "node_modules", "better-sqlite3", "package.json"), "utf8")).version
  const binary = join("node_modules", "better-sqlite3", "build", "Release", "better_sqlite3.node")
  if (existsSync(join(ROOT, binary)) && sqliteVersion(ROOT) === sqliteVersion(consumer)) {
    mkdirSync(dirname(join(consumer, binary)), { recursive: true })
    copyFileSync(join(ROOT, binary), join(consumer, binary))
  } else {
    run("npm rebuild better-sqlite3", "npm", ["rebuild", "better-sqlite3"], { timeout: 300_000 })
  }
  const du = spawnSync("du", ["-sk", join(consumer, "node_modules")], { encoding: "utf8" })
  const count = spawnSync("sh", ["-c", "npm ls --all --parseable 2>/dev/null | sort -u | wc -l"], { cwd: consumer, encoding: "utf8" })
  console.log(`     consumer node_modules: ${(Number(du.stdout.split("\t")[0]) / 1024).toFixed(1)} MB, ${count.stdout.trim()} packages`)

  // 4. One copy of effect (the host's), and npm content with the peer ranges.
  run("npm ls effect: one copy", "npm", ["ls", "effect", "--all", "--json"], {
    check: (r) => {
      const versions = new Set()
      const walk = (node) => {
        for (const [name, child] of Object.entries(node.dependencies ?? {})) {
          if (name === "effect") versions.add(child.version)
          walk(child)
        }
      }
      walk(JSON.parse(r.stdout))
      return versions.size === 1 && versions.has(HOST_EFFECT) ? [] : [`effect versions: ${[...versions].join(", ")}`]
    }
  })

  // 5. Every entry point with plain node: ESM import and CJS require. `./ai`, `./mcp` and `./postgres` load their optional
  // peers (@effect/ai, @effect/sql-pg, installed above with the others); importing them needs no model and no server.
  const entries = ["runtime-resume", "runtime-resume/promise", "runtime-resume/test", "runtime-resume/ai", "runtime-resume/mcp", "runtime-resume/postgres"]
  run("ESM import of ., ./promise, ./test, ./ai, ./mcp, ./postgres", "node", ["--input-type=module", "-e",
    `for (const e of ${JSON.stringify(entries)}) { const m = await import(e); if (Object.keys(m).length === 0) throw new Error(e) }
     const { decide, planResume } = await import("runtime-resume"); if (typeof decide !== "function" || typeof planResume !== "function") throw new Error("exports")
     const { AiHostLayer, AiToolkit } = await import("runtime-resume/ai"); if (typeof AiHostLayer.layer !== "function" || typeof AiToolkit.toTools !== "function") throw new Error("ai exports")
     const { McpToolset } = await import("runtime-resume/mcp"); if (typeof McpToolset.load !== "function") throw new Error("mcp exports")
     const { PgRuntimeEventStore } = await import("runtime-resume/postgres"); if (typeof PgRuntimeEventStore !== "object") throw new Error("postgres exports")`])
  run("CJS require of ., ./promise, ./test, ./ai, ./mcp, ./postgres", "node", ["-e",
    `for (const e of ${JSON.stringify(entries)}) { const m = require(e); if (Object.keys(m).length === 0) throw new Error(e) }
     const { RecoveryResolver } = require("runtime-resume/promise"); if (typeof RecoveryResolver !== "function") throw new Error("exports")
     const { AiHostLayer, AiToolkit } = require("runtime-resume/ai"); if (typeof AiHostLayer.layer !== "function" || typeof AiToolkit.toTools !== "function") throw new Error("ai exports")
     const { McpToolset } = require("runtime-resume/mcp"); if (typeof McpToolset.load !== "function") throw new Error("mcp exports")
     const { PgRuntimeEventStore } = require("runtime-resume/postgres"); if (typeof PgRuntimeEventStore !== "object") throw new Error("postgres exports")`])

  // 5b. The public surface, pinned: every entry's exported names and, for a namespace, its members' names, as plain
  // node sees them (types are not values: the strict type-check below covers those). A change is reviewed on purpose:
  // RR_SURFACE_UPDATE=1 writes the new list to test/consumer/surface.json.
  const surfaceFile = join(ROOT, "test", "consumer", "surface.json")
  const listed = run("the public surface (names per entry)", "node", ["--input-type=module", "-e",
    `const out = {}
     for (const e of ${JSON.stringify([...entries, "runtime-resume/internals"])}) {
       const m = await import(e)
       out[e] = Object.keys(m).filter((k) => k !== "default").sort().map((k) => {
         const v = m[k]
         return v !== null && typeof v === "object" && Object.prototype.toString.call(v) === "[object Module]"
           ? k + " { " + Object.keys(v).filter((n) => n !== "default").sort().join(", ") + " }"
           : k
       })
     }
     process.stdout.write(JSON.stringify(out, null, 2) + "\\n")`])
  if (listed.code === 0) {
    const now = JSON.parse(listed.stdout)
    if (process.env["RR_SURFACE_UPDATE"] === "1") writeFileSync(surfaceFile, JSON.stringify(now, null, 2) + "\n")
    const pinned = existsSync(surfaceFile) ? JSON.parse(readFileSync(surfaceFile, "utf8")) : {}
    for (const entry of new Set([...Object.keys(now), ...Object.keys(pinned)])) {
      // Each listed name with its members (a namespace's), so a change names the members that moved.
      const split = (list) => new Map((list ?? []).map((x) => {
        const m = /^(\S+) \{ (.*) \}$/.exec(x)
        return m === null ? [x, undefined] : [m[1], new Set(m[2].split(", ").filter((n) => n !== ""))]
      }))
      const a = split(pinned[entry])
      const b = split(now[entry])
      const changes = []
      for (const name of new Set([...a.keys(), ...b.keys()])) {
        if (!a.has(name)) changes.push(`+${name}`)
        else if (!b.has(name)) changes.push(`-${name}`)
        else {
          const was = a.get(name) ?? new Set()
          const is = b.get(name) ?? new Set()
          const moved = [...[...is].filter((n) => !was.has(n)).map((n) => `+${n}`), ...[...was].filter((n) => !is.has(n)).map((n) => `-${n}`)]
          if (moved.length > 0 || (a.get(name) === undefined) !== (b.get(name) === undefined)) changes.push(`${name} { ${moved.join(", ")} }`)
        }
      }
      if (changes.length > 0) {
        failures.push(`the public surface of ${entry} changed (${changes.join("; ")}); ` +
          "review it, then RR_SURFACE_UPDATE=1 npm run test:consumer writes test/consumer/surface.json")
      }
    }
  }

  // 6. A strict NodeNext type-check and build of the host, its suite and the article's example with skipLibCheck off:
  // every .d.ts they reach, ours and effect's, checks with @types/node alone. And the README's programs, as strict,
  // plus the DOM lib that @effect/platform-node's root needs for Effect's own .d.ts (the README's note). Both at once.
  await Promise.all([
    runAsync("tsc (strict, NodeNext, skipLibCheck false, exactOptionalPropertyTypes, noPropertyAccessFromIndexSignature)", "npx", ["tsc", "-p", "tsconfig.json"]),
    runAsync(`tsc -p tsconfig.readme.json: the README's ${programs.length} programs (as strict, lib DOM, @types/ws)`, "npx", ["tsc", "-p", "tsconfig.readme.json"])
  ])
  // 7. The README's blocks in order, in the host project: programs twice with plain node (re-runnable on the same
  // workspace), shell commands with their exit codes (`/tmp/` becomes a folder of this run).
  const tmp = join(work, "tmp")
  mkdirSync(tmp)
  for (const block of unmarked) {
    if (programs.includes(block)) {
      for (const time of ["first", "second"]) {
        run(`${where(block)}: node ${file(block)}.js (${time} run)`, "node", [`build-readme/${file(block)}.js`], {
          check: (r) => expectedOutput(block.code).filter((line) => !r.stdout.split("\n").includes(line)).map((line) => `no line "${line}" on stdout`)
        })
      }
    } else if (block.lang === "sh" && !installs.includes(block)) {
      for (const { code, command } of shellCommands(block.code)) {
        run(`${where(block)}: ${command.slice(0, 90)}`, "sh", ["-c", command.replaceAll("/tmp/", `${tmp}/`)], {
          code,
          cwd: block.marker?.kind === "repo" ? ROOT : consumer,
          timeout: 180_000
        })
      }
    }
  }
  const ws = join(consumer, "ws") // the ten-line example's workspace: run-1 blocked
  const ws2 = join(work, "ws2")
  mkdirSync(ws2)
  run("article example on a blocked workspace (exit 1)", "node", ["build/evaluate-crash-recovery.js", ws], {
    code: 1,
    expect: [["stderr", /^⚠️ Crash recovery: manual intervention required\n$/]]
  })
  run("article example on a missing workspace: one line, exit 2", "node", ["build/evaluate-crash-recovery.js", join(work, "none")], {
    code: 2,
    expect: [["stderr", /^❌ Recovery failed: WorkspaceNotFound: [^\n]*\n$/]]
  })
  run("host program (layers, HostStartup, append, plan)", "node", ["build/host.js", ws2], {
    expect: [["stdout", /^startup repair Ran; plan blocked blocked\n$/]]
  })

  // 8. The host's crash suite, written with runtime-resume/test only.
  run("vitest: the host's crash suite (runtime-resume/test)", "npx", ["vitest", "run", "--dir", "src"], {
    expect: [["stdout", /2 passed/]]
  })

  // 9. The CLI, as npx finds it (the compiled dist, no tsx).
  run("npx runtime-resume --help", "npx", ["runtime-resume", "--help"], {
    expect: [["stdout", /demo/], ["stdout", /inspect/]],
    check: (r) => (/\u001b\[/.test(r.stdout) ? ["ANSI codes on a pipe"] : [])
  })
  if (existsSync(join(consumer, "node_modules", "tsx"))) failures.push("tsx was installed into the consumer")
} finally {
  if (process.env["RR_CONSUMER_KEEP"] === "1") console.log(`     kept ${work}`)
  else rmSync(work, { recursive: true, force: true })
}

console.log(`consumer proof: ${failures.length === 0 ? "passed" : `FAILED (${failures.join("; ")})`} in ${seconds(Date.now() - started)}`)
process.exitCode = failures.length === 0 ? 0 : 1
