// The generated file-hostility suite of docs/reliability.md, File hygiene: every workspace file name the project knows × a link inside, a link
// outside, a folder, a FIFO, an unreadable file × every CLI verb: a typed answer in time, nothing changed outside.
import { assert, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as NodePath from "node:path"
import { fileURLToPath } from "node:url"
import {
  HOSTILE_KINDS,
  type HostilityCase,
  type HostilityInput,
  type HostilityResult,
  treeDigest
} from "../harness/HostilityChild.js"
import { FILE_NAME as RUN_HEADERS_FILE } from "../src/Layers/JsonlRunHeaderStore.js"
import { APPEND_LOCK_FILE_NAME, FILE_NAME as JSONL_FILE, LOCK_FILE_NAME, QUARANTINE_LOG_NAME } from "../src/Layers/JsonlRuntimeEventStore.js"
import { quarantineFileName } from "../src/Layers/internal/jsonlFiles.js"
import { FILE_NAME as SQLITE_FILE } from "../src/Layers/SqliteRuntimeEventStore.js"
import { MARKER_FILE_NAME } from "../src/Services/WorkspaceIdentity.js"
import { holderFilePath } from "../src/Services/WorkspaceLock.js"
import { OWNER_LOCK_FILE_NAME } from "../src/Services/WorkspaceOwner.js"

const CHILD = fileURLToPath(new URL("../harness/HostilityChild.ts", import.meta.url))
const ROOT = fileURLToPath(new URL("..", import.meta.url))
const FIXTURE = fileURLToPath(new URL("./fixtures/prefixes/after_function_call.jsonl", import.meta.url))
// A case that has not answered after this long is a hang: its child is killed and the case fails.
const CASE_LIMIT_MS = 20_000
// A child's start (tsx, the templates) is not a case: on a loaded machine it may take far longer than one case.
const START_LIMIT_MS = 180_000

// Every file the project creates or opens inside a workspace, from the code's own constants. SQLite's own side files
// (-wal, -shm, -journal) and the lock databases' rollback journals are included: SQLite opens them by name.
const COMMON = [OWNER_LOCK_FILE_NAME, holderFilePath(OWNER_LOCK_FILE_NAME), `${OWNER_LOCK_FILE_NAME}-journal`, MARKER_FILE_NAME]
const NAMES = {
  sqlite: [SQLITE_FILE, `${SQLITE_FILE}-wal`, `${SQLITE_FILE}-shm`, `${SQLITE_FILE}-journal`, ...COMMON],
  jsonl: [
    JSONL_FILE,
    LOCK_FILE_NAME,
    holderFilePath(LOCK_FILE_NAME),
    `${LOCK_FILE_NAME}-journal`,
    APPEND_LOCK_FILE_NAME,
    `${APPEND_LOCK_FILE_NAME}-journal`,
    RUN_HEADERS_FILE,
    QUARANTINE_LOG_NAME,
    quarantineFileName(1),
    ...COMMON
  ]
} as const

// Every verb, read and write; WS, OUT and FIXTURE are filled in by the child.
const VERBS: ReadonlyArray<ReadonlyArray<string>> = [
  ["verify", "--json", "WS"],
  ["inspect", "--json", "WS"],
  ["export", "WS", "OUT"],
  ["import", "--json", "WS", "FIXTURE"],
  ["repair", "--json", "WS"],
  ["repair", "--quarantine-torn-tail", "--json", "WS"],
  ["resume", "--plan", "--json", "WS"]
]

// HOSTILE_FILTER=<regex> runs only the matching case ids (to check a few cells quickly, for example on older code).
const FILTER = process.env["HOSTILE_FILTER"] !== undefined ? new RegExp(process.env["HOSTILE_FILTER"]) : undefined

const root = fs.mkdtempSync(NodePath.join(os.tmpdir(), "rr-hostile-"))
const decoy = NodePath.join(root, "decoy")
const cases: Array<HostilityCase> = []
const idOf = (store: string, name: string, kind: string, args: ReadonlyArray<string>, torn: boolean) =>
  `${store}.${name}.${kind}.${args[0]}${args.includes("--quarantine-torn-tail") ? "-quarantine" : ""}${
    args.includes("--plan") ? "-plan" : ""
  }${torn ? "-torn" : ""}`
for (const store of ["sqlite", "jsonl"] as const) {
  // The workspace itself a link to a real workspace: refused, and nothing created or changed behind the link.
  for (const args of VERBS) {
    const id = idOf(store, "(workspace)", "workspace-link", args, false)
    if (FILTER === undefined || FILTER.test(id)) {
      cases.push({ id, template: NodePath.join(root, `template-${store}`), name: "", kind: "workspace-link", args })
    }
  }
  for (const name of NAMES[store]) {
    for (const kind of HOSTILE_KINDS) {
      // On JSONL, quarantine always has a torn tail to move, and verify runs once more over a torn tail (a reader
      // then probes the writer lock).
      const variants: ReadonlyArray<readonly [ReadonlyArray<string>, boolean]> = [
        ...VERBS.map((args) => [args, store === "jsonl" && args.includes("--quarantine-torn-tail")] as const),
        ...(store === "jsonl" ? [[["verify", "--json", "WS"], true] as const] : [])
      ]
      for (const [args, torn] of variants) {
        const id = idOf(store, name, kind, args, torn && !args.includes("--quarantine-torn-tail"))
        if (FILTER !== undefined && !FILTER.test(id)) continue
        cases.push({ id, template: NodePath.join(root, `template-${store}`), name, kind, args, ...(torn ? { tornTail: true } : {}) })
      }
    }
  }
}

// Runs the cases in children (one per store, in parallel), a watchdog on each: a case with no answer within the
// limit is recorded as hung, its child killed, and a new child goes on with the cases after it.
const runAll = async (): Promise<Map<string, HostilityResult | "hung">> => {
  const results = new Map<string, HostilityResult | "hung">()
  // One child per store at a time, each building only its own store's template (two children building one template
  // would race on its lock).
  const runChunk = async (store: "sqlite" | "jsonl", n: number): Promise<void> => {
    let remaining = cases.filter((c) => c.id.startsWith(`${store}.`))
    while (remaining.length > 0) {
      const input: HostilityInput = {
        templates: [{ dir: NodePath.join(root, `template-${store}`), store }],
        root,
        decoy,
        fixture: FIXTURE,
        cases: remaining
      }
      const file = NodePath.join(root, `cases-${n}.json`)
      fs.writeFileSync(file, JSON.stringify(input))
      const hung = await new Promise<string | undefined>((resolve) => {
        const child = spawn(process.execPath, ["--import", "tsx", CHILD, file], { cwd: ROOT, stdio: ["ignore", "pipe", "ignore"] })
        let current: string | undefined
        let buffer = ""
        let timer: NodeJS.Timeout | undefined
        const arm = (limit = CASE_LIMIT_MS) => {
          if (timer !== undefined) clearTimeout(timer)
          timer = setTimeout(() => {
            child.kill("SIGKILL")
          }, limit)
        }
        arm(START_LIMIT_MS)
        child.stdout.on("data", (data: Buffer) => {
          buffer += data.toString("utf8")
          let at: number
          while ((at = buffer.indexOf("\n")) >= 0) {
            const line = buffer.slice(0, at)
            buffer = buffer.slice(at + 1)
            const value = JSON.parse(line) as { start?: string } & Partial<HostilityResult>
            if (value.start !== undefined) current = value.start
            else if (value.done !== undefined) {
              results.set(value.done, value as HostilityResult)
              current = undefined
            }
            arm()
          }
        })
        child.on("exit", () => {
          if (timer !== undefined) clearTimeout(timer)
          resolve(current)
        })
      })
      if (hung !== undefined) results.set(hung, "hung")
      remaining = remaining.filter((c) => !results.has(c.id))
      // A child that died between cases without a hang (a crash) would loop for ever: record what is left as failed.
      if (hung === undefined && remaining.length > 0) {
        for (const c of remaining) results.set(c.id, "hung")
        remaining = []
      }
    }
  }
  await Promise.all([runChunk("sqlite", 0), runChunk("jsonl", 1)])
  return results
}

let results: Map<string, HostilityResult | "hung">
let decoyDigest: string

describe("workspace file hostility (generated)", () => {
  it("builds the cases and runs them all in child processes", { timeout: 600_000 }, async () => {
    fs.mkdirSync(NodePath.join(decoy, "folder"), { recursive: true })
    fs.writeFileSync(NodePath.join(decoy, "victim"), "victim: must never change\n")
    fs.writeFileSync(NodePath.join(decoy, "folder", "other"), "other\n")
    decoyDigest = treeDigest(decoy)
    results = await runAll()
    assert.strictEqual(results.size, cases.length)
    assert.strictEqual(treeDigest(decoy), decoyDigest, "the decoy tree outside the workspaces changed")
  })

  for (const c of cases) {
    it(`${c.id}: a typed answer within ${CASE_LIMIT_MS / 1000} s, nothing outside changed`, () => {
      const r = results?.get(c.id)
      assert.isDefined(r, "the case did not run")
      if (r === undefined) return
      assert.notStrictEqual(r, "hung", `${c.id} did not answer within ${CASE_LIMIT_MS} ms`)
      if (r === "hung") return
      const where = `${c.id} -> ${r.code}\n${r.stdout}`
      assert.include([0, 1, 2], r.code, where)
      assert.notInclude(r.stdout, "\"Defect\"", where)
      assert.isFalse(r.outsideChanged, `something outside the workspace changed: ${where}`)
      if (c.kind === "workspace-link") {
        assert.strictEqual(r.code, 2, `a workspace that is a link was not refused: ${where}`)
        assert.isFalse(r.targetChanged, `something was created or changed behind the workspace link: ${where}`)
      }
      if (c.args.includes("--json")) {
        // One JSON document; a failure names its typed error (at the top, or in the run it concerns).
        JSON.parse(r.stdout)
        if (r.code === 2) assert.match(r.stdout, /"_tag": "[A-Za-z]+"/, where)
      }
    })
  }

  it("cleans up", () => {
    fs.rmSync(root, { recursive: true, force: true })
  })
})
