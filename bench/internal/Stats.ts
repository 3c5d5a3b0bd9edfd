// Order statistics for benchmark samples: the machine is shared and noisy, so figures are medians and p95s.
// Pure functions over arrays of numbers; nothing here times anything.

/** The q-quantile (0..1) of the samples, by the nearest-rank method on a sorted copy. */
export const quantile = (samples: ReadonlyArray<number>, q: number): number => {
  if (samples.length === 0) return Number.NaN
  const sorted = samples.slice().sort((a, b) => a - b)
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))
  return sorted[rank]!
}

/** The median of the samples. */
export const median = (samples: ReadonlyArray<number>): number => quantile(samples, 0.5)

/** The 95th percentile of the samples. */
export const p95 = (samples: ReadonlyArray<number>): number => quantile(samples, 0.95)
