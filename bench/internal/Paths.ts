// Where the benchmarks work: the project root and its git-ignored `.bench-work/` folder, emptied at the start
// of each `npm run bench` (but for its `fixtures/`) and shared by the phases of one run.
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { FORMAT_VERSION } from "../../src/Layers/internal/sqliteConnection.js"

/** The project root (the folder holding package.json). */
export const ROOT = fileURLToPath(new URL("../../", import.meta.url))

/** The benchmarks' scratch folder, git-ignored. */
export const WORK = `${ROOT}.bench-work`

/** The lock one `npm run bench` holds on the scratch folder, so a second run cannot empty it under the first. */
export const RUN_LOCK_NAME = "bench.lock"

/** Where the JSON results of the latest run go. */
export const RESULTS = `${WORK}/results/latest.json`

/** The workspace of the persistent ledger of a store, shared by the append and reopen benchmarks. */
export const storeWorkspace = (store: "sqlite" | "jsonl"): string => `${WORK}/${store}`

/**
 * Generated ledgers kept between runs (`npm run bench` empties the rest of `WORK`): each in a folder named by what
 * made it, so a changed generator or store format names a new folder and the stale one is removed. Delete this
 * folder to force a rebuild.
 */
export const FIXTURES = `${WORK}/fixtures`

// What a realistic SQLite ledger is made of: the generator's and the filler's source (the seed is in the generator)
// and the SQLite store's format version. A change to any names a new fixture.
const realisticKey = (events: number): string => {
  const hash = createHash("sha256")
  for (const file of ["bench/internal/Realistic.ts", "bench/internal/Ledger.ts"]) hash.update(readFileSync(`${ROOT}${file}`))
  hash.update(`format ${FORMAT_VERSION} events ${events}`)
  return hash.digest("hex").slice(0, 16)
}

/** The prefix of every realistic fixture of `events` events, whatever its key (to find stale ones). */
export const realisticPrefix = (events: number): string => `realistic-sqlite-${events}-`

/**
 * The workspace of the realistic run of `events` events (SQLite), filled by the reopen benchmark on first use and
 * kept in `FIXTURES` while its generator and the store format stay the same.
 */
export const realisticWorkspace = (events: number): string => `${FIXTURES}/${realisticPrefix(events)}${realisticKey(events)}`
