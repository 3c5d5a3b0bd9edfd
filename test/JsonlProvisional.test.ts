// The JSONL writer's open verifies the rows of an append group as they come (the scanner's provisional mode), not
// holding the group until its last line: an import writes a run as ONE group, so holding it cost the whole run.
// Provisional rows must never change a verdict: a failure among them counts only once their group completes, and a
// torn tail after them is the tail, with the state before it (high-water, ids) exactly as if it had been held back.
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import * as NodePath from "node:path"
import * as Digest from "../src/Domain/Digest.js"
import { RunId } from "../src/Domain/Ids.js"
import type { RuntimeEvent } from "../src/Domain/RuntimeEvent.js"
import { canonicalText, jsonlLine } from "../src/Domain/RuntimeEvent.js"
import * as EventBuilder from "../src/Domain/Rules/EventBuilder.js"
import * as JsonlRuntimeEventStore from "../src/Layers/JsonlRuntimeEventStore.js"
import { LineScanner } from "../src/Layers/internal/jsonlScan.js"
import type { ScanItem } from "../src/Layers/internal/jsonlScan.js"
import * as NodeWorkspaceLock from "../src/Layers/NodeWorkspaceLock.js"

const TestLayer = Layer.merge(NodeContext.layer, NodeWorkspaceLock.layerNode)
const text = (e: RuntimeEvent) => Either.getOrThrow(canonicalText(e))

// The lines of one append group of `events`, continuing `from`; `breakAt` (0-based) gets a wrong digest.
const group = (from: { seq: number; digest: string }, runId: string, events: ReadonlyArray<RuntimeEvent>, breakAt?: number) => {
  let { seq, digest } = from
  const end = seq + events.length
  const lines: Array<string> = []
  events.forEach((e, i) => {
    seq += 1
    digest = Digest.next(digest, seq, text(e))
    lines.push(jsonlLine(seq, end, i === breakAt ? Digest.genesis(`${runId}-other`) : digest, text(e)))
  })
  return { lines, tail: { seq, digest } }
}

const workspaceWith = (bytes: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const workspace = yield* fs.makeTempDirectoryScoped({ prefix: "rr-jsonl-prov-" })
    yield* fs.writeFile(NodePath.join(workspace, JsonlRuntimeEventStore.FILE_NAME), Buffer.from(bytes, "utf8"), { mode: 0o600 })
    return workspace
  })

const failureOf = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<E, never, R> =>
  Effect.flatMap(Effect.either(effect), Either.match({
    onLeft: (e) => Effect.succeed(e),
    onRight: () => Effect.dieMessage("expected a failure, but the effect succeeded")
  }))

describe("JSONL scanner: provisional rows", () => {
  it("hands on the rows of a group still open (provisional mode) instead of holding them; without it, holds them", () => {
    const a = EventBuilder.make("run-a")
    const opened = group({ seq: 0, digest: Digest.genesis("run-a") }, "run-a", [a.opened()])
    const big = group(opened.tail, "run-a", Array.from({ length: 50 }, (_, i) => a.user(`u${i}`)))
    const open = Buffer.from([...opened.lines, ...big.lines.slice(0, 49)].join(""), "utf8")

    const provisional = new LineScanner(true, true)
    const out: Array<ScanItem> = []
    provisional.push(open, out)
    assert.strictEqual(out.length, 50, "the opener and the 49 rows of the open group")
    assert.strictEqual(provisional.committedLine, 2, "rows from line 2 on are provisional")
    assert.isTrue(provisional.handedOnUncommitted)
    provisional.push(Buffer.from(big.lines[49]!, "utf8"), out)
    assert.strictEqual(out.length, 51)
    assert.strictEqual(provisional.committedLine, 52)
    assert.isFalse(provisional.handedOnUncommitted)
    assert.isUndefined(provisional.end())

    const holding = new LineScanner(true)
    const held: Array<ScanItem> = []
    holding.push(open, held)
    assert.strictEqual(held.length, 1, "only the complete opener group")
  })

  it("holds damage back in provisional mode: a cut group is not handed on before a complete group follows", () => {
    const a = EventBuilder.make("run-a")
    const opened = group({ seq: 0, digest: Digest.genesis("run-a") }, "run-a", [a.opened()])
    const cut = group(opened.tail, "run-a", [a.user("1"), a.user("2"), a.user("3")])
    const scanner = new LineScanner(true, true)
    const out: Array<ScanItem> = []
    // Two rows of a group of three, then a line that does not continue it (a group of its own, not closed).
    const next = group(cut.tail, "run-a", [a.user("4"), a.user("5")])
    scanner.push(Buffer.from([...opened.lines, ...cut.lines.slice(0, 2), next.lines[0]!].join(""), "utf8"), out)
    assert.deepStrictEqual(out.map((i) => i._tag), ["Row", "Row", "Row"], "the opener and the two provisional rows, no Cut")
    const tail = scanner.end()
    assert.isDefined(tail)
    assert.strictEqual(tail!.line, 2)
  })
})

