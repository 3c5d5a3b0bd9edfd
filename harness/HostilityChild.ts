// The child of the workspace-file hostility suite: runs many CLI cases in this one process (Main.run, as bin/cli.ts
// does, stdout captured), each on a fresh copy of a template workspace with one hostile thing planted at one file name.
// Usage: node --import tsx harness/HostilityChild.ts <cases.json>. Prints one JSON line before and after each case.
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Terminal from "@effect/platform/Terminal"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as NodePath from "node:path"
import { execFileSync } from "node:child_process"
import * as Main from "../src/Cli/Main.js"
import * as NodeCliPlatform from "../src/Layers/NodeCliPlatform.js"

/** The hostile things planted at a workspace file name. */
export const HOSTILE_KINDS = ["link-inside", "link-outside", "folder", "fifo", "unreadable"] as const
/** One hostile thing, or the workspace itself being a link to a real workspace (name ""). */
export type HostileKind = typeof HOSTILE_KINDS[number] | "workspace-link"

/** One case: a template workspace, a file name in it, what is planted there, and the CLI arguments (WS, OUT, FIXTURE, DECOY are placeholders). */
export interface HostilityCase {
  readonly id: string
  readonly template: string
  readonly name: string
  readonly kind: HostileKind
  readonly args: ReadonlyArray<string>
  /** Append a partial line to the JSONL ledger first (so quarantine has a torn tail to move). */
  readonly tornTail?: boolean
}

/** What the child reports for a case. */
export interface HostilityResult {
  readonly done: string
  readonly code: number
  readonly stdout: string
  /** The listing and hashes of the decoy tree outside the workspace changed. */
  readonly outsideChanged: boolean
  /** For a workspace that is a link: whether the real folder behind it changed. */
  readonly targetChanged?: boolean
}

/** The input of the child: where things are, and the cases. */
export interface HostilityInput {
  /** Template workspaces to build first (an import of the fixture into each). */
  readonly templates: ReadonlyArray<{ readonly dir: string; readonly store: "sqlite" | "jsonl" }>
  readonly root: string
  readonly decoy: string
  readonly fixture: string
  readonly cases: ReadonlyArray<HostilityCase>
}

/** A digest of a folder tree: names, kinds, modes and contents (links by their target, never followed). */
export const treeDigest = (dir: string): string => {
  const hash = createHash("sha256")
  const walk = (path: string, rel: string): void => {
    const s = fs.lstatSync(path)
    hash.update(`${rel}\0${s.mode}\0`)
    if (s.isSymbolicLink()) hash.update(fs.readlinkSync(path))
    else if (s.isDirectory()) for (const name of fs.readdirSync(path).sort()) walk(NodePath.join(path, name), `${rel}/${name}`)
    else if (s.isFile()) hash.update(fs.readFileSync(path))
  }
  walk(dir, ".")
  return hash.digest("hex")
}

/** Plants `kind` at `path` (replacing what is there); `decoy` is the tree outside the workspace. */
export const plant = (path: string, kind: HostileKind, decoy: string, tag: string): void => {
  const original = fs.existsSync(path) && fs.lstatSync(path).isFile() ? fs.readFileSync(path) : undefined
  fs.rmSync(path, { recursive: true, force: true })
  switch (kind) {
    case "link-inside": {
      const target = NodePath.join(NodePath.dirname(path), `inside-target-${tag}`)
      fs.writeFileSync(target, original ?? "inside\n")
      fs.symlinkSync(target, path)
      return
    }
    case "link-outside":
      fs.symlinkSync(NodePath.join(decoy, "victim"), path)
      return
    case "folder":
      fs.mkdirSync(path)
      fs.writeFileSync(NodePath.join(path, "keep"), "keep\n")
      return
    case "fifo":
      execFileSync("mkfifo", [path])
      return
    case "unreadable":
      fs.writeFileSync(path, original ?? "")
      fs.chmodSync(path, 0o000)
      return
  }
}

const say = (value: unknown) => Effect.sync(() => void fs.writeSync(1, `${JSON.stringify(value)}\n`))

const platform = NodeCliPlatform.layer

// A Terminal whose display is captured (the CLI's stdout); nothing is read.
const capturing = (out: Array<string>): Layer.Layer<Terminal.Terminal> =>
  Layer.succeed(Terminal.Terminal, {
    columns: Effect.succeed(120),
    rows: Effect.succeed(40),
    isTTY: Effect.succeed(false),
    readInput: Effect.dieMessage("no input in the hostility child"),
    readLine: Effect.dieMessage("no input in the hostility child"),
    display: (text: string) => Effect.sync(() => void out.push(text))
  } as unknown as Terminal.Terminal)

const runCase = (input: HostilityInput, c: HostilityCase) =>
  Effect.gen(function*() {
    const ws = NodePath.join(input.root, `ws-${c.id}`)
    const out = NodePath.join(input.root, `out-${c.id}.jsonl`)
    const real = `${ws}-real`
    if (c.kind === "workspace-link") {
      fs.cpSync(c.template, real, { recursive: true })
      fs.symlinkSync(real, ws)
    } else {
      fs.cpSync(c.template, ws, { recursive: true })
      if (c.tornTail === true) fs.appendFileSync(NodePath.join(ws, "runtime-events.jsonl"), "{\"partial")
      plant(NodePath.join(ws, c.name), c.kind, input.decoy, c.id)
    }
    const before = treeDigest(input.decoy)
    const targetBefore = c.kind === "workspace-link" ? treeDigest(real) : undefined
    const args = c.args.map((a) => a === "WS" ? ws : a === "OUT" ? out : a === "FIXTURE" ? input.fixture : a)
    const captured: Array<string> = []
    const code = yield* Main.run(["node", "runtime-resume", ...args]).pipe(
      Effect.provide(Layer.merge(platform, capturing(captured)))
    )
    const result: HostilityResult = {
      done: c.id,
      code,
      stdout: captured.join(""),
      outsideChanged: treeDigest(input.decoy) !== before,
      ...(targetBefore !== undefined ? { targetChanged: treeDigest(real) !== targetBefore } : {})
    }
    // Leave nothing that would block a later case (or the parent's cleanup).
    fs.rmSync(ws, { recursive: true, force: true })
    fs.rmSync(real, { recursive: true, force: true })
    return result
  })

const program = Effect.gen(function*() {
  const file = process.argv[2]
  if (file === undefined) return yield* Effect.dieMessage("usage: HostilityChild.ts <cases.json>")
  const input = JSON.parse(fs.readFileSync(file, "utf8")) as HostilityInput
  for (const t of input.templates) {
    if (fs.existsSync(t.dir)) continue
    const captured: Array<string> = []
    const code = yield* Main.run(["node", "runtime-resume", "import", "--json", "--store", t.store, t.dir, input.fixture]).pipe(
      Effect.provide(Layer.merge(platform, capturing(captured)))
    )
    if (code !== 0) return yield* Effect.dieMessage(`could not build the template ${t.dir}: ${captured.join("")}`)
  }
  for (const c of input.cases) {
    yield* say({ start: c.id })
    yield* say(yield* runCase(input, c))
  }
})

if (process.argv[1] !== undefined && NodePath.resolve(process.argv[1]).endsWith(NodePath.join("harness", "HostilityChild.ts"))) {
  NodeRuntime.runMain(program, { disableErrorReporting: false })
}
