// Wall and CPU time of a span of benchmark work. Wall time is what a caller waits; CPU time (user + system, all
// threads) is what other processes on this shared 2-core machine cannot stretch, so both are reported.
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"

/** Wall and CPU time of one span, in microseconds. */
export interface Sample {
  readonly wall: number
  readonly cpu: number
}

/** Runs `effect` and measures it: wall time by the Effect clock, CPU time by `process.cpuUsage`. */
export const measured = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<readonly [A, Sample], E, R> =>
  Effect.gen(function*() {
    const cpu0 = yield* Effect.sync(() => process.cpuUsage())
    const t0 = yield* Clock.currentTimeNanos
    const a = yield* effect
    const wall = Number((yield* Clock.currentTimeNanos) - t0) / 1000
    const cpu = yield* Effect.sync(() => process.cpuUsage(cpu0))
    return [a, { wall, cpu: cpu.user + cpu.system }] as const
  })

/** The sum of samples. */
export const total = (samples: ReadonlyArray<Sample>): Sample =>
  samples.reduce((acc, s) => ({ wall: acc.wall + s.wall, cpu: acc.cpu + s.cpu }), { wall: 0, cpu: 0 })
