// `npm run build` (and `prepare`): compiles src/ (with harness/ and bin/cli.ts for the CLI) into dist/esm, dist/cjs
// and dist/dts with plain tsc, one tsconfig.build.*.json per format, and marks dist/cjs as CommonJS.
import { spawn } from "node:child_process"
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

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
const SOURCES = ["src", "harness", "bin/cli.ts", "tsconfig.json", "tsconfig.build.esm.json", "tsconfig.build.cjs.json",
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
mkdirSync(join(root, "dist/cjs"), { recursive: true })
writeFileSync(join(root, "dist/cjs/package.json"), JSON.stringify({ type: "commonjs" }, null, 2) + "\n")
writeFileSync(join(root, "dist/esm/package.json"), JSON.stringify({ type: "module" }, null, 2) + "\n")
console.error("runtime-resume build: dist/esm, dist/cjs and dist/dts written")
