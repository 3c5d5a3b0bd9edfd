// Where the benchmarks work: the project root and its git-ignored `.bench-work/` folder, emptied at the start
// of each `npm run bench` and shared by the phases of one run.
import { fileURLToPath } from "node:url"

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

/** The workspace of the realistic run of `events` events (SQLite), filled by the reopen benchmark. */
export const realisticWorkspace = (events: number): string => `${WORK}/realistic-sqlite-${events}`
