// `npm run build` (and `prepare`): compiles src/ (with harness/ and bin/ for the CLI) into dist/esm, dist/cjs
// and dist/dts with plain tsc, one tsconfig.build.*.json per format, and marks dist/cjs as CommonJS. Then bundles the
// CLI's body (dist/esm/bin/main.js) with esbuild into dist/esm/bin/bundle/, which bin/cli.ts starts when it exists.
import { spawn } from "node:child_process"
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
if (!existsSync(join(root, "tsconfig.build.esm.json"))) {
  // An installed copy (the tarball ships dist/, not the build configs): nothing to build.
  process.exit(0)
}
let tsc
try {
  tsc = createRequire(join(root, "package.json")).resolve("typescript/bin/tsc")
} catch {
  // Installed as a dependency (no devDependencies): the tarball already holds dist/.
  console.error("runtime-resume build: typescript is not installed; skipping (dist/ ships prebuilt)")
  process.exit(0)
}

// `--if-stale`: build only when a source is newer than the last build (dist/esm/package.json is written last).
const SOURCES = ["src", "harness", "bin", "tsconfig.json", "tsconfig.build.esm.json", "tsconfig.build.cjs.json",
  "tsconfig.build.dts.json", "scripts/build.mjs"]
const newest = (path) => {
  if (!existsSync(path)) return 0
  const info = statSync(path)
  if (!info.isDirectory()) return info.mtimeMs
  return readdirSync(path).reduce((max, name) => Math.max(max, newest(join(path, name))), info.mtimeMs)
}
const stamp = join(root, "dist", "esm", "package.json")
if (process.argv.includes("--if-stale") && existsSync(stamp)) {
  const sources = SOURCES.reduce((max, rel) => Math.max(max, newest(join(root, rel))), 0)
  if (statSync(stamp).mtimeMs >= sources) process.exit(0)
}

const compile = (config) =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [tsc, "-p", join(root, config)], { cwd: root, stdio: "inherit" })
    child.on("error", reject)
    child.on("exit", (code, signal) =>
      code === 0 ? resolve() : reject(new Error(`tsc -p ${config} failed (${signal ?? `exit ${code}`})`))
    )
  })

rmSync(join(root, "dist"), { recursive: true, force: true })
try {
  await Promise.all(["tsconfig.build.esm.json", "tsconfig.build.cjs.json", "tsconfig.build.dts.json"].map(compile))
} catch (error) {
  console.error(`runtime-resume build: ${error.message}`)
  process.exit(1)
}

// The CLI as one bundle (split at the verbs' dynamic imports, so a verb still loads only its own code): Node then
// loads a few files instead of ~700 modules (effect's, @effect/cli's, fast-check's, ours), which took most of a
// verb's start. Left out: native and CommonJS packages loaded at run time (better-sqlite3, pg, undici, ws), and the
// harness, whose modules find their children's files next to themselves (bin/cli.ts never runs those verbs from
// the bundle). Without esbuild (a devDependency, so a dev install and `npm pack` have it) the CLI runs from the modules.
const bundleCli = async () => {
  let esbuild
  try {
    esbuild = await import(pathToFileURL(createRequire(join(root, "package.json")).resolve("esbuild")).href)
  } catch {
    console.error("runtime-resume build: esbuild is not installed; the CLI runs from its modules (no bundle)")
    return
  }
  const outdir = join(root, "dist/esm/bin/bundle")
  const harness = join(root, "dist/esm/harness")
  // The harness's modules stay modules, found from the bundle's folder (only its own verbs load them, never bundled).
  const harnessStaysAModule = {
    name: "harness-stays-a-module",
    setup(build) {
      build.onResolve({ filter: /harness\// }, (args) => {
        const path = resolve(args.resolveDir, args.path)
        return path.startsWith(harness) ? { path: relative(outdir, path), external: true } : undefined
      })
    }
  }
  const external = ["better-sqlite3", "pg", "pg-cursor", "pg-native", "undici", "ws"]
  // The same body as one CommonJS file, which bin/cli.ts runs through V8's code cache (bin/codeCache.ts): Node 20 has
  // no code cache for ES modules. Its dynamic imports of our own modules become lazy `require`s, so a verb still runs
  // only its own modules' top level.
  await esbuild.build({
    entryPoints: [join(root, "dist/esm/bin/main.js")],
    bundle: true,
    format: "cjs",
    platform: "node",
    target: "node20",
    outfile: join(outdir, "main.cjs"),
    logLevel: "warning",
    external,
    // `import.meta.url` is the bundle file's URL, as in the ES module chunks.
    define: { "import.meta.url": "__rrImportMetaUrl" },
    banner: { js: "const __rrImportMetaUrl = require('node:url').pathToFileURL(__filename).href;" },
    plugins: [harnessStaysAModule]
  })
  await esbuild.build({
    entryPoints: [join(root, "dist/esm/bin/main.js")],
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20",
    outdir,
    chunkNames: "chunk-[hash]",
    logLevel: "warning",
    external,
    // The CommonJS packages bundled in (yaml, toml, ini) call `require` for Node's own modules.
    banner: {
      js: "import { createRequire as __rrCreateRequire } from 'node:module'; const require = __rrCreateRequire(import.meta.url);"
    },
    plugins: [harnessStaysAModule]
  })
}
try {
  await bundleCli()
} catch (error) {
  console.error(`runtime-resume build: bundling the CLI failed: ${error.message}`)
  process.exit(1)
}

mkdirSync(join(root, "dist/cjs"), { recursive: true })
writeFileSync(join(root, "dist/cjs/package.json"), JSON.stringify({ type: "commonjs" }, null, 2) + "\n")
writeFileSync(join(root, "dist/esm/package.json"), JSON.stringify({ type: "module" }, null, 2) + "\n")
console.error("runtime-resume build: dist/esm, dist/cjs and dist/dts written")
