// The next command a person types for a blocked operation (spec 06: "a message says what happened and the next
// command to type"): the real `runtime-resume …` line, with the workspace path and the ids, quoted for a POSIX shell.

/** Quotes one word for a POSIX shell when it needs it. */
export const shellWord = (word: string): string => /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`

/** `runtime-resume resolve --run R --call C --edit '<result JSON>' WS` (with the choices named after it). */
export const resolveCommand = (workspace: string, runId: string, callId: string): string =>
  `runtime-resume resolve --run ${shellWord(runId)} --call ${shellWord(callId)} --edit '<result JSON>' ${shellWord(workspace)}` +
  "   (or --retry, or --abort)"

/** `runtime-resume reconcile --run R WS`. */
export const reconcileCommand = (workspace: string, runId: string, root?: string): string =>
  `runtime-resume reconcile --run ${shellWord(runId)}${root !== undefined ? ` --root ${shellWord(root)}` : ""} ${shellWord(workspace)}`

/**
 * The next command for an operation in a given state: a `reconcile` report reason (`needs_person`, `observe_failed`,
 * …), `parked:<reason code>`, or an operation status of a plan (`indeterminate`, `parked:<reason code>`), with `open`
 * meaning the run is not sealed. `undefined` when there is nothing to type (a turn a person abandoned).
 */
export const nextCommand = (workspace: string, runId: string, callId: string, state: string): string | undefined => {
  switch (state) {
    case "not_sealed":
    case "open":
      return `runtime-resume repair ${shellWord(workspace)}`
    case "unreadable":
      return `runtime-resume verify ${shellWord(workspace)}`
    case "observe_failed":
      return `${reconcileCommand(workspace, runId, "<the project folder>")}`
    case "indeterminate":
      return reconcileCommand(workspace, runId)
    case "parked:manual_abandon":
      return undefined
    case "needs_host_tool":
    case "awaiting_confirmation":
    case "reexecution_failed":
      return `start the host that has the tool, or: ${resolveCommand(workspace, runId, callId)}`
    default:
      return resolveCommand(workspace, runId, callId)
  }
}
