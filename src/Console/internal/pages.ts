// The console's HTML: the workspace page, a run's page (an SVG timeline, the next step, the plan panel, the actions its
// state admits, a paged event list) and an event's page. Server-rendered, readable without JavaScript, every value
// HTML-escaped, every link built by `paths.ts`, every command quoted by the CLI's `shellWord`; 360 px wide and up.
import type { CommittedRow } from "../../Domain/RuntimeEvent.js"
import type { PlanView } from "../../Programs/InspectWorkspace.js"
import type { Lineage, Milestone, RunGlance, RunSummary, TimelineOperation, WorkspaceGlance, WorkspaceView } from "./data.js"
import { EVENTS_PER_PAGE } from "./data.js"
import { eventPath, reconcilePath, resolvePath, runPath } from "./paths.js"
import type { CommandContext, ConsoleRunState, StateOperation } from "./state.js"
import { renderStep, stateLabel } from "./state.js"

/**
 * Escapes text for HTML content and attribute values.
 *
 * @since 0.1.0
 * @category console
 */
export const esc = (value: unknown): string =>
  String(value).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" })[c]!)

const HEAD = `<meta name="viewport" content="width=device-width, initial-scale=1">` +
  `<link rel="icon" href="/favicon.svg" type="image/svg+xml"><link rel="stylesheet" href="/assets/console.css">`

/**
 * The page frame: title, the console's own icon, stylesheet and script, the CSRF token for its forms.
 *
 * @since 0.1.0
 * @category console
 */
export const layout = (title: string, csrf: string, body: string, watch: string): string =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)} · runtime-resume console</title>` +
  `${HEAD}<script src="/assets/console.js" defer></script></head>` +
  `<body data-csrf="${esc(csrf)}" data-watch="${esc(watch)}"><header><a href="/" class="brand">runtime-resume console</a>` +
  `<span id="live" class="live" aria-live="polite"></span></header><main>${body}</main></body></html>`

/**
 * An operation's colour class: its status, or who settled it.
 *
 * @since 0.1.0
 * @category console
 */
export const operationClass = (op: TimelineOperation): string =>
  op.recovery !== undefined && op.recovery.disposition === "completed"
    ? op.recovery.provenance.kind === "manual" ? "settled-person" : "settled-reconciler"
    : op.status.replace("_", "-")

const LEGEND: ReadonlyArray<readonly [string, string]> = [
  ["succeeded", "succeeded"],
  ["failed", "failed"],
  ["indeterminate", "indeterminate"],
  ["not-dispatched", "not dispatched"],
  ["parked", "parked"],
  ["settled-reconciler", "settled by a reconciler"],
  ["settled-person", "settled by a person"]
]

const decisionBadge = (decision: string) => `<span class="badge d-${esc(decision)}">${esc(decision)}</span>`

const stateBadge = (state: ConsoleRunState) =>
  `<span class="badge s-${esc(state.run.state)}" title="${esc(state.run.summary)}">${esc(stateLabel(state.run))}</span>`

/** The one next step of a run's state for a person: its sentence and the command line(s) to type. */
const nextStep = (state: ConsoleRunState, context: CommandContext, compact: boolean): string => {
  const step = renderStep(state.run.person, context)
  const lines = compact ? step.commands.slice(0, 1) : step.commands
  return `<div class="next"><p>${esc(step.text)}</p>` +
    lines.map((line) => `<pre class="cmd"><code>${esc(line)}</code></pre>`).join("") +
    (compact && step.commands.length > 1 ? `<p class="more">or ${step.commands.length - 1} other choice(s) on the run's page</p>` : "") +
    `</div>`
}

const stuckCell = (state: ConsoleRunState): string =>
  state.run.stuck.length === 0
    ? "-"
    : esc(state.run.stuck.slice(0, 5).map((op) => `${op.name} (${op.callId})`).join(", ")) +
      (state.run.stuck.length > 5 ? ` and ${state.run.stuck.length - 5} more` : "")

