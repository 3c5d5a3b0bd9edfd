// Summarises a V8 `.cpuprofile` (from `node --cpu-prof`): self time per function and per source file, so a
// benchmark can say where a child spent its time without opening a profiler.
import * as Schema from "effect/Schema"

const CallFrame = Schema.Struct({ functionName: Schema.String, url: Schema.String, lineNumber: Schema.Number })
const ProfileNode = Schema.Struct({ id: Schema.Number, callFrame: CallFrame })

/** The parts of a `.cpuprofile` the summary reads. */
export const CpuProfile = Schema.parseJson(Schema.Struct({
  nodes: Schema.Array(ProfileNode),
  samples: Schema.Array(Schema.Number),
  timeDeltas: Schema.Array(Schema.Number)
}))
/** The parts of a `.cpuprofile` the summary reads. */
export type CpuProfile = typeof CpuProfile.Type

/** One line of the summary: a function or a file, its self time and its share of the profile. */
export interface ProfileEntry {
  readonly name: string
  readonly selfMs: number
  readonly share: number
}

const shortUrl = (url: string): string => {
  const i = url.lastIndexOf("/node_modules/")
  if (i >= 0) return url.slice(i + "/node_modules/".length)
  const j = url.lastIndexOf("/src/")
  if (j >= 0) return url.slice(j + 1)
  const k = url.lastIndexOf("/bench/")
  return k >= 0 ? url.slice(k + 1) : url.replace(/^file:\/\//, "")
}

/** The top `limit` functions and files by self time. */
export const summarise = (profile: CpuProfile, limit: number): { readonly totalMs: number; readonly functions: ReadonlyArray<ProfileEntry>; readonly files: ReadonlyArray<ProfileEntry> } => {
  const frames = new Map(profile.nodes.map((n) => [n.id, n.callFrame]))
  const byFunction = new Map<string, number>()
  const byFile = new Map<string, number>()
  let total = 0
  for (let i = 0; i < profile.samples.length; i++) {
    const frame = frames.get(profile.samples[i]!)
    const dt = (profile.timeDeltas[i] ?? 0) / 1000
    // Idle time is not work: leave it out of the total and the shares.
    if (frame === undefined || frame.functionName === "(idle)") continue
    const file = frame.url === "" ? "(native/vm)" : shortUrl(frame.url)
    const fn = `${frame.functionName || "(anonymous)"}  ${file}${frame.url === "" ? "" : `:${frame.lineNumber + 1}`}`
    total += dt
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + dt)
    byFile.set(file, (byFile.get(file) ?? 0) + dt)
  }
  const top = (m: Map<string, number>) =>
    [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, limit).map(([name, selfMs]) => ({ name, selfMs, share: selfMs / total }))
  return { totalMs: total, functions: top(byFunction), files: top(byFile) }
}

/** The summary as text lines. */
export const render = (title: string, summary: ReturnType<typeof summarise>): string =>
  [
    `${title} (${summary.totalMs.toFixed(0)} ms of non-idle samples)`,
    "  by file (self time):",
    ...summary.files.map((e) => `    ${(e.share * 100).toFixed(1).padStart(5)}%  ${e.selfMs.toFixed(0).padStart(7)} ms  ${e.name}`),
    "  by function (self time):",
    ...summary.functions.map((e) => `    ${(e.share * 100).toFixed(1).padStart(5)}%  ${e.selfMs.toFixed(0).padStart(7)} ms  ${e.name}`)
  ].join("\n")
