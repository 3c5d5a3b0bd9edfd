// `npm run test:consumer`: proves the package works as published. Packs the tarball, installs it into a fresh project
// in a temp folder (with the peers, effect on another 3.x patch), then runs every check below with plain node; exit 1 on any failure.
import { spawnSync } from "node:child_process"
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

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
  const out = { code: r.status, stdout: r.stdout ?? "", stderr: r.stderr ?? "", ms: Date.now() - t }
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

  // 2. A fresh project: the host program, its test suite, the README's example and the article's example.
  writeFileSync(join(consumer, "package.json"), JSON.stringify({ name: "consumer-host", private: true, type: "module" }, null, 2))
  copyFileSync(join(ROOT, "test", "consumer", "tsconfig.json"), join(consumer, "tsconfig.json"))
  for (const [from, to] of [
    ["test/consumer/host.ts", "host.ts"],
    ["test/consumer/host.test.ts", "host.test.ts"],
    ["test/fixtures/readme-example.ts", "readme-example.ts"],
    ["examples/evaluate-crash-recovery.ts", "evaluate-crash-recovery.ts"]
  ]) copyFileSync(join(ROOT, from), join(consumer, "src", to))

  // 3. Install the tarball by path with every peer at the repo's pinned version (effect at HOST_EFFECT), and the
  // consumer's own tools. Install scripts off: better-sqlite3's native build is copied from the repo's identical version
  // (compiling it again takes ~2 minutes here), or rebuilt when the versions differ.
  const dev = pkg.devDependencies
  const peers = Object.keys(pkg.peerDependencies).map((name) => `${name}@${name === "effect" ? HOST_EFFECT : dev[name]}`)
  const tools = ["typescript", "vitest", "@effect/vitest", "@types/node"].map((name) => `${name}@${dev[name]}`)
  run("npm install (tarball + peers)", "npm", ["install", "--ignore-scripts", "--no-audit", "--no-fund", tarball, ...peers, ...tools], {
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

  // 6. A strict NodeNext type-check and build of the host, its suite and the article's example with skipLibCheck off:
  // every .d.ts they reach, ours and effect's, checks with @types/node alone. The README's example imports
  // @effect/platform-node's root, whose own .d.ts need the DOM lib and @types/ws (Effect's, not ours): it is type-checked
  // in the repository and only transpiled here.
  run("tsc (strict, NodeNext, skipLibCheck false, exactOptionalPropertyTypes, noPropertyAccessFromIndexSignature)", "npx", ["tsc", "-p", "tsconfig.json"], {
    timeout: 300_000
  })
  run("transpile the README example", "node", ["-e",
    `const ts = require("typescript"), fs = require("fs");
     const out = ts.transpileModule(fs.readFileSync("src/readme-example.ts", "utf8"), { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } });
     fs.writeFileSync("build/readme-example.js", out.outputText)`])
  // 7. The compiled programs with plain node.
  const ws = join(work, "ws")
  const ws2 = join(work, "ws2")
  mkdirSync(ws)
  mkdirSync(ws2)
  run("README example (node build/readme-example.js)", "node", ["build/readme-example.js", ws], {
    expect: [["stdout", /^blocked blocked indeterminate\n$/]]
  })
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
  run("npx runtime-resume demo", "npx", ["runtime-resume", "demo"], {
    timeout: 120_000,
    expect: [["stdout", /all four stories ended as expected/]]
  })
  if (existsSync(join(consumer, "node_modules", "tsx"))) failures.push("tsx was installed into the consumer")
} finally {
  if (process.env["RR_CONSUMER_KEEP"] === "1") console.log(`     kept ${work}`)
  else rmSync(work, { recursive: true, force: true })
}

console.log(`consumer proof: ${failures.length === 0 ? "passed" : `FAILED (${failures.join("; ")})`} in ${seconds(Date.now() - started)}`)
process.exitCode = failures.length === 0 ? 0 : 1
