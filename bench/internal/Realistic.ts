// The realistic benchmark run (docs/benchmarks.md): a deterministic, seeded agent session whose mix follows the issue's
// reference ledger. Measured at 1M (seed 14, `measureRealistic`): 366,902 operations (calls; 73% of all events are
// calls and responses; issue: 366,198), 999,196 events replayed (issue: 999,182), 280.5 canonical bytes per event
// (issue: ~268; the envelope alone is ~140 B). It holds user and model text, parallel calls (several calls, then
// their responses in a shuffled order), rare dangling calls (never answered; the run goes on and completes, as a
// run with tool boundary `none` may: the plan is `blocked`), hidden events and diagnostics (which the replay drops),
// and tool args and results of realistic shape and depth (nested objects, arrays, multi-line strings with quotes
// and a little non-ASCII). Self-contained: it shares only `WorkloadEvent` and `assertCanonical` with `Workload.ts`.
import * as CanonicalJson from "../../src/Domain/CanonicalJson.js"
import { CallId, EventId, InvocationId, RunId, SessionId, TurnId } from "../../src/Domain/Ids.js"
import {
  Diagnostic,
  FunctionCall,
  FunctionResponse,
  ModelText,
  rememberCanonicalText,
  RunOpened,
  RunTerminated,
  RuntimeEvent,
  UserMessage
} from "../../src/Domain/RuntimeEvent.js"
import type { EventBody } from "../../src/Domain/RuntimeEvent.js"
import type { WorkloadEvent } from "./Workload.js"

export { assertCanonical } from "./Workload.js"
export type { WorkloadEvent } from "./Workload.js"

/** The id of the realistic run (the same run id as `Workload`'s, so helpers that know one know both). */
export const RUN_ID = RunId.make("bench-run")

// Short ids, as hosts that mint compact ids write them (the envelope alone is ~150 of the ~268 bytes).
const IDS = {
  sessionId: SessionId.make("s-7f3a9c"),
  invocationId: InvocationId.make("i-7f3a9c"),
  runId: RUN_ID,
  turnId: TurnId.make("t-7f3a9c")
}

/** The `ts` of the first event; each later event is a few ms to a few s after the one before (deterministic). */
export const TS0 = 1_700_000_000_000

/** The sizes the benchmarks generate it at. */
export const SIZES = [1_000, 100_000, 1_000_000] as const

/** What the mix aims at per 1M events (the reference ledger). */
export const TARGET = { operations: 366_198, replayed: 999_182, bytesPerEvent: 268 } as const

// ---- deterministic randomness ---------------------------------------------------------------------------------

