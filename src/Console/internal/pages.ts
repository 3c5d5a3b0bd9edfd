// The console's HTML: the workspace page, a run's page (an SVG timeline, the plan panel, actions, a paged event list)
// and an event's page. Server-rendered, readable without JavaScript; every value is HTML-escaped.
import type { CommittedRow } from "../../Domain/RuntimeEvent.js"
import type { PlanView } from "../../Programs/InspectWorkspace.js"
import type { Lineage, Milestone, RunGlance, RunSummary, TimelineOperation, WorkspaceGlance, WorkspaceView } from "./data.js"
import { EVENTS_PER_PAGE } from "./data.js"

/** Escapes text for HTML content and attribute values. */
export const esc = (value: unknown): string =>
  String(value).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" })[c]!)

const enc = encodeURIComponent

/** The page frame: title, the console's own stylesheet and script, the CSRF token for its forms. */
export const layout = (title: string, csrf: string, body: string, watch: string): string =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)} · runtime-resume console</title>` +
  `<meta name="viewport" content="width=device-width, initial-scale=1">` +
  `<link rel="stylesheet" href="/assets/console.css"><script src="/assets/console.js" defer></script></head>` +
  `<body data-csrf="${esc(csrf)}" data-watch="${esc(watch)}"><header><a href="/" class="brand">runtime-resume console</a>` +
  `<span id="live" class="live" aria-live="polite"></span></header><main>${body}</main></body></html>`

/** An operation's colour class: its status, or who settled it. */
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

/** The workspace page. */
export const workspacePage = (view: WorkspaceView, workspace: string, csrf: string, watch: string): string => {
  const v = view.verification
  const ok = v.runs.every((r) => r.ok) && v.integrity?.ok !== false
  const rows = view.runs.map((run) => {
    const plan = run.plan
    const next = plan?.directive ?? (run.decision === "blocked" ? `resolve or reconcile on the run's page` : "-")
    const text = [run.runId, run.status, run.decision, ...(plan?.reasons ?? [])].join(" ").toLowerCase()
    return `<tr data-filter="${esc(text)}"><td><a href="/run/${enc(run.runId)}">${esc(run.runId)}</a></td>` +
      `<td>${esc(run.status ?? "-")}</td><td>${decisionBadge(run.decision)}</td>` +
      `<td>${esc(plan?.reasons.join(", ") || (run.error !== undefined ? `${run.error._tag}: ${run.error.message}` : "-"))}</td>` +
      `<td>${esc(next)}</td><td class="num">${esc(run.highWater ?? "-")}</td>` +
      `<td>${run.lineage.continuedFrom !== undefined ? `from <a href="/run/${enc(run.lineage.continuedFrom)}">${esc(run.lineage.continuedFrom)}</a>` : ""}` +
      `${run.lineage.continuedBy.map((r) => ` by <a href="/run/${enc(r)}">${esc(r)}</a>`).join("")}</td></tr>`
  })
  const health = `<section class="panel"><h2>Ledger health</h2><p>verify: <strong class="${ok ? "ok" : "bad"}">${ok ? "passed" : "FAILED"}</strong>` +
    (v.integrity !== undefined ? ` · ${esc(v.integrity.check)}: ${v.integrity.ok ? "ok" : "failed"}` : "") +
    ` · ${v.runs.length} run(s)</p><table><thead><tr><th>run</th><th>verified</th><th>high-water seq</th><th>digest</th></tr></thead><tbody>` +
    v.runs.map((r) =>
      `<tr><td>${esc(r.runId)}</td><td class="${r.ok ? "ok" : "bad"}">${r.ok ? "ok" : esc(r.error?.message ?? "failed")}</td>` +
      `<td class="num">${esc(r.seq ?? "-")}</td><td class="digest">${esc(r.digest ?? "-")}</td></tr>`
    ).join("") + `</tbody></table></section>`
  return layout(
    "workspace",
    csrf,
    `<h1>Workspace <code>${esc(workspace)}</code></h1>` +
      `<section class="panel"><h2>Runs</h2><form method="get" action="/" class="filter"><input type="search" name="q" id="filter" placeholder="filter runs (id, status, decision, reason)"></form>` +
      `<table id="runs"><thead><tr><th>run</th><th>status</th><th>decision</th><th>reasons / error</th><th>next step</th><th>seq</th><th>lineage</th></tr></thead>` +
      `<tbody>${rows.join("") || `<tr><td colspan="7">no runs</td></tr>`}</tbody></table></section>` + health,
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
  const link = (seq: number) => `/run/${enc(runId)}/event/${seq}`
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

const planPanel = (summary: RunSummary): string => {
  const run = summary.inspection
  const plan = run.plan
  if (plan === undefined) {
    return `<section class="panel"><h2>Plan</h2><p class="bad">${esc(run.error?._tag ?? "no plan")}: ${esc(run.error?.message ?? "")}</p></section>`
  }
  return `<section class="panel plan"><h2>Plan</h2><dl>` +
    `<dt>decision</dt><dd>${decisionBadge(run.decision)}</dd>` +
    `<dt>status</dt><dd>${esc(run.status ?? "-")}</dd>` +
    `<dt>reasons</dt><dd>${esc(plan.reasons.join(", ") || "-")}</dd>` +
    `<dt>directive</dt><dd>${esc(plan.directive ?? "-")}</dd>` +
    `<dt>next step</dt><dd>${esc(nextStep(run.runId, run.decision, plan))}</dd>` +
    `<dt>replay size</dt><dd>${plan.replay.length} event(s)</dd>` +
    `<dt>high-water</dt><dd>seq ${plan.highWater.seq} <span class="digest">${esc(plan.highWater.digest)}</span></dd>` +
    `<dt>verified</dt><dd class="ok verified">verified: seq 1 to ${summary.events}, read in full for this plan</dd>` +
    (run.abandoned !== undefined ? `<dt>abandoned by</dt><dd>${esc(run.abandoned.by.join(", "))}</dd>` : "") +
    `</dl></section>`
}

const nextStep = (runId: string, decision: string, plan: PlanView): string => {
  if (decision === "blocked") {
    const open = plan.operations.filter((op) => op.status === "indeterminate" || op.status === "parked")
    return open.length > 0
      ? `settle ${open.map((op) => op.callId).join(", ")} below (reconcile, or retry / edit / abort), or: runtime-resume reconcile --run ${runId}`
      : `runtime-resume resume --run ${runId}`
  }
  if (decision === "safe_replay") return `runtime-resume resume --run ${runId}`
  return "nothing to do"
}

const actionsPanel = (runId: string, operations: ReadonlyArray<TimelineOperation>, csrf: string, notice: string): string => {
  const unsettled = operations.filter((op) => op.status === "indeterminate" || op.status === "parked")
  const forms = unsettled.map((op) =>
    `<form method="post" action="/run/${enc(runId)}/resolve" class="resolve" data-call="${esc(op.callId)}">` +
    `<input type="hidden" name="csrf" value="${esc(csrf)}"><input type="hidden" name="callId" value="${esc(op.callId)}">` +
    `<h3>${esc(op.callId)} <small>${esc(op.name)} · ${esc(op.status)}</small></h3>` +
    `<label>choice <select name="choice"><option value="edit">edit: the model sees this result</option><option value="retry">retry: the model sees outcome_unknown</option><option value="abort">abort: leave it parked</option></select></label>` +
    `<label>result (JSON, for edit) <textarea name="result" rows="4" spellcheck="false" class="json">{"ok": true}</textarea></label>` +
    `<label><input type="checkbox" name="isError" value="true"> the result is an error</label>` +
    `<label>your name <input name="actor" required placeholder="who decides" class="actor"></label>` +
    `<p class="jsonerr" hidden></p><button type="submit">Resolve ${esc(op.callId)}</button></form>`
  )
  return `<section class="panel actions"><h2>Actions</h2>${notice}` +
    `<form method="post" action="/run/${enc(runId)}/reconcile" class="reconcile"><input type="hidden" name="csrf" value="${esc(csrf)}">` +
    `<button type="submit">Reconcile this run</button> <small>observes file writes (runtime-resume/file-write@1) and settles what it can prove</small></form>` +
    (forms.join("") || `<p>no operation to settle</p>`) + `</section>`
}

const operationsTable = (runId: string, plan: PlanView): string =>
  `<section class="panel"><h2>Tool operations (${plan.operations.length})</h2><table><thead><tr><th>call</th><th>tool</th><th>status</th><th>call</th><th>dispatch</th><th>response</th><th>recovery</th></tr></thead><tbody>` +
  plan.operations.slice(0, 1000).map((op) => {
    const l = (seq: number | undefined) => seq === undefined ? "-" : `<a href="/run/${enc(runId)}/event/${seq}">${seq}</a>`
    return `<tr class="op-row" data-call="${esc(op.callId)}"><td>${esc(op.callId)}</td><td>${esc(op.name)}</td><td><span class="sw ${operationClass(op)}"></span>${esc(operationClass(op).replace("-", " "))}</td>` +
      `<td>${l(op.callSeq)}</td><td>${l(op.dispatchSeq)}</td><td>${l(op.responseSeq)}</td>` +
      `<td>${op.recovery !== undefined ? `${esc(op.recovery.disposition)} ${esc(op.recovery.reasonCode)} by ${esc(op.recovery.provenance.kind)}:${esc(op.recovery.provenance.actor)} (${l(op.recovery.decidedSeq)})` : "-"}</td></tr>`
  }).join("") + `</tbody></table>${plan.operations.length > 1000 ? `<p>first 1000 of ${plan.operations.length}</p>` : ""}</section>`

/** A one-line summary of an event for the list (never its args or results). */
export const eventLine = (row: CommittedRow): string => {
  const b = row.event.body as { readonly _tag: string; readonly callId?: string; readonly name?: string; readonly status?: string }
  return [b._tag, b.callId, b.name, b.status].filter((s) => s !== undefined).join(" ")
}

/** A run's page. */
export const runPage = (
  summary: RunSummary,
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
    `<p><a href="/">← workspace</a></p><h1>Run <code>${esc(runId)}</code> ${decisionBadge(run.decision)}</h1>` +
      `<section class="panel"><h2>Timeline <small>${summary.events} events · ${run.plan?.operations.length ?? 0} tool operations</small></h2>` +
      (run.plan !== undefined
        ? timeline(runId, run.plan.highWater.seq, run.plan.operations, summary.milestones)
        : "<p>no timeline: the run could not be planned</p>") +
      (summary.milestonesTruncated ? `<p>first ${summary.milestones.length} milestones shown</p>` : "") + `</section>` +
      `<div class="cols">${planPanel(summary)}${actionsPanel(runId, run.plan?.operations ?? [], csrf, notice)}</div>` +
      (run.plan !== undefined ? operationsTable(runId, run.plan) : "") + eventList(runId, summary.events, events, page),
    watch
  )
}

