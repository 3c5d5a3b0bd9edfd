// Runs the CLI's one-file CommonJS bundle (dist/esm/bin/bundle/main.cjs) through V8's code cache: the bytecode of the
// bundle's functions, kept in a file beside it after a first run, so later runs skip most of their compiling.
// The cache is never trusted as found. Its header must name this very bundle (SHA-256 of its source), this Node, V8
// and architecture, and the SHA-256 of the cached bytes; V8 then checks its own version and flags and may still
// refuse it. Anything missing, truncated, corrupt, stale or refused runs the bundle compiled from its source, exactly
// as without a cache, and the caller may write a fresh one (`save`). Writing is best effort: a read-only folder, a
// full disk or a concurrent writer never fails the command (the file is written apart, then renamed into place).
// The cache lives beside the bundle, never in a shared folder: whoever can write it can already write the bundle.
import { createHash, randomBytes } from "node:crypto"
import { accessSync, constants, readFileSync, renameSync, unlinkSync, writeFileSync } from "node:fs"
import Module, { createRequire } from "node:module"
import { dirname } from "node:path"
import * as vm from "node:vm"

/**
 * What became of the code cache when the bundle started: `used` (accepted by the checks and by V8), or why it was
 * not (`missing`, `corrupt`: unreadable, truncated or its bytes do not match their hash; `stale`: made for another
 * bundle, Node, V8 or architecture; `rejected`: V8 refused it).
 */
export type CacheStatus = "used" | "missing" | "corrupt" | "stale" | "rejected"

/** A started bundle: what became of its cache, and `save`, which writes a fresh cache (true when it was written). */
export interface CachedRun {
  readonly status: CacheStatus
  readonly save: () => boolean
}

// "runtime-resume V8 code cache", format 1; then the key (32 bytes), the payload's SHA-256 (32 bytes), the payload.
const MAGIC = Buffer.from("RRV8CC01", "latin1")
const HEADER = MAGIC.length + 32 + 32

const sha256 = (data: string | Uint8Array): Buffer => createHash("sha256").update(data).digest()

// What a cache must have been made for: this bundle's source, this Node, V8 and architecture.
const keyOf = (source: string): Buffer =>
  createHash("sha256").update(sha256(source)).update(
    `\u0000${process.version}\u0000${process.versions.v8}\u0000${process.arch}\u0000${process.platform}`
  ).digest()

// The cache's payload when its header holds for `key`, else why not.
const readCache = (cacheFile: string, key: Buffer): Buffer | "missing" | "corrupt" | "stale" => {
  let data: Buffer
  try {
    data = readFileSync(cacheFile)
  } catch {
    return "missing"
  }
  if (data.length <= HEADER || !data.subarray(0, MAGIC.length).equals(MAGIC)) return "corrupt"
  if (!data.subarray(MAGIC.length, MAGIC.length + 32).equals(key)) return "stale"
  const payload = data.subarray(HEADER)
  return sha256(payload).equals(data.subarray(MAGIC.length + 32, HEADER)) ? payload : "corrupt"
}

/**
 * The cache file of `file` for a verb (`part`: the cache holds what that verb's run compiled, so each verb keeps its
 * own) and this process's Node options (`execArgv` and `NODE_OPTIONS`: V8 refuses a cache made under other flags, so
 * each set of options keeps its own file instead of replacing the other's at every start). A part that is not a
 * plain lowercase word (at most 24 letters or dashes) shares the file of no part.
 */
export const cacheFileOf = (file: string, part = "", options: ReadonlyArray<string> = nodeOptions()): string => {
  const named = /^[a-z][a-z-]{0,23}$/.test(part) ? `.${part}` : ""
  const flagged = options.length === 0
    ? ""
    : `.${createHash("sha256").update(options.join("\u0000")).digest("hex").slice(0, 12)}`
  return `${file}${named}${flagged}.v8cache`
}

const nodeOptions = (): ReadonlyArray<string> => {
  const fromEnv = (process.env["NODE_OPTIONS"] ?? "").trim()
  return fromEnv === "" ? process.execArgv : [...process.execArgv, `NODE_OPTIONS=${fromEnv}`]
}

/**
 * Compiles and runs the CommonJS file `file` (as Node's own loader would: its `require`, `module`, `__filename` and
 * `__dirname`), with the code cache at `cacheFile` when it passes every check. Errors of the bundle itself propagate
 * as they would from `require`; nothing about the cache ever throws.
 */
export const runWithCodeCache = (file: string, cacheFile: string = cacheFileOf(file)): CachedRun => {
  const source = readFileSync(file, "utf8")
  const key = keyOf(source)
  const found = readCache(cacheFile, key)
  const script = new vm.Script(Module.wrap(source), {
    filename: file,
    ...(typeof found === "string" ? {} : { cachedData: found }),
    importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER
  })
  const status: CacheStatus = typeof found === "string" ? found : script.cachedDataRejected === true ? "rejected" : "used"
  const save = (): boolean => {
    let temporary: string | undefined
    try {
      accessSync(dirname(cacheFile), constants.W_OK)
      // After the run, the cache holds every function compiled so far (the verb's own, not only the top level).
      const payload = script.createCachedData()
      temporary = `${cacheFile}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`
      writeFileSync(temporary, Buffer.concat([MAGIC, key, sha256(payload), payload]), { flag: "wx", mode: 0o644 })
      renameSync(temporary, cacheFile)
      return true
    } catch {
      if (temporary !== undefined) {
        try {
          unlinkSync(temporary)
        } catch {
          // Never written, or already gone.
        }
      }
      return false
    }
  }
  const wrapper = script.runInThisContext() as (
    exports: unknown,
    require: NodeJS.Require,
    module: { exports: unknown },
    filename: string,
    dirname: string
  ) => void
  const module = { exports: {} }
  wrapper.call(module.exports, module.exports, createRequire(file), module, file, dirname(file))
  return { status, save }
}
