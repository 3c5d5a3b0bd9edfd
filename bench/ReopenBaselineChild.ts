// Child of the reopen benchmark (baseline): reads the same run with raw better-sqlite3 in pages of 10k (keyset on
// seq), JSON.parses each row's bytes and checks the SHA-256 chain, then prints wall time, maxRSS and the high-water.
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import Sqlite from "better-sqlite3"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { join } from "node:path"
import * as SqliteRuntimeEventStore from "../src/Layers/SqliteRuntimeEventStore.js"
import { BenchFailed } from "./internal/Child.js"
import { ReopenChildOutput } from "./internal/ChildResults.js"
import { chainNext, genesisBytes, sameDigest } from "./internal/Raw.js"
import { measured } from "./internal/Timing.js"
import { RUN_ID } from "./internal/Workload.js"

/** Rows per page of the baseline's keyset reads. */
const PAGE = 10_000

const [workspace] = process.argv.slice(2)

interface RawRow {
  readonly seq: number
  readonly digest: string
  readonly bytes: Buffer
}

// The whole baseline pass: open, page, parse, chain; fails at the first row that does not verify.
const verify = (path: string): { rows: number; seq: number; digest: string } | string => {
  const db = new Sqlite(path, { readonly: true })
  try {
    const page = db.prepare("SELECT seq, digest, bytes FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?")
    let d = genesisBytes(RUN_ID)
    let last = 0
    let lastDigest = ""
    for (;;) {
      const raws = page.all(RUN_ID, last, PAGE) as Array<RawRow>
      for (const raw of raws) {
        if (raw.seq !== last + 1) return `seq ${raw.seq} follows ${last}`
        JSON.parse(raw.bytes.toString("utf8"))
        d = chainNext(d, raw.seq, raw.bytes)
        if (!sameDigest(d, raw.digest)) return `the chain does not verify at seq ${raw.seq}`
        last = raw.seq
        lastDigest = raw.digest
      }
      if (raws.length < PAGE) break
    }
    return { rows: last, seq: last, digest: lastDigest }
  } finally {
    db.close()
  }
}

const program = Effect.gen(function*() {
  if (workspace === undefined) return yield* new BenchFailed({ message: "usage: ReopenBaselineChild.ts <workspace>" })
  const [result, time] = yield* measured(Effect.sync(() => verify(join(workspace, SqliteRuntimeEventStore.FILE_NAME))))
  if (typeof result === "string") return yield* new BenchFailed({ message: `baseline: ${result}` })
  const maxRssMB = (yield* Effect.sync(() => process.resourceUsage().maxRSS)) / 1024
  yield* Console.log(
    Schema.encodeSync(ReopenChildOutput)({ wallMs: time.wall / 1000, cpuMs: time.cpu / 1000, maxRssMB, ...result })
  )
})

NodeRuntime.runMain(program)