describe("JSONL writer open: provisional rows never change the verdict", () => {
  it.scopedLive("a chain break inside a torn last group: the open reports the torn tail, not the break", () =>
    Effect.gen(function*() {
      const a = EventBuilder.make("run-a")
      const first = group({ seq: 0, digest: Digest.genesis("run-a") }, "run-a", [a.opened(), a.user("1")])
      // A group of three, torn after its second line; its second line breaks the chain.
      const torn = group(first.tail, "run-a", [a.user("2"), a.model("3"), a.user("4")], 1)
      const workspace = yield* workspaceWith([...first.lines, torn.lines[0]!, torn.lines[1]!].join(""))

      const refused = yield* failureOf(Effect.scoped(JsonlRuntimeEventStore.make({ workspace })))
      assert.strictEqual(refused._tag, "LedgerCorruption")
      assert.strictEqual((refused as { reason: string }).reason, "torn_row")
      assert.strictEqual((refused as { line?: number }).line, 3)

      // Quarantine judges the tail against the state before it (a tail row that does not chain needs a person).
      const quarantine = yield* failureOf(JsonlRuntimeEventStore.quarantineTornTail(workspace))
      assert.strictEqual((quarantine as { reason: string }).reason, "digest_mismatch")
      assert.strictEqual((quarantine as { line?: number }).line, 4)
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("a torn last group of good rows: torn_row, and after quarantine its ids and seqs are free", () =>
    Effect.gen(function*() {
      const a = EventBuilder.make("run-a")
      const first = group({ seq: 0, digest: Digest.genesis("run-a") }, "run-a", [a.opened()])
      const events = Array.from({ length: 20 }, (_, i) => a.user(`u${i}`))
      const torn = group(first.tail, "run-a", events)
      const workspace = yield* workspaceWith([...first.lines, ...torn.lines.slice(0, 19)].join(""))

      const refused = yield* failureOf(Effect.scoped(JsonlRuntimeEventStore.make({ workspace })))
      assert.strictEqual((refused as { reason: string }).reason, "torn_row")
      // A writer that completes an interrupted import would quarantine; here the operator does.
      yield* JsonlRuntimeEventStore.quarantineTornTail(workspace)
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* JsonlRuntimeEventStore.make({ workspace })
        const rows = yield* store.append(RunId.make("run-a"), events, { expectedHighWater: first.tail })
        assert.deepStrictEqual([rows[0]!.seq, rows[19]!.seq, rows[19]!.digest], [2, 21, torn.tail.digest])
      }))
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("a chain break inside a group that completes is reported at its line, as a reader reports it", () =>
    Effect.gen(function*() {
      const a = EventBuilder.make("run-a")
      const first = group({ seq: 0, digest: Digest.genesis("run-a") }, "run-a", [a.opened()])
      const broken = group(first.tail, "run-a", [a.user("1"), a.model("2"), a.user("3")], 1)
      const workspace = yield* workspaceWith([...first.lines, ...broken.lines].join(""))
      const writer = yield* failureOf(Effect.scoped(JsonlRuntimeEventStore.make({ workspace })))
      const reader = yield* JsonlRuntimeEventStore.make({ workspace, readOnly: true })
      const read = yield* failureOf(reader.readRun(RunId.make("run-a")))
      assert.strictEqual((writer as { reason: string }).reason, "digest_mismatch")
      assert.strictEqual((writer as { line?: number }).line, 3)
      assert.strictEqual((writer as { message: string }).message, (read as { message: string }).message)
    }).pipe(Effect.provide(TestLayer)))
})
