// Vitest global setup: the CLI tests spawn bin/runtime-resume, which runs the compiled dist/. Rebuild it first when
// any source it is compiled from is newer than the last build (after `npm ci` the `prepare` build is already fresh).
import { spawnSync } from "node:child_process"
import { existsSync, readdirSync, statSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const ROOT = fileURLToPath(new URL("../..", import.meta.url))
// Written last by scripts/build.mjs: its mtime is when the build finished.
const STAMP = join(ROOT, "dist", "esm", "package.json")

const newest = (path: string): number => {
  if (!existsSync(path)) return 0
  const info = statSync(path)
  if (!info.isDirectory()) return info.mtimeMs
  return readdirSync(path).reduce((max, name) => Math.max(max, newest(join(path, name))), info.mtimeMs)
}

/** Builds dist/ unless it is newer than src/, harness/, bin/cli.ts and the build configs. */
export default function setup(): void {
  const sources = ["src", "harness", "bin/cli.ts", "tsconfig.json", "tsconfig.build.esm.json", "tsconfig.build.cjs.json",
    "tsconfig.build.dts.json", "scripts/build.mjs"].reduce((max, rel) => Math.max(max, newest(join(ROOT, rel))), 0)
  if (existsSync(STAMP) && statSync(STAMP).mtimeMs >= sources) return
  const result = spawnSync(process.execPath, [join(ROOT, "scripts", "build.mjs")], { cwd: ROOT, stdio: "inherit" })
  if (result.status !== 0) throw new Error("npm run build failed: the CLI tests need dist/")
}