const lineageCell = (lineage: Lineage): string =>
  `${lineage.continuedFrom !== undefined ? `from <a href="${esc(runPath(lineage.continuedFrom))}">${esc(lineage.continuedFrom)}</a>` : ""}` +
  `${lineage.continuedBy.map((r) => ` by <a href="${esc(runPath(r))}">${esc(r)}</a>`).join("")}`

const runsTable = (
  rows: ReadonlyArray<{ readonly runId: string; readonly state: ConsoleRunState; readonly seq: string; readonly lineage: Lineage; readonly filter: string }>,
  context: CommandContext
): string =>
  `<table id="runs" class="stack"><thead><tr><th>run</th><th>state</th><th>stuck tool</th><th>your next step</th><th>seq</th><th>lineage</th></tr></thead><tbody>` +
  (rows.map((row) =>
    `<tr data-filter="${esc(row.filter.toLowerCase())}"><td data-label="run"><a href="${esc(runPath(row.runId))}">${esc(row.runId)}</a></td>` +
    `<td data-label="state">${stateBadge(row.state)}</td><td data-label="stuck tool">${stuckCell(row.state)}</td>` +
    `<td data-label="your next step">${nextStep(row.state, context, true)}</td><td data-label="seq" class="num">${esc(row.seq)}</td>` +
    `<td data-label="lineage">${lineageCell(row.lineage) || "-"}</td></tr>`
  ).join("") || `<tr><td colspan="6">no runs</td></tr>`) + `</tbody></table>`

/**
 * The workspace page: every run with its state, the tool it is stuck on and the person's next step; the ledger's health.
 *
 * @since 0.1.0
 * @category console
 */
export const workspacePage = (
  view: WorkspaceView,
  states: ReadonlyMap<string, ConsoleRunState>,
  context: CommandContext,
  csrf: string,
  watch: string
): string => {
  const v = view.verification
  const ok = v.runs.every((r) => r.ok) && v.integrity?.ok !== false
  const rows = view.runs.flatMap((run) => {
    const state = states.get(run.runId)
    if (state === undefined) return []
    return [{
      runId: run.runId,
      state,
      seq: String(run.highWater ?? "-"),
      lineage: run.lineage,
      filter: [run.runId, state.run.state, run.decision, ...state.run.stuck.map((op) => `${op.name} ${op.callId}`)].join(" ")
    }]
  })
  const health = `<section class="panel"><h2>Ledger health</h2><p>verify: <strong class="${ok ? "ok" : "bad"}">${ok ? "passed" : "FAILED"}</strong>` +
    (v.integrity !== undefined ? ` · ${esc(v.integrity.check)}: ${v.integrity.ok ? "ok" : "failed"}` : "") +
    ` · ${v.runs.length} run(s)</p><table class="stack"><thead><tr><th>run</th><th>verified</th><th>high-water seq</th><th>digest</th></tr></thead><tbody>` +
    v.runs.map((r) =>
      `<tr><td data-label="run">${esc(r.runId)}</td><td data-label="verified" class="${r.ok ? "ok" : "bad"}">${r.ok ? "ok" : esc(r.error?.message ?? "failed")}</td>` +
      `<td data-label="high-water seq" class="num">${esc(r.seq ?? "-")}</td><td data-label="digest" class="digest">${esc(r.digest ?? "-")}</td></tr>`
    ).join("") + `</tbody></table></section>`
  return layout(
    "workspace",
    csrf,
    `<h1>Workspace <code>${esc(context.workspace)}</code></h1>` +
      `<section class="panel"><h2>Runs</h2><form method="get" action="/" class="filter"><input type="search" name="q" id="filter" placeholder="filter runs (id, state, tool)" aria-label="filter runs"></form>` +
      runsTable(rows, context) + `</section>` + health,
    watch
  )
}

