// A child that runs the one-pass JSONL import (src/Workspace/ImportJsonlOnePass.ts) of FILE into WORKSPACE, and stops for
// good inside its check-and-write pass: once CHUNKS chunks of the file were read, checked and their lines written to
// the draft, it prints PAUSED and waits (for the test's SIGKILL). Usage: onePassImportChild.ts FILE WORKSPACE CHUNKS
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { existsSync } from "node:fs"
import * as NodeCliPlatform from "../../src/Layers/NodeCliPlatform.js"
import { importFreshJsonl } from "../../src/Workspace/ImportJsonlOnePass.js"

const [file, workspace, chunks] = process.argv.slice(2) as [string, string, string]

const program = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  // The read of FILE once the workspace exists is the check-and-write pass (the draft is made first; the reads
  // before it are the light count of each run's lines).
  const paused: FileSystem.FileSystem = {
    ...fs,
    stream: (path, options) =>
      path === file && existsSync(workspace)
        ? fs.stream(path, options).pipe(
          Stream.take(Number(chunks)),
          Stream.concat(Stream.fromEffect(Effect.zipRight(Effect.sync(() => console.log("PAUSED")), Effect.never)))
        )
        : fs.stream(path, options)
  }
  const done = yield* importFreshJsonl(file, workspace).pipe(Effect.provideService(FileSystem.FileSystem, paused))
  console.log(`DONE ${done._tag}`)
})

Effect.runPromise(program.pipe(Effect.provide(NodeCliPlatform.layer))).catch((error) => {
  console.error(String(error))
  process.exit(1)
})
