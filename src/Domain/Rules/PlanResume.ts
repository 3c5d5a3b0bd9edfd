// `planResume`: the pure Phase 0 program from a committed prefix to a ResumePlan (docs/spec/02-resume-plan.md).
// It accepts an Iterable of rows or a Stream of rows (such as `readRunPages`), whose error passes through.
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import type { LedgerCorruption, RuntimeOffsetMismatch } from "../Errors.js"
import type { ResumePlan } from "../ResumePlan.js"
import type { PrefixRow } from "../RuntimeEvent.js"
import * as ResumePlanner from "./ResumePlanner.js"
import * as VerifiedRead from "./VerifiedRead.js"

/**
 * Plans one run's committed prefix: verifies density, chain, identity and the corruption rules, then
 * projects tool operations into a ResumePlan. No requirements, no clock, no I/O; equal input gives `Equal` plans.
 *
 * @since 0.1.0
 * @category rules
 */
export function planResume<E, R>(
  prefix: Stream.Stream<PrefixRow, E, R>,
  options?: ResumePlanner.PlanOptions
): Effect.Effect<ResumePlan, LedgerCorruption | RuntimeOffsetMismatch | E, R>
export function planResume(
  prefix: Iterable<PrefixRow>,
  options?: ResumePlanner.PlanOptions
): Effect.Effect<ResumePlan, LedgerCorruption | RuntimeOffsetMismatch>
export function planResume<E, R>(
  prefix: Stream.Stream<PrefixRow, E, R> | Iterable<PrefixRow>,
  options: ResumePlanner.PlanOptions = {}
): Effect.Effect<ResumePlan, LedgerCorruption | RuntimeOffsetMismatch | E, R> {
  if (Stream.StreamTypeId in prefix) {
    const given = prefix as Stream.Stream<PrefixRow, E, R>
    return Effect.suspend(() => {
      const state = ResumePlanner.initial(options.runId)
      // A store's own verified read hands its reader's verifier over: one call index, built once, by the reader.
      const follow = VerifiedRead.followOf(given)
      const stream = follow === undefined ? given : follow((verifier) => {
        ResumePlanner.follow(state, verifier)
      })
      return Stream.runForEachChunk(stream, (chunk) => {
        for (const row of chunk) {
          ResumePlanner.step(state, row)
          if (state.failure !== undefined) return Effect.fail(state.failure)
        }
        return Effect.void
      }).pipe(Effect.zipRight(Effect.suspend(() => ResumePlanner.finish(state, options))))
    })
  }
  const rows = prefix as Iterable<PrefixRow>
  return Effect.suspend(() => ResumePlanner.planIterable(rows, options))
}