const LANE = 26
const LEFT = 150
const WIDTH = 1000
const MAX_LANES = 200

/**
 * The run's timeline as SVG: operations as bars along seq (up to the high-water `highWater`), milestones as ticks;
 * each item links to its event.
 *
 * @since 0.1.0
 * @category console
 */
export const timeline = (
  runId: string,
  highWater: number,
  operations: ReadonlyArray<TimelineOperation>,
  milestones: ReadonlyArray<Milestone>
): string => {
  const last = Math.max(highWater, 1)
  const x = (seq: number) => LEFT + ((seq - 1) / Math.max(last - 1, 1)) * (WIDTH - LEFT - 20)
  const ops = operations.slice(0, MAX_LANES)
  const top = 40
  const height = top + ops.length * LANE + 30
  const link = (seq: number) => eventPath(runId, seq)
  const parts: Array<string> = []
  parts.push(`<line x1="${LEFT}" y1="${top - 10}" x2="${WIDTH - 20}" y2="${top - 10}" class="axis"/>`)
  parts.push(`<text x="${LEFT}" y="${top - 16}" class="tick">seq 1</text><text x="${WIDTH - 20}" y="${top - 16}" class="tick" text-anchor="end">seq ${last}</text>`)
  // Small runs: every event as a tick on the axis (large ones show operations and milestones only).
  if (last <= 300) {
    for (let seq = 1; seq <= last; seq++) {
      const ex = x(seq).toFixed(1)
      parts.push(`<a href="${link(seq)}" class="item"><title>seq ${seq}</title><rect x="${(Number(ex) - 1.5).toFixed(1)}" y="${top - 16}" width="3" height="12" class="evtick"/></a>`)
    }
  }
  for (const m of milestones) {
    if (m.kind === "diagnostic" || m.kind === "observed") continue
    const mx = x(m.seq).toFixed(1)
    parts.push(`<a href="${link(m.seq)}" class="item"><title>${esc(`seq ${m.seq}: ${m.label}`)}</title>` +
      `<line x1="${mx}" y1="${top - 14}" x2="${mx}" y2="${height - 20}" class="ms ms-${esc(m.kind)}"/>` +
      `<circle cx="${mx}" cy="${top - 10}" r="5" class="ms-dot ms-${esc(m.kind)}"/></a>`)
  }
  ops.forEach((op, i) => {
    const y = top + i * LANE
    const cls = operationClass(op)
    const end = op.responseSeq ?? (op.status === "indeterminate" || op.status === "parked" ? last : op.dispatchSeq ?? op.callSeq)
    const x1 = x(op.callSeq)
    const x2 = Math.max(x(end), x1 + 6)
    const title = `${op.callId} ${op.name}: ${cls.replace("-", " ")} · call ${op.callSeq}` +
      (op.dispatchSeq !== undefined ? ` · dispatch ${op.dispatchSeq}` : "") +
      (op.responseSeq !== undefined ? ` · response ${op.responseSeq}` : "") +
      (op.recovery !== undefined ? ` · ${op.recovery.reasonCode} by ${op.recovery.provenance.kind}:${op.recovery.provenance.actor}` : "")
    parts.push(`<text x="${LEFT - 8}" y="${y + 15}" text-anchor="end" class="lane">${esc(`${op.callId} ${op.name}`.slice(0, 22))}</text>`)
    parts.push(`<a href="${link(op.callSeq)}" class="item op" data-call="${esc(op.callId)}" data-status="${esc(cls)}"><title>${esc(title)}</title>` +
      `<rect x="${x1.toFixed(1)}" y="${y + 4}" width="${(x2 - x1).toFixed(1)}" height="${LANE - 10}" rx="3" class="bar ${esc(cls)}${op.responseSeq === undefined && end === last ? " open" : ""}"/></a>`)
    if (op.dispatchSeq !== undefined) {
      parts.push(`<a href="${link(op.dispatchSeq)}" class="item"><title>${esc(`${op.callId} dispatched at seq ${op.dispatchSeq}`)}</title>` +
        `<rect x="${(x(op.dispatchSeq) - 2).toFixed(1)}" y="${y + 2}" width="4" height="${LANE - 6}" class="dispatch"/></a>`)
    }
    if (op.recovery !== undefined) {
      const rx = x(op.recovery.decidedSeq)
      parts.push(`<a href="${link(op.recovery.decidedSeq)}" class="item"><title>${esc(`recovery bundle: ${op.recovery.disposition} ${op.recovery.reasonCode} by ${op.recovery.provenance.kind}:${op.recovery.provenance.actor}`)}</title>` +
        `<path d="M${rx.toFixed(1)} ${y + 3} l6 10 l-6 10 l-6 -10 z" class="bundle ${esc(cls)}"/></a>`)
    }
  })
  if (operations.length > MAX_LANES) {
    parts.push(`<text x="${LEFT}" y="${height - 6}" class="tick">${operations.length - MAX_LANES} more operations: see the table below</text>`)
  }
  return `<svg class="timeline" viewBox="0 0 ${WIDTH} ${height}" width="100%" role="img" aria-label="timeline of run ${esc(runId)}">${parts.join("")}</svg>` +
    `<ul class="legend">${LEGEND.map(([c, l]) => `<li><span class="sw ${c}"></span>${l}</li>`).join("")}` +
    `<li><span class="sw ms-terminal"></span>terminal</li><li><span class="sw ms-recovery"></span>recovery bundle</li><li><span class="sw ms-continuation"></span>continuation start</li></ul>`
}

