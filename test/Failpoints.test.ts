// The one failpoint service keyed by boundary (src/Services/Failpoints.ts): each view (tool call, continuation,
// settlement) sees its own boundaries only, and a layer of one kind keeps the failpoints it is provided over.
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as ContinuationFailpoints from "../src/Services/ContinuationFailpoints.js"
import * as Failpoints from "../src/Services/Failpoints.js"
import * as RecoveryFailpoints from "../src/Services/RecoveryFailpoints.js"

const toolSite = { runId: "r", operationId: "op", callId: "c" }
const continuationSite = { sourceRunId: "s", claimId: "k", runId: "r" }
const recoverySite = { runId: "r", callId: "c", operationId: "op" }

// One hit of every boundary, tool call first, then the continuation's, then the settlement's.
const hitAll = Effect.gen(function*() {
  for (const b of Failpoints.TOOL_BOUNDARIES) yield* Failpoints.hit(b, toolSite)
  for (const p of ContinuationFailpoints.CONTINUATION_POINTS) yield* ContinuationFailpoints.hit(p, continuationSite)
  for (const p of RecoveryFailpoints.RECOVERY_POINTS) yield* RecoveryFailpoints.hit(p, recoverySite)
})

describe("Failpoints: one service keyed by boundary", () => {
  it.effect("the views are one service", () =>
    Effect.sync(() => {
      assert.strictEqual(ContinuationFailpoints.ContinuationFailpoints, Failpoints.Failpoints)
      assert.strictEqual(RecoveryFailpoints.RecoveryFailpoints, Failpoints.Failpoints)
    }))

  it.effect("the default does nothing and is `none`", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* Failpoints.Failpoints, Failpoints.none)
      yield* hitAll
    }))

  it.effect("each view records its own boundaries only, in order", () =>
    Effect.gen(function*() {
      const tool: Array<Failpoints.ToolBoundary> = []
      const continuation: Array<ContinuationFailpoints.ContinuationPoint> = []
      const recovery: Array<RecoveryFailpoints.RecoveryPoint> = []
      yield* hitAll.pipe(Effect.provide(Failpoints.layerRecording(tool)))
      yield* hitAll.pipe(Effect.provide(ContinuationFailpoints.layerRecording(continuation)))
      yield* hitAll.pipe(Effect.provide(RecoveryFailpoints.layerRecording(recovery)))
      assert.deepStrictEqual(tool, [...Failpoints.TOOL_BOUNDARIES])
      assert.deepStrictEqual(continuation, [...ContinuationFailpoints.CONTINUATION_POINTS])
      assert.deepStrictEqual(recovery, [...RecoveryFailpoints.RECOVERY_POINTS])
    }))

  it.effect("a layer of one kind hands the other kinds' hits to the failpoints it is provided over", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      yield* hitAll.pipe(
        Effect.provide(Failpoints.layerAt("before_t2", (site) => Effect.sync(() => void seen.push(`tool ${site.callId}`)))),
        Effect.provide(ContinuationFailpoints.layerAt("claim_committed", (site) => Effect.sync(() => void seen.push(`claim ${site.claimId}`)))),
        Effect.provide(RecoveryFailpoints.layerAt("observed", (site) => Effect.sync(() => void seen.push(`observed ${site.operationId}`))))
      )
      assert.deepStrictEqual(seen, ["tool c", "claim k", "observed op"])
    }))

  it.effect("layerAtAny stops at one boundary of any kind", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(hitAll.pipe(Effect.provide(Failpoints.layerAtAny("bundle_committed", () => Effect.interrupt))))
      assert.isTrue(exit._tag === "Failure")
    }))
})
