// The benchmark report: one row per figure, each next to the baseline measured in the same run, as a ratio.
// Renders the stdout table and the JSON document written to `.bench-work/results/latest.json`.

/** One reported figure. `baseline` is measured in the same run; `ratio` is ours / baseline. */
export interface ReportRow {
  readonly bench: string
  readonly case: string
  readonly metric: string
  readonly unit: string
  readonly ours: number
  readonly baseline?: number
  readonly ratio?: number
  /** The peak RSS (maxRSS) of the process that produced `ours`, MB, when that process was measured whole. */
  readonly peakRssMB?: number
  /** The reviewed (never asserted) target, e.g. "≤ 2×". */
  readonly target?: string
  readonly note?: string
}

/** Builds a row; the ratio is derived from the two figures when a baseline is given. */
export const row = (fields: Omit<ReportRow, "ratio">): ReportRow =>
  fields.baseline !== undefined && fields.baseline > 0 ? { ...fields, ratio: fields.ours / fields.baseline } : fields

/** What one benchmark module returns. */
export interface BenchResult {
  readonly name: string
  readonly wallMs: number
  readonly rows: ReadonlyArray<ReportRow>
  /** Anything else worth keeping in the JSON (sizes, counts, child outputs). */
  readonly details: Record<string, unknown>
  /** Text printed after the table (a profile summary). */
  readonly text?: string
}

/** Formats a figure with a precision that suits its magnitude. */
export const fmt = (n: number | undefined): string => {
  if (n === undefined || Number.isNaN(n)) return ""
  const a = Math.abs(n)
  if (a >= 1000) return Math.round(n).toLocaleString("en-US")
  if (a >= 100) return n.toFixed(0)
  if (a >= 10) return n.toFixed(1)
  return n.toFixed(2)
}

/**
 * Whether a row meets its target, for the targets written as bounds (several joined by commas must all hold):
 * `≤ N×` / `< N×` on the ratio, `≤ N MB` on the peak RSS (or on `ours` when the row's unit is MB), `≤ N ms` /
 * `< N ms` on `ours` in ms. Parts that are not such a bound ("—", a note) are skipped; `undefined` when no part is a
 * bound or a bounded figure is missing.
 */
export const verdict = (r: ReportRow): "met" | "missed" | undefined => {
  if (r.target === undefined) return undefined
  let judged = false
  for (const part of r.target.split(",")) {
    const m = /([≤<])\s*([\d.]+)\s*(×|MB|ms)\s*$/u.exec(part.trim())
    if (m === null) continue
    const bound = Number(m[2])
    const figure = m[3] === "×"
      ? r.ratio
      : m[3] === "MB"
      ? (r.unit === "MB" ? r.ours : r.peakRssMB)
      : (r.unit === "ms" ? r.ours : undefined)
    if (figure === undefined || Number.isNaN(bound)) return undefined
    if (!(m[1] === "≤" ? figure <= bound : figure < bound)) return "missed"
    judged = true
  }
  return judged ? "met" : undefined
}

/** The rows as an aligned text table. */
export const table = (rows: ReadonlyArray<ReportRow>): string => {
  const header = ["bench", "case", "metric", "ours", "baseline", "ratio", "unit", "peak RSS", "target", "note"]
  const cells = rows.map((r) => [
    r.bench,
    r.case,
    r.metric,
    fmt(r.ours),
    fmt(r.baseline),
    r.ratio === undefined ? "" : `${r.ratio.toFixed(2)}×`,
    r.unit,
    r.peakRssMB === undefined ? "" : `${Math.round(r.peakRssMB)} MB`,
    r.target === undefined ? "" : `${r.target}${verdict(r) === undefined ? "" : ` (${verdict(r)})`}`,
    r.note ?? ""
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)))
  const right = new Set([3, 4, 5, 7])
  const line = (c: ReadonlyArray<string>) =>
    c.map((s, i) => (right.has(i) ? s.padStart(widths[i]!) : s.padEnd(widths[i]!))).join("  ").trimEnd()
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...cells.map(line)].join("\n")
}