const planPanel = (summary: RunSummary, state: ConsoleRunState): string => {
  const run = summary.inspection
  const plan = run.plan
  if (plan === undefined) {
    return `<section class="panel plan"><h2>Plan</h2><p class="bad">${esc(run.error?._tag ?? "no plan")}: ${esc(run.error?.message ?? "")}</p></section>`
  }
  return `<section class="panel plan"><h2>Plan</h2><dl>` +
    `<dt>state</dt><dd>${stateBadge(state)}</dd>` +
    `<dt>decision</dt><dd>${decisionBadge(run.decision)}</dd>` +
    `<dt>status</dt><dd>${esc(run.status ?? "-")}</dd>` +
    `<dt>reasons</dt><dd>${esc(plan.reasons.join(", ") || "-")}</dd>` +
    `<dt>to the model</dt><dd>${esc(plan.directive ?? "-")}</dd>` +
    `<dt>replay size</dt><dd>${plan.replay.length} event(s)</dd>` +
    `<dt>high-water</dt><dd>seq ${plan.highWater.seq} <span class="digest">${esc(plan.highWater.digest)}</span></dd>` +
    `<dt>verified</dt><dd class="ok verified">verified: seq 1 to ${summary.events}, read in full for this plan</dd>` +
    (state.run.abandonedBy !== undefined ? `<dt>abandoned by</dt><dd>${esc(state.run.abandonedBy.join(", "))}</dd>` : "") +
    `</dl></section>`
}

/** The run's state in one sentence and the person's one next step, above everything else on its page. */
const nextPanel = (state: ConsoleRunState, context: CommandContext): string => {
  const here = state.admitted.reconcile || state.admitted.resolve.length > 0
  return `<section class="panel next-step"><h2>Next step ${stateBadge(state)}</h2><p>${esc(state.run.summary)}</p>` +
    nextStep(state, context, false) +
    (here ? `<p class="here">or do it here, in the actions below</p>` : "") + `</section>`
}

/**
 * How much of a call's args the resolve form shows (the whole call is on its event's page).
 *
 * @since 0.1.0
 * @category constants
 */
export const ARGS_SHOWN = 4000

