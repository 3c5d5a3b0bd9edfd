// Vitest global setup: the CLI tests spawn bin/runtime-resume, which runs the compiled dist/. Rebuild it first when
// any source it is compiled from is newer than the last build (after `npm ci` the `prepare` build is already fresh).
import { spawnSync } from "node:child_process"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const ROOT = fileURLToPath(new URL("../..", import.meta.url))

/** Builds dist/ unless it is newer than src/, harness/, bin/cli.ts and the build configs (`build.mjs --if-stale`). */
export default function setup(): void {
  const result = spawnSync(process.execPath, [join(ROOT, "scripts", "build.mjs"), "--if-stale"], { cwd: ROOT, stdio: "inherit" })
  if (result.status !== 0) throw new Error("npm run build failed: the CLI tests need dist/")
}
