// The `runtime-resume` CLI run in this process, as bin/cli.ts runs it (Main.run on an argv, the CLI's Node platform),
// with stdout and stderr captured instead of written: thousands of verb runs in one test without a process each.
import * as Terminal from "@effect/platform/Terminal"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Main from "../../src/Cli/Main.js"
import * as NodeCliPlatform from "../../src/Layers/NodeCliPlatform.js"
import { OwnerLockWaitMs } from "../../src/Services/WorkspaceOwner.js"

/** A verb's run: its exit code and what it wrote. */
export interface CliRun {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

const text = (args: ReadonlyArray<unknown>): string => args.map((a) => (typeof a === "string" ? a : String(a))).join(" ")

// A Console whose every output goes to `sink` (the CLI's diagnostics, and the logger, which writes through it).
const capturing = (sink: (line: string) => void): Console.Console => {
  const write = (...args: ReadonlyArray<unknown>) => Effect.sync(() => sink(text(args)))
  const unsafeWrite = (...args: ReadonlyArray<unknown>) => sink(text(args))
  const none = () => Effect.void
  return {
    [Console.TypeId]: Console.TypeId,
    assert: none,
    clear: Effect.void,
    count: none,
    countReset: none,
    debug: write,
    dir: write,
    dirxml: write,
    error: write,
    group: none,
    groupEnd: Effect.void,
    info: write,
    log: write,
    table: write,
    time: none,
    timeEnd: none,
    timeLog: none,
    trace: write,
    warn: write,
    unsafe: {
      assert: () => {},
      clear: () => {},
      count: () => {},
      countReset: () => {},
      debug: unsafeWrite,
      dir: unsafeWrite,
      dirxml: unsafeWrite,
      error: unsafeWrite,
      group: () => {},
      groupCollapsed: () => {},
      groupEnd: () => {},
      info: unsafeWrite,
      log: unsafeWrite,
      table: unsafeWrite,
      time: () => {},
      timeEnd: () => {},
      timeLog: () => {},
      trace: unsafeWrite,
      warn: unsafeWrite
    }
  }
}

// A Terminal that is not a TTY and keeps what the verb displays.
const capturingTerminal = (sink: (text: string) => void): Terminal.Terminal =>
  Terminal.Terminal.of({
    columns: Effect.succeed(100),
    rows: Effect.succeed(40),
    isTTY: Effect.succeed(false),
    readInput: Effect.die("the in-process CLI reads no terminal input"),
    readLine: Effect.die("the in-process CLI reads no terminal input"),
    display: (out) => Effect.sync(() => sink(out))
  })

/**
 * The CLI's platform, built once (NodeCliPlatform.layer: Node's context, the ledger FileSystem, the workspace and
 * owner locks), with the owner lock's wait shortened to `ownerWaitMs`: a verb refused by a held lock says so quickly.
 */
export const makeCliRuntime = (ownerWaitMs = 100) =>
  ManagedRuntime.make(Layer.merge(NodeCliPlatform.layer, Layer.succeed(OwnerLockWaitMs, ownerWaitMs)))

/** Runs `runtime-resume ARGS…` in this process on `runtime` and returns its exit code and both streams. */
export const runCli = (
  runtime: ManagedRuntime.ManagedRuntime<Layer.Layer.Success<typeof NodeCliPlatform.layer> | OwnerLockWaitMs, unknown>,
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string | undefined>> = {}
): Promise<CliRun> => {
  let stdout = ""
  let stderr = ""
  const program = Main.run(["node", "runtime-resume", ...args], Main.PLAIN).pipe(
    Effect.provideService(Terminal.Terminal, capturingTerminal((out) => (stdout += out))),
    Effect.withConsole(capturing((line) => (stderr += `${line}\n`)))
  )
  const saved = Object.fromEntries(Object.keys(env).map((key) => [key, process.env[key]]))
  for (const [key, value] of Object.entries(env)) {
    if (value === undefined) delete process.env[key]
    else process.env[key] = value
  }
  return runtime.runPromise(program).then((code) => ({ code, stdout, stderr })).finally(() => {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key]
      else process.env[key] = value
    }
  })
}