const argsBlock = (runId: string, op: StateOperation & { readonly callSeq?: number }, args: unknown): string => {
  const text = args === undefined ? undefined : JSON.stringify(args, null, 2)
  const link = op.callSeq !== undefined ? ` <a href="${esc(eventPath(runId, op.callSeq))}">the call's event</a>` : ""
  if (text === undefined) return `<div class="call-args"><p class="label">the call's args: not read${link}</p></div>`
  const shown = text.length > ARGS_SHOWN ? `${text.slice(0, ARGS_SHOWN)}\n… (${text.length} characters: see the call's event)` : text
  return `<div class="call-args"><p class="label">the call's args${link}</p><pre class="args">${esc(shown)}</pre></div>`
}

/**
 * What the resolve form shows of a call beside its choices: its args, and where it was sent (an MCP server and tool).
 *
 * @since 0.1.0
 * @category models
 */
export interface ShownCall {
  /** The call's args, when they were read. */
  readonly args?: unknown
  /** Where T1 recorded the call was sent (`McpProvenance.sentTo`: "MCP server <name> <version>, tool <tool>"). */
  readonly sentTo?: string
}

const sentToLine = (call: ShownCall | undefined): string =>
  call?.sentTo !== undefined ? `<p class="sent-to">sent to ${esc(call.sentTo)}</p>` : ""

const resolveForm = (runId: string, op: StateOperation & { readonly callSeq?: number }, call: ShownCall | undefined, csrf: string): string =>
  `<form method="post" action="${esc(resolvePath(runId, op.callId))}" class="resolve" data-call="${esc(op.callId)}">` +
  `<input type="hidden" name="csrf" value="${esc(csrf)}">` +
  `<h3>${esc(op.callId)} <small>${esc(op.name)} · ${esc(op.status)}${op.recovery !== undefined ? `: ${esc(op.recovery.reasonCode)}` : ""}</small></h3>` +
  sentToLine(call) + argsBlock(runId, op, call?.args) +
  `<fieldset class="choices"><legend>your decision</legend>` +
  `<label><input type="radio" name="choice" value="retry" required> retry: the model is told the outcome is unknown</label>` +
  `<label><input type="radio" name="choice" value="edit"> edit: the model sees the result you type</label>` +
  `<label><input type="radio" name="choice" value="abort"> abort: abandon the turn (it stays stopped)</label></fieldset>` +
  `<div class="edit"><label>result (JSON, for edit)<textarea name="result" rows="4" spellcheck="false" class="json" ` +
  `placeholder="what the tool really did, as JSON"></textarea></label>` +
  `<p class="help">For edit only. The box starts empty on purpose: check what the call above really did (the file, the ` +
  `system), then type that result as JSON. Nothing is recorded until you do.</p>` +
  `<label class="inline"><input type="checkbox" name="isError" value="true"> the result is an error</label></div>` +
  `<label>your name <input name="actor" required placeholder="who decides" class="actor" autocomplete="name"></label>` +
  `<p class="jsonerr" hidden></p><button type="submit">Record the decision on ${esc(op.callId)}</button></form>`

// What the actions panel says when the state admits no action.
const nothingHere = (state: ConsoleRunState): string => {
  switch (state.run.state) {
    case "open_dead":
    case "open_live":
      return "nothing to decide yet: the run is not sealed (see the next step)"
    case "unmanaged":
      return "nothing to decide yet: the run has no run header (see the next step)"
    case "awaiting_continuation":
      return "every operation is settled: nothing is left to decide here"
    case "abandoned":
      return "abandoned: nothing is left to decide"
    case "continued":
      return "continued by another run: nothing is left to decide here"
    case "completed":
    case "replayable":
      return "no operation to settle"
    default:
      return "no action applies in this state (see the next step)"
  }
}

