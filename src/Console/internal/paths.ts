// The console's addresses: a run id (any the ledger admits: `/`, `\`, `.`, `..`, spaces, quotes, unicode) as ONE path
// segment that no browser or URL parser normalises away, and back. Every link and form of the console is built here.

/**
 * A run id as one path segment: percent-encoded (`encodeURIComponent`, and `~` as `%7E`), so `/` and `\` never split
 * or turn the path; a segment of dots only (`.`, `..`: a URL parser would resolve them as dot segments) gets a
 * leading literal `~`, which no other encoded id starts with.
 *
 * @since 0.1.0
 * @category console
 */
export const idSegment = (id: string): string => {
  const encoded = encodeURIComponent(id).replace(/~/g, "%7E")
  return /^\.+$/.test(encoded) ? `~${encoded}` : encoded
}

/**
 * The id a segment of `idSegment` stands for; `undefined` when it is not one (bad percent-encoding, a stray `~`).
 *
 * @since 0.1.0
 * @category console
 */
export const decodeIdSegment = (segment: string): string | undefined => {
  const dotted = segment.startsWith("~")
  const body = dotted ? segment.slice(1) : segment
  if (dotted && !/^\.+$/.test(body)) return undefined
  if (body === "") return undefined
  try {
    return decodeURIComponent(body)
  } catch {
    return undefined
  }
}

/**
 * A run's page.
 *
 * @since 0.1.0
 * @category console
 */
export const runPath = (runId: string): string => `/run/${idSegment(runId)}`

/**
 * One event's page of a run.
 *
 * @since 0.1.0
 * @category console
 */
export const eventPath = (runId: string, seq: number): string => `${runPath(runId)}/event/${seq}`

/**
 * The reconcile action of a run (a POST).
 *
 * @since 0.1.0
 * @category console
 */
export const reconcilePath = (runId: string): string => `${runPath(runId)}/reconcile`

/**
 * The resolve action of one operation (a POST): the call id travels in the address, percent-encoded, never in a form
 * field (a browser rewrites the line breaks of form values on submit; an id holding one would no longer match).
 *
 * @since 0.1.0
 * @category console
 */
export const resolvePath = (runId: string, callId: string): string => `${runPath(runId)}/resolve?call=${encodeURIComponent(callId)}`

/**
 * The routes of the console's pages and actions, matched against the raw (still encoded) path.
 *
 * @since 0.1.0
 * @category constants
 */
export const ROUTES = {
  run: /^\/run\/([^/]+)$/,
  event: /^\/run\/([^/]+)\/event\/([1-9][0-9]{0,15})$/,
  action: /^\/run\/([^/]+)\/(reconcile|resolve)$/
} as const

/**
 * Whether a raw request path is one no page of the console links to and a browser never sends: a backslash or a NUL,
 * or a dot segment (`.`, `..`, also percent-encoded as `%2e`), the shapes of a traversal attempt.
 *
 * @since 0.1.0
 * @category console
 */
export const isSuspiciousPath = (rawPath: string): boolean =>
  /[\\\0]/.test(rawPath) || rawPath.split("/").some((segment) => /^(\.|%2e){1,2}$/i.test(segment))