// mulberry32: a tiny, fast, seeded PRNG (uniform in [0, 1)).
const prng = (seed: number): (() => number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

// ---- a corpus to slice strings from (built once, deterministic) -------------------------------------------------

const WORDS = (
  "the agent reads repository file function returns value error handler test case module import export const let " +
  "async await promise stream effect layer service config option schema decode encode parse string number array " +
  "object index length offset limit query select insert update delete table column row commit rollback transaction " +
  "build compile lint format check run install package version dependency lock update path directory source target " +
  "because however therefore first then next finally also instead before after while until when where which that " +
  "fix bug issue change diff patch line branch merge rebase review comment docs readme example usage note warning"
).split(" ")
const SPICE = ["café", "naïve", "—", "→", "“quoted”", "\"quoted\"", "x\\y", "✓", "日本語", "🚀", "\ttab", "<tag>"]

const CORPUS_LENGTH = 1 << 17
const CODE_CORPUS_LENGTH = 1 << 16

const buildCorpus = (): { readonly prose: string; readonly code: string } => {
  const rng = prng(0xc0ffee)
  let prose = ""
  while (prose.length < CORPUS_LENGTH) {
    const r = rng()
    const word = r < 0.01 ? SPICE[Math.floor(rng() * SPICE.length)]! : WORDS[Math.floor(rng() * WORDS.length)]!
    prose += word + (rng() < 0.07 ? ". " : rng() < 0.02 ? ",\n" : " ")
  }
  let code = ""
  let line = 1
  while (code.length < CODE_CORPUS_LENGTH) {
    const indent = "  ".repeat(Math.floor(rng() * 4))
    const a = WORDS[Math.floor(rng() * WORDS.length)]!
    const b = WORDS[Math.floor(rng() * WORDS.length)]!
    const r = rng()
    code += r < 0.3
      ? `${indent}const ${a}${line} = ${b}(${JSON.stringify(a)}, ${line})\n`
      : r < 0.5
      ? `${indent}if (${a}.length > ${line % 97}) return { ${b}: "${a}" }\n`
      : r < 0.65
      ? `${indent}// ${a} ${b} ${WORDS[line % WORDS.length]}\n`
      : r < 0.8
      ? `${indent}export const ${b} = (${a}: string): number => ${a}.length * ${line % 13}\n`
      : `${indent}yield* ${a}.${b}(\`${a}-\${id}\`)\n`
    line++
  }
  return { prose, code }
}

const CORPUS = buildCorpus()

// ---- the generator -----------------------------------------------------------------------------------------------

/** How a finished realistic run came out (what its ResumePlan must show). */
export interface RealisticStats {
  /** Events generated so far. */
  readonly events: number
  /** `FunctionCall` events: the plan's operations. */
  readonly calls: number
  /** Calls never answered (each makes the plan `blocked`, its operation `indeterminate`). */
  readonly dangling: number
  /** Events with `hidden: true`. */
  readonly hidden: number
  /** `Diagnostic` events. */
  readonly diagnostics: number
  /** Events the plan's replay holds: text, answered calls and their responses, not hidden. */
  readonly replayed: number
  /** Total canonical bytes of the events (UTF-8), counted only when the texts were computed. */
  readonly bytes: number
}

type Pending = (seq: number) => WorkloadEvent

const TOOLS = ["Bash", "Read", "Grep", "Edit", "Glob", "TodoWrite", "WebFetch"] as const
type ToolName = typeof TOOLS[number]
// Relative frequency of each tool in the calls (an agent reads and searches far more than it writes).
const TOOL_WEIGHTS: Readonly<Record<ToolName, number>> = {
  Bash: 0.3,
  Read: 0.27,
  Grep: 0.15,
  Edit: 0.12,
  Glob: 0.08,
  TodoWrite: 0.05,
  WebFetch: 0.03
}

// Step shape probabilities (tuned so 1M events give the TARGET figures; see `measureRealistic`).
const P_USER = 0.035
const P_MODEL_TEXT = 0.915
const P_HIDDEN = 0.0026
const P_DIAGNOSTIC = 0.00012
const P_DANGLING = 0.00021
const P_ERROR = 0.04
// Parallel batches: k calls, then k responses.
const BATCH_CUMULATIVE: ReadonlyArray<readonly [number, number]> = [[0.8, 1], [0.92, 2], [0.97, 3], [1, 4]]
// Scale of every generated string length: tuned so the mean canonical event is ~268 B.
const SCALE = 0.2

/** Options of a `Realistic` generator. */
export interface RealisticOptions {
  /** The PRNG seed (default 14); same seed, same bytes. */
  readonly seed?: number
  /**
   * The run's length: no step is begun that cannot end before this seq, and the event at this seq is a `completed`
   * `RunTerminated`. Without it the run stays open (`take` can go on forever).
   */
  readonly total?: number
}

/**
 * A stateful, seeded generator of the realistic run, seq after seq: `mix()` gives the next event (the opener
 * first), `take(n)` the next n. With `total`, the run ends at that seq with a `completed` `RunTerminated`;
 * `run(n)` is such a whole run of exactly n events. Same seed, same bytes.
 */
export class Realistic {
  /** The seq the next event gets. */
  seq = 1
  /** The seq of the terminal event, when the run has a fixed length. */
  readonly total: number | undefined
  private readonly rng: () => number
  private readonly queue: Array<Pending> = []
  private calls = 0
  private dangling = 0
  private hidden = 0
  private diagnostics = 0
  private replayed = 0
  private bytes = 0
  private ts = TS0
  private nextCall = 0

  /** `remember`: attach each event's canonical text to it (rows as a store reader yields them). */
  constructor(readonly remember: boolean, options: RealisticOptions = {}) {
    this.rng = prng(options.seed ?? 14)
    if (options.total !== undefined && !(Number.isSafeInteger(options.total) && options.total >= 2)) {
      throw new Error(`Realistic: total must be an integer ≥ 2, got ${options.total}`)
    }
    this.total = options.total
  }

  /** What was generated so far. */
  stats(): RealisticStats {
    return {
      events: this.seq - 1,
      calls: this.calls,
      dangling: this.dangling,
      hidden: this.hidden,
      diagnostics: this.diagnostics,
      replayed: this.replayed,
      bytes: this.bytes
    }
  }

  /** The next event of the run (after the terminal of a run with `total`: an error). */
  mix(): WorkloadEvent {
    const total = this.total
    if (total === undefined) return this.nextWithin(Number.POSITIVE_INFINITY)
    if (this.seq > total) throw new Error(`Realistic: the run ended at seq ${total}`)
    return this.seq === total ? this.finish() : this.nextWithin(total - this.seq)
  }

  /** The next `n` events. */
  take(n: number): Array<WorkloadEvent> {
    const out: Array<WorkloadEvent> = []
    for (let i = 0; i < n; i++) out.push(this.mix())
    return out
  }

  /** A whole run of exactly `n` events (n ≥ 2), ending with a `completed` `RunTerminated`. */
  static run(n: number, remember: boolean, seed?: number): { readonly events: Array<WorkloadEvent>; readonly generator: Realistic } {
    const generator = new Realistic(remember, { total: n, ...(seed !== undefined ? { seed } : {}) })
    return { events: generator.take(n), generator }
  }

  // Seals the run: a `completed` `RunTerminated` (calls still pending stay unanswered).
  private finish(): WorkloadEvent {
    this.queue.length = 0
    return this.emit(this.seq++, new RunTerminated({ status: "completed" }, true), { _tag: "RunTerminated", status: "completed" }, false, false)
  }

  // The next event, never starting a step longer than `budget` events (events left before the terminal).
  private nextWithin(budget: number): WorkloadEvent {
    const seq = this.seq++
    if (seq === 1) {
      return this.emit(seq, new RunOpened({ toolBoundary: "none" }, true), { _tag: "RunOpened", toolBoundary: "none" }, false, false)
    }
    if (this.queue.length === 0) this.planStep(budget)
    const next = this.queue.shift()
    return next !== undefined ? next(seq) : this.modelText(seq, false)
  }

  // One agent step: maybe a user message, maybe a hidden note or a diagnostic, usually a model text, then a batch
  // of k parallel calls followed by their k responses (shuffled; rarely one left unanswered).
  private planStep(budget: number): void {
    const rng = this.rng
    const q: Array<Pending> = []
    if (rng() < P_USER) q.push((seq) => this.userMessage(seq, false))
    if (rng() < P_HIDDEN) q.push((seq) => (rng() < 0.5 ? this.userMessage(seq, true) : this.modelText(seq, true)))
    if (rng() < P_DIAGNOSTIC) q.push((seq) => this.diagnostic(seq))
    if (rng() < P_MODEL_TEXT) q.push((seq) => this.modelText(seq, false))
    const r = rng()
    const k = BATCH_CUMULATIVE.find(([p]) => r < p)![1]
    const calls: Array<{ readonly callId: string; readonly tool: ToolName; readonly args: Record<string, unknown> }> = []
    for (let i = 0; i < k; i++) {
      const tool = this.pickTool()
      calls.push({ callId: this.callId(), tool, args: this.argsOf(tool) })
    }
    const answered = calls.filter(() => !(rng() < P_DANGLING))
    if (q.length + calls.length + answered.length > budget) {
      // Too long for what is left before the terminal: fill with model text instead.
      this.queue.push((seq) => this.modelText(seq, false))
      return
    }
    for (const c of calls) q.push((seq) => this.call(seq, c.callId, c.tool, c.args, answered.includes(c)))
    // Responses arrive in completion order, not call order.
    for (let i = answered.length - 1; i > 0; i--) {
      const j = Math.floor(rng() * (i + 1))
      const t = answered[i]!
      answered[i] = answered[j]!
      answered[j] = t
    }
    for (const c of answered) q.push((seq) => this.response(seq, c.callId, c.tool, c.args))
    this.queue.push(...q)
  }

  private pickTool(): ToolName {
    let r = this.rng()
    for (const tool of TOOLS) {
      r -= TOOL_WEIGHTS[tool]
      if (r < 0) return tool
    }
    return "Bash"
  }

  // Provider-style call ids: `call_` and 12 base-62 characters (8 random, 4 counting), unique per call.
  private callId(): string {
    const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    let n = this.nextCall++
    let tail = ""
    for (let i = 0; i < 4; i++) {
      tail = ALPHABET[n % 62]! + tail
      n = Math.floor(n / 62)
    }
    let head = "call_"
    for (let i = 0; i < 8; i++) head += ALPHABET[Math.floor(this.rng() * 62)]!
    return head + tail
  }

  // A length drawn from an exponential distribution of the given mean (a long tail), capped at 8× the mean.
  private len(mean: number): number {
    const m = mean * SCALE
    return Math.max(1, Math.min(Math.round(-Math.log(1 - this.rng()) * m), Math.round(8 * m)))
  }

  // A slice of the prose corpus of about `length` characters, starting at a word.
  private prose(length: number): string {
    const at = Math.floor(this.rng() * (CORPUS.prose.length - length - 64))
    const start = CORPUS.prose.indexOf(" ", at) + 1
    return CORPUS.prose.slice(start, start + length).trim()
  }

  private code(length: number): string {
    const start = Math.floor(this.rng() * (CORPUS.code.length - length - 1))
    return CORPUS.code.slice(start, start + Math.min(length, CORPUS.code.length - 1))
  }

  private word(): string {
    return WORDS[Math.floor(this.rng() * WORDS.length)]!
  }

  private filePath(): string {
    const rng = this.rng
    const dirs = ["src", "src/Domain", "src/Layers", "src/Programs", "test", "bench", "docs", "scripts"]
    const ext = [".ts", ".ts", ".ts", ".md", ".json", ".sql"]
    return `/repo/${dirs[Math.floor(rng() * dirs.length)]}/${this.word()}${this.word().replace(/^./, (c) => c.toUpperCase())}${ext[Math.floor(rng() * ext.length)]}`
  }

  private argsOf(tool: ToolName): Record<string, unknown> {
    const rng = this.rng
    switch (tool) {
      case "Bash": {
        const commands = [
          `npx vitest run test/${this.word()}.test.ts`,
          `git diff --stat HEAD~${1 + Math.floor(rng() * 5)}`,
          `rg -n "${this.word()}" src test`,
          `npx tsc --noEmit -p tsconfig.json`,
          `ls -la ${this.filePath().replace(/\/[^/]*$/, "")}`,
          `cat package.json | head -${10 + Math.floor(rng() * 40)}`
        ]
        const args: Record<string, unknown> = {
          command: commands[Math.floor(rng() * commands.length)],
          description: this.prose(this.len(30))
        }
        if (rng() < 0.3) args.timeout = 120000
        return args
      }
      case "Read": {
        const args: Record<string, unknown> = { file_path: this.filePath() }
        if (rng() < 0.4) {
          args.offset = 1 + Math.floor(rng() * 400)
          args.limit = 50 + Math.floor(rng() * 200)
        }
        return args
      }
      case "Grep":
        return {
          pattern: `${this.word()}(${this.word()}|${this.word()})`,
          path: "/repo/src",
          glob: "*.ts",
          output_mode: rng() < 0.5 ? "files_with_matches" : "content",
          "-n": true
        }
      case "Edit":
        return {
          file_path: this.filePath(),
          old_string: this.code(this.len(50)),
          new_string: this.code(this.len(55)),
          replace_all: false
        }
      case "Glob":
        return { pattern: `**/*${this.word()}*.ts`, path: "/repo" }
      case "TodoWrite": {
        const todos: Array<unknown> = []
        const n = 1 + Math.floor(rng() * 3)
        const status = ["completed", "in_progress", "pending"]
        for (let i = 0; i < n; i++) {
          todos.push({ content: this.prose(this.len(20)), id: String(i + 1), status: status[Math.min(i, 2)] })
        }
        return { todos }
      }
      case "WebFetch":
        return { url: `https://docs.example.com/${this.word()}/${this.word()}`, prompt: this.prose(this.len(30)) }
    }
  }

  private resultOf(tool: ToolName, args: Record<string, unknown>): unknown {
    const rng = this.rng
    switch (tool) {
      case "Bash":
        return { stdout: this.code(this.len(95)), stderr: rng() < 0.15 ? this.prose(this.len(20)) : "", exitCode: 0, interrupted: false }
      case "Read": {
        const content = this.code(this.len(160))
        const start = typeof args.offset === "number" ? args.offset : 1
        return {
          type: "text",
          file: { filePath: args.file_path, content, numLines: content.split("\n").length, startLine: start }
        }
      }
      case "Grep": {
        const filenames: Array<string> = []
        const n = Math.floor(rng() * 3)
        for (let i = 0; i < n; i++) filenames.push(this.filePath().slice(6))
        return args.output_mode === "content"
          ? { mode: "content", numFiles: n, filenames, content: this.code(this.len(40)), numLines: 1 + Math.floor(rng() * 20) }
          : { mode: "files_with_matches", numFiles: n, filenames }
      }
      case "Edit": {
        const oldStart = 1 + Math.floor(rng() * 300)
        return {
          filePath: args.file_path,
          structuredPatch: [{
            oldStart,
            oldLines: 3,
            newStart: oldStart,
            newLines: 3,
            lines: [` ${this.code(this.len(10)).split("\n")[0]}`, `-${this.word()}`, `+${this.word()}`]
          }],
          userModified: false
        }
      }
      case "Glob":
        return { filenames: [this.filePath().slice(6)], durationMs: Math.floor(rng() * 40), numFiles: 1, truncated: false }
      case "TodoWrite":
        return { ok: true }
      case "WebFetch":
        return { bytes: 4096 + Math.floor(rng() * 60000), code: 200, codeText: "OK", result: this.prose(this.len(120)), durationMs: 100 + Math.floor(rng() * 2000) }
    }
  }

  private userMessage(seq: number, hidden: boolean): WorkloadEvent {
    const text = hidden ? `<system-reminder>${this.prose(this.len(25))}</system-reminder>` : this.prose(this.len(55))
    return this.emit(seq, new UserMessage({ text }, true), { _tag: "UserMessage", text }, hidden, !hidden)
  }

  private modelText(seq: number, hidden: boolean): WorkloadEvent {
    const text = this.prose(this.len(hidden ? 30 : 50))
    return this.emit(seq, new ModelText({ text }, true), { _tag: "ModelText", text }, hidden, !hidden)
  }

  private diagnostic(seq: number): WorkloadEvent {
    const message = `provider retry after ${this.word()} ${this.prose(this.len(15))}`
    this.diagnostics++
    return this.emit(seq, new Diagnostic({ message, code: "provider_retry" }, true), { _tag: "Diagnostic", message, code: "provider_retry" }, false, false)
  }

  private call(seq: number, callId: string, name: ToolName, args: Record<string, unknown>, answered: boolean): WorkloadEvent {
    this.calls++
    if (!answered) this.dangling++
    return this.emit(
      seq,
      new FunctionCall({ callId: CallId.make(callId, true), name, args }, true),
      { _tag: "FunctionCall", callId, name, args },
      false,
      answered
    )
  }

  private response(seq: number, callId: string, name: ToolName, args: Record<string, unknown>): WorkloadEvent {
    const isError = this.rng() < P_ERROR
    const result = isError ? { error: `${name} failed: ${this.prose(this.len(40))}` } : this.resultOf(name, args)
    return this.emit(
      seq,
      new FunctionResponse({ callId: CallId.make(callId, true), name, result, isError }, true),
      { _tag: "FunctionResponse", callId, name, result, isError },
      false,
      true
    )
  }

  // Builds the event without validation (well-formed by construction); its canonical text is computed when first
  // read (or at once when `remember`, which attaches it to the event as a store reader does).
  private emit(seq: number, body: EventBody, wireBody: Record<string, unknown>, hidden: boolean, replayed: boolean): WorkloadEvent {
    const id = `${RUN_ID}:${seq}`
    this.ts += 5 + Math.floor(this.rng() * 3000)
    const ts = this.ts
    if (hidden) this.hidden++
    if (replayed) this.replayed++
    const envelope = hidden ? { id, ...IDS, ts, hidden: true as const } : { id, ...IDS, ts }
    const event = new RuntimeEvent({ ...envelope, id: EventId.make(id, true), body }, true)
    let text: string | undefined
    const stats = this
    const w: WorkloadEvent = {
      event,
      get text() {
        if (text === undefined) {
          const encoded = CanonicalJson.encode({ ...envelope, body: wireBody })
          if (encoded._tag === "Fail") throw new Error(`realistic event ${id} has no canonical encoding: ${encoded.failure.message}`)
          text = encoded.text
          stats.bytes += Buffer.byteLength(text, "utf8")
        }
        return text
      }
    }
    if (this.remember) rememberCanonicalText(event, w.text)
    return w
  }
}

/** Generates a whole realistic run of `n` events (texts computed) and reports its figures; for tuning and checks. */
export const measureRealistic = (n: number, seed = 14): RealisticStats => {
  const { events, generator } = Realistic.run(n, false, seed)
  for (const w of events) void w.text
  return generator.stats()
}