const actionsPanel = (
  runId: string,
  state: ConsoleRunState,
  operations: ReadonlyArray<TimelineOperation>,
  calls: ReadonlyMap<string, ShownCall>,
  csrf: string,
  notice: string
): string => {
  const bySeq = new Map(operations.map((op) => [op.callId, op.callSeq]))
  const forms = state.admitted.resolve.map((op) => {
    const callSeq = bySeq.get(op.callId)
    return resolveForm(runId, callSeq !== undefined ? { ...op, callSeq } : op, calls.get(op.callId), csrf)
  })
  const reconcile = state.admitted.reconcile
    ? `<form method="post" action="${esc(reconcilePath(runId))}" class="reconcile"><input type="hidden" name="csrf" value="${esc(csrf)}">` +
      `<button type="submit">Reconcile this run</button> <small>observes the file writes it can (runtime-resume/file-write@1) and settles what it proves; the rest is left for you</small></form>`
    : ""
  return `<section class="panel actions"><h2>Actions</h2>${notice}${reconcile}` +
    (forms.join("") || (reconcile === "" ? `<p class="none">${esc(nothingHere(state))}</p>` : "")) + `</section>`
}

const operationsTable = (runId: string, plan: PlanView): string =>
  `<section class="panel"><h2>Tool operations (${plan.operations.length})</h2><table class="stack"><thead><tr><th>call</th><th>tool</th><th>status</th><th>call</th><th>dispatch</th><th>response</th><th>recovery</th></tr></thead><tbody>` +
  plan.operations.slice(0, 1000).map((op) => {
    const l = (seq: number | undefined) => seq === undefined ? "-" : `<a href="${esc(eventPath(runId, seq))}">${seq}</a>`
    return `<tr class="op-row" data-call="${esc(op.callId)}"><td data-label="call">${esc(op.callId)}</td><td data-label="tool">${esc(op.name)}</td>` +
      `<td data-label="status"><span class="sw ${operationClass(op)}"></span>${esc(operationClass(op).replace("-", " "))}</td>` +
      `<td data-label="call seq">${l(op.callSeq)}</td><td data-label="dispatch">${l(op.dispatchSeq)}</td><td data-label="response">${l(op.responseSeq)}</td>` +
      `<td data-label="recovery">${op.recovery !== undefined ? `${esc(op.recovery.disposition)} ${esc(op.recovery.reasonCode)} by ${esc(op.recovery.provenance.kind)}:${esc(op.recovery.provenance.actor)} (${l(op.recovery.decidedSeq)})` : "-"}</td></tr>`
  }).join("") + `</tbody></table>${plan.operations.length > 1000 ? `<p>first 1000 of ${plan.operations.length}</p>` : ""}</section>`

/**
 * A one-line summary of an event for the list (never its args or results).
 *
 * @since 0.1.0
 * @category console
 */
export const eventLine = (row: CommittedRow): string => {
  const b = row.event.body as { readonly _tag: string; readonly callId?: string; readonly name?: string; readonly status?: string }
  return [b._tag, b.callId, b.name, b.status].filter((s) => s !== undefined).join(" ")
}

/**
 * A run's page.
 *
 * @since 0.1.0
 * @category console
 */
export const runPage = (
  summary: RunSummary,
  state: ConsoleRunState,
  calls: ReadonlyMap<string, ShownCall>,
  context: CommandContext,
  events: ReadonlyArray<CommittedRow>,
  page: number,
  csrf: string,
  watch: string,
  notice: string
): string => {
  const run = summary.inspection
  const runId = run.runId
  return layout(
    runId,
    csrf,
    `<p><a href="/">← workspace</a></p><h1>Run <code>${esc(runId)}</code> ${stateBadge(state)}</h1>` +
      nextPanel(state, context) +
      `<div class="cols">${actionsPanel(runId, state, run.plan?.operations ?? [], calls, csrf, notice)}${planPanel(summary, state)}</div>` +
      `<section class="panel"><h2>Timeline <small>${summary.events} events · ${run.plan?.operations.length ?? 0} tool operations</small></h2>` +
      (run.plan !== undefined
        ? timeline(runId, run.plan.highWater.seq, run.plan.operations, summary.milestones)
        : "<p>no timeline: the run could not be planned</p>") +
      (summary.milestonesTruncated ? `<p>first ${summary.milestones.length} milestones shown</p>` : "") + `</section>` +
      (run.plan !== undefined ? operationsTable(runId, run.plan) : "") + eventList(runId, summary.events, events, page),
    watch
  )
}

