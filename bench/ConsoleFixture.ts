// Writes a console fixture workspace to a folder: the three-run workspace, or (with N) one generated run of N events.
// Usage: npx tsx bench/ConsoleFixture.ts N DIR (N = 0 for the three runs); used to measure the console's run page.
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Effect from "effect/Effect"
import { threeRuns, largeRun, workspaceWith } from "../test/support/consoleWorkspace.js"
import * as FileSystem from "@effect/platform/FileSystem"
const n = Number(process.argv[2] ?? "0")
const dir = process.argv[3]!
Effect.runPromise(Effect.scoped(Effect.gen(function*() {
  const ws = yield* workspaceWith(n > 0 ? [largeRun(n)] : threeRuns())
  const fs = yield* FileSystem.FileSystem
  yield* fs.copy(ws, dir)
})).pipe(Effect.provide(NodeContext.layer))).then(() => console.log("ok"))
