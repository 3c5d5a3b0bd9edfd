// What `npm run bench -- [names] [--quick] [--profile]` asks for: which benchmarks, at which sizes, how many repetitions.
// `--quick` shrinks every size so a run takes about a minute (for trying the benchmarks, not for figures).

/** The sizes and repetitions every benchmark reads. */
export interface BenchOptions {
  /** Run sizes of the append benchmark (events already in the run). */
  readonly appendSizes: ReadonlyArray<number>
  /** Timed appends per size and store (after a warm-up of `appendWarmup`). */
  readonly appends: number
  readonly appendWarmup: number
  /**
   * Untimed calls (appends, tool cycles) on a throwaway workspace before the first size, so V8 has optimised the
   * store's code paths: without it the first size is measured half-interpreted (about 2× slower than the next).
   */
  readonly jitWarmup: number
  /**
   * JSONL runs above this size are seeded from the SQLite run's prefix (the lines the JSONL store would have written
   * for the same appends; its open verifies them) instead of appended again: a 1M JSONL fill costs minutes here.
   */
  readonly jsonlSeedAbove: number
  /** Sizes of the realistic run the reopen benchmark plans (one SQLite ledger each, filled through the store). */
  readonly reopenSizes: ReadonlyArray<number>
  /** Timed child processes per side (ours, baseline) in the reopen benchmark. */
  readonly reopenReps: number
  /** Prefix sizes of the plan benchmark. */
  readonly planSizes: ReadonlyArray<number>
  /** Also CPU-profile one extra reopen child and print where its time goes. */
  readonly profile: boolean
  readonly quick: boolean
}

/** The options of a full run, or of a `--quick` one. */
export const make = (flags: { readonly quick: boolean; readonly profile: boolean }): BenchOptions =>
  flags.quick
    ? {
      appendSizes: [1_000, 10_000, 30_000],
      appends: 300,
      appendWarmup: 30,
      jitWarmup: 300,
      jsonlSeedAbove: 10_000,
      reopenSizes: [30_000],
      reopenReps: 2,
      planSizes: [1_000, 10_000, 30_000],
      profile: flags.profile,
      quick: true
    }
    : {
      appendSizes: [1_000, 100_000, 1_000_000],
      appends: 1_000,
      appendWarmup: 50,
      jitWarmup: 3_000,
      jsonlSeedAbove: 100_000,
      reopenSizes: [100_000, 1_000_000],
      reopenReps: 3,
      planSizes: [1_000, 100_000, 1_000_000],
      profile: flags.profile,
      quick: false
    }

/** A size as people say it: 1k, 100k, 1M. */
export const sizeLabel = (n: number): string =>
  n >= 1_000_000 && n % 1_000_000 === 0 ? `${n / 1_000_000}M` : n >= 1_000 && n % 1_000 === 0 ? `${n / 1_000}k` : String(n)