// A page of the run's events, with a pager (100 per page, read by seq).
const eventList = (runId: string, highWater: number, events: ReadonlyArray<CommittedRow>, page: number): string => {
  const pages = Math.max(1, Math.ceil(highWater / EVENTS_PER_PAGE))
  const nav = `<nav class="pager">${page > 1 ? `<a href="${esc(`${runPath(runId)}?page=${page - 1}#events`)}">← previous</a>` : ""} page ${page} of ${pages} ` +
    `${page < pages ? `<a href="${esc(`${runPath(runId)}?page=${page + 1}#events`)}">next →</a>` : ""}</nav>`
  return `<section class="panel" id="events"><h2>Events</h2>${nav}<table class="stack events"><thead><tr><th>seq</th><th>event</th><th>id</th></tr></thead><tbody>` +
    events.map((row) =>
      `<tr><td data-label="seq" class="num"><a href="${esc(eventPath(runId, row.seq))}">${row.seq}</a></td><td data-label="event">${esc(eventLine(row))}</td><td data-label="id" class="id">${esc(row.event.id)}</td></tr>`
    ).join("") + `</tbody></table>${nav}</section>`
}

// What the page says while (or because) the run's summary is not there: never "verified".
const pendingNote = (events: number, failure: string | undefined): string =>
  failure !== undefined
    ? `<p class="bad unverified">verification FAILED: ${esc(failure)}</p>`
    : `<p class="unverified">not yet verified: the run's ${events} events are being read and planned in the background; ` +
      `this page updates itself when that is done (without JavaScript: reload).</p>`

const terminalLine = (glance: RunGlance): string =>
  glance.terminal !== undefined
    ? `${esc(glance.terminal.status)}${glance.terminal.failureClass !== undefined ? ` (${esc(glance.terminal.failureClass)})` : ""} at seq ${glance.terminal.seq}`
    : "open"

/**
 * A run's page before its summary (a large run, just opened): what indexed reads give — the high-water, the terminal
 * event, the unsettled operations from the call index (on the timeline and in the actions) and the page of events —
 * marked "not yet verified" (or with the verification's failure), never with a plan or a decision. Its state is
 * `runState` over those facts.
 *
 * @since 0.1.0
 * @category console
 */
export const runGlancePage = (
  glance: RunGlance,
  state: ConsoleRunState,
  calls: ReadonlyMap<string, ShownCall>,
  context: CommandContext,
  events: ReadonlyArray<CommittedRow>,
  page: number,
  csrf: string,
  watch: string,
  notice: string,
  failure: string | undefined
): string => {
  const runId = glance.runId
  const last = glance.highWater.seq
  const milestones: Array<Milestone> = [{ seq: 1, kind: "opened", label: "run opened" }]
  if (glance.terminal !== undefined) milestones.push({ seq: glance.terminal.seq, kind: "terminal", label: `run terminated: ${glance.terminal.status}` })
  return layout(
    runId,
    csrf,
    `<p><a href="/">← workspace</a></p><h1>Run <code>${esc(runId)}</code> <span class="badge d-pending">not yet planned</span></h1>` +
      pendingNote(last, failure) + nextPanel(state, context) +
      `<div class="cols">${actionsPanel(runId, state, glance.unsettled, calls, csrf, notice)}<section class="panel plan"><h2>Plan</h2><dl>` +
      `<dt>decision</dt><dd>not yet planned</dd>` +
      `<dt>status</dt><dd>${terminalLine(glance)}</dd>` +
      `<dt>tool boundary</dt><dd>${esc(glance.toolBoundary ?? "-")}</dd>` +
      `<dt>high-water</dt><dd>seq ${last} <span class="digest">${esc(glance.highWater.digest)}</span></dd>` +
      `<dt>verified</dt><dd class="${failure !== undefined ? "bad" : ""} unverified">${failure !== undefined ? "FAILED" : "not yet verified"}</dd>` +
      `</dl></section></div>` +
      `<section class="panel"><h2>Timeline <small>${last} events · ${glance.unsettled.length} unsettled operation(s) shown, from the call index</small></h2>` +
      timeline(runId, last, glance.unsettled, milestones) +
      `<p>settled operations, recovery bundles and continuations appear once the run is read in full</p></section>` +
      eventList(runId, last, events, page),
    watch
  )
}