// A page of the run's events, with a pager (100 per page, read by seq).
const eventList = (runId: string, highWater: number, events: ReadonlyArray<CommittedRow>, page: number): string => {
  const pages = Math.max(1, Math.ceil(highWater / EVENTS_PER_PAGE))
  const nav = `<nav class="pager">${page > 1 ? `<a href="/run/${enc(runId)}?page=${page - 1}#events">← previous</a>` : ""} page ${page} of ${pages} ` +
    `${page < pages ? `<a href="/run/${enc(runId)}?page=${page + 1}#events">next →</a>` : ""}</nav>`
  return `<section class="panel" id="events"><h2>Events</h2>${nav}<table><thead><tr><th>seq</th><th>event</th><th>id</th></tr></thead><tbody>` +
    events.map((row) =>
      `<tr><td class="num"><a href="/run/${enc(runId)}/event/${row.seq}">${row.seq}</a></td><td>${esc(eventLine(row))}</td><td>${esc(row.event.id)}</td></tr>`
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
 * marked "not yet verified" (or with the verification's failure), never with a plan or a decision.
 */
export const runGlancePage = (
  glance: RunGlance,
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
      pendingNote(last, failure) +
      `<section class="panel"><h2>Timeline <small>${last} events · ${glance.unsettled.length} unsettled operation(s) shown, from the call index</small></h2>` +
      timeline(runId, last, glance.unsettled, milestones) +
      `<p>settled operations, recovery bundles and continuations appear once the run is read in full</p></section>` +
      `<div class="cols"><section class="panel plan"><h2>Plan</h2><dl>` +
      `<dt>decision</dt><dd>not yet planned</dd>` +
      `<dt>status</dt><dd>${terminalLine(glance)}</dd>` +
      `<dt>tool boundary</dt><dd>${esc(glance.toolBoundary ?? "-")}</dd>` +
      `<dt>high-water</dt><dd>seq ${last} <span class="digest">${esc(glance.highWater.digest)}</span></dd>` +
      `<dt>verified</dt><dd class="${failure !== undefined ? "bad" : ""} unverified">${failure !== undefined ? "FAILED" : "not yet verified"}</dd>` +
      `</dl></section>${actionsPanel(runId, glance.unsettled, csrf, notice)}</div>` +
      eventList(runId, last, events, page),
    watch
  )
}

const lineageCell = (lineage: Lineage): string =>
  `${lineage.continuedFrom !== undefined ? `from <a href="/run/${enc(lineage.continuedFrom)}">${esc(lineage.continuedFrom)}</a>` : ""}` +
  `${lineage.continuedBy.map((r) => ` by <a href="/run/${enc(r)}">${esc(r)}</a>`).join("")}`

/**
 * The workspace page before its verification (a large workspace, just opened): every run with its high-water,
 * terminal status and unsettled operations from indexed reads, marked "not yet verified" (or with the failure).
 */
export const workspaceGlancePage = (
  glance: WorkspaceGlance,
  workspace: string,
  csrf: string,
  watch: string,
  failure: string | undefined
): string => {
  const rows = glance.runs.map((run) => {
    const text = [run.runId, run.terminal?.status ?? "open"].join(" ").toLowerCase()
    return `<tr data-filter="${esc(text)}"><td><a href="/run/${enc(run.runId)}">${esc(run.runId)}</a></td>` +
      `<td>${esc(run.terminal?.status ?? "open")}</td><td><span class="badge d-pending">not yet planned</span></td>` +
      `<td>${run.unsettled.length > 0 ? `${run.unsettled.length} unsettled: ${esc(run.unsettled.slice(0, 5).map((op) => op.callId).join(", "))}` : "-"}</td>` +
      `<td>${run.unsettled.length > 0 ? "open the run to settle" : "-"}</td><td class="num">${run.highWater.seq}</td><td>${lineageCell(run.lineage)}</td></tr>`
  })
  return layout(
    "workspace",
    csrf,
    `<h1>Workspace <code>${esc(workspace)}</code></h1>` + pendingNote(glance.runs.reduce((n, r) => n + r.highWater.seq, 0), failure) +
      `<section class="panel"><h2>Runs</h2><form method="get" action="/" class="filter"><input type="search" name="q" id="filter" placeholder="filter runs (id, status)"></form>` +
      `<table id="runs"><thead><tr><th>run</th><th>status</th><th>decision</th><th>unsettled</th><th>next step</th><th>seq</th><th>lineage</th></tr></thead>` +
      `<tbody>${rows.join("") || `<tr><td colspan="7">no runs</td></tr>`}</tbody></table></section>` +
      `<section class="panel"><h2>Ledger health</h2><p>verify: <strong class="${failure !== undefined ? "bad" : ""} unverified">${failure !== undefined ? "FAILED" : "not yet verified"}</strong> · ${glance.runs.length} run(s)</p></section>`,
    watch
  )
}

/** An event's page: the whole event, args and results included (only here). */
export const eventPage = (runId: string, row: CommittedRow, encoded: unknown, csrf: string): string =>
  layout(
    `${runId} seq ${row.seq}`,
    csrf,
    `<p><a href="/run/${enc(runId)}">← run ${esc(runId)}</a></p><h1>Event ${row.seq} of <code>${esc(runId)}</code></h1>` +
      `<section class="panel"><dl><dt>type</dt><dd>${esc(row.event.body._tag)}</dd><dt>id</dt><dd>${esc(row.event.id)}</dd>` +
      `<dt>digest</dt><dd class="digest">${esc(row.digest)}</dd></dl>` +
      `<pre class="event">${esc(JSON.stringify(encoded, null, 2))}</pre></section>`,
    ""
  )

/** A plain message page (errors, refusals). */
export const messagePage = (title: string, message: string): string =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title></head><body><h1>${esc(title)}</h1><p>${esc(message)}</p></body></html>`
