// The body of the `runtime-resume` CLI (bin/cli.ts starts it, bundled or not): runs `Main.run` with Node's platform
// services and the workspace lock.
// Its teardown exits with the verb's code (2 for any failure) only after stdout and stderr have been flushed.
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { tuneHeapForLongReads } from "../src/Layers/NodeHeapTuning.js"
import * as Main from "../src/Cli/Main.js"
import * as NodeCliPlatform from "../src/Layers/NodeCliPlatform.js"

// Before any verb runs: long reads (inspect, verify, export, import) keep their per-row objects young (NodeHeapTuning).
tuneHeapForLongReads()

// The CLI's platform: Node's, with the ledger FileSystem, the workspace lock and the owner lock (NodeCliPlatform).
const layer = NodeCliPlatform.layer

// SIGTERM and SIGINT interrupt the verb (runMain's handlers), and the teardown exits. Should that not finish within a
// short grace (a finalizer waiting on a stdout nobody reads, a wait that cannot be interrupted), the first signal
// still ends the process: exit 2, as every failure (spec 06). The timer never keeps a finished process alive.
const SIGNAL_GRACE_MS = 2_000
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.once(signal, () => {
    // No message: stderr may itself be the pipe nobody reads.
    setTimeout(() => process.exit(2), SIGNAL_GRACE_MS).unref()
  })
}

// A reader that closes stdout early (`inspect --json | head -1`): the failed write reaches the verb as StdoutClosed
// (src/Cli/internal/common.ts), which ends the CLI quietly with exit 0; the stream's own 'error' event is not a crash.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code !== "EPIPE" && error.code !== "ERR_STREAM_DESTROYED") throw error
})

// Colours only on a TTY, and never with NO_COLOR set (https://no-color.org).
const noColor = (process.env["NO_COLOR"] ?? "") !== ""
const output: Main.Output = {
  color: process.stdout.isTTY === true && !noColor,
  colorErr: process.stderr.isTTY === true && !noColor,
  columns: Math.min(process.stdout.columns ?? 100, 120)
}

NodeRuntime.runMain(Main.run(process.argv, output).pipe(Effect.provide(layer)), {
  disableErrorReporting: true,
  disablePrettyLogger: true,
  teardown: (exit, onExit) => {
    const code = Exit.isSuccess(exit) && typeof exit.value === "number" ? exit.value : 2
    process.exitCode = code
    // Pipes may be asynchronous (not on Linux, but elsewhere): exit once everything written has been handed over.
    process.stdout.write("", () => process.stderr.write("", () => onExit(code)))
  }
})