/**
 * The workspace page before its verification (a large workspace, just opened): every run with its state from indexed
 * reads (its terminal, its unsettled operations), marked "not yet verified" (or with the failure).
 *
 * @since 0.1.0
 * @category console
 */
export const workspaceGlancePage = (
  glance: WorkspaceGlance,
  states: ReadonlyMap<string, ConsoleRunState>,
  context: CommandContext,
  csrf: string,
  watch: string,
  failure: string | undefined
): string => {
  const rows = glance.runs.flatMap((run) => {
    const state = states.get(run.runId)
    if (state === undefined) return []
    return [{
      runId: run.runId,
      state,
      seq: String(run.highWater.seq),
      lineage: run.lineage,
      filter: [run.runId, state.run.state, run.terminal?.status ?? "open", ...state.run.stuck.map((op) => `${op.name} ${op.callId}`)].join(" ")
    }]
  })
  return layout(
    "workspace",
    csrf,
    `<h1>Workspace <code>${esc(context.workspace)}</code></h1>` + pendingNote(glance.runs.reduce((n, r) => n + r.highWater.seq, 0), failure) +
      `<section class="panel"><h2>Runs</h2><form method="get" action="/" class="filter"><input type="search" name="q" id="filter" placeholder="filter runs (id, state, tool)" aria-label="filter runs"></form>` +
      runsTable(rows, context) + `</section>` +
      `<section class="panel"><h2>Ledger health</h2><p>verify: <strong class="${failure !== undefined ? "bad" : ""} unverified">${failure !== undefined ? "FAILED" : "not yet verified"}</strong> · ${glance.runs.length} run(s)</p></section>`,
    watch
  )
}

/**
 * An event's page: the whole event, args and results included.
 *
 * @since 0.1.0
 * @category console
 */
export const eventPage = (runId: string, row: CommittedRow, encoded: unknown, csrf: string): string =>
  layout(
    `${runId} seq ${row.seq}`,
    csrf,
    `<p><a href="${esc(runPath(runId))}">← run ${esc(runId)}</a></p><h1>Event ${row.seq} of <code>${esc(runId)}</code></h1>` +
      `<section class="panel"><dl><dt>type</dt><dd>${esc(row.event.body._tag)}</dd><dt>id</dt><dd>${esc(row.event.id)}</dd>` +
      `<dt>digest</dt><dd class="digest">${esc(row.digest)}</dd></dl>` +
      `<pre class="event">${esc(JSON.stringify(encoded, null, 2))}</pre></section>`,
    ""
  )

/**
 * A plain message page (errors, refusals): the console's icon and stylesheet, no script, no data.
 *
 * @since 0.1.0
 * @category console
 */
export const messagePage = (title: string, message: string): string =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)} · runtime-resume console</title>${HEAD}</head>` +
  `<body><header><span class="brand">runtime-resume console</span></header><main><h1>${esc(title)}</h1><p>${esc(message)}</p></main></body></html>`
