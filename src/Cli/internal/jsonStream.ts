// The text of `JSON.stringify(value, null, 2)`, produced in pieces: the CLI writes a large `--json` document (a plan
// of a million replay refs is ~100 MB of JSON) as it is made, never as one string. Byte-identical to the native call
// (toJSON with its key, skipped members, `null` array holes); below `NATIVE_DEPTH` each value is left to the native
// serialiser, re-indented (its newlines are all structural: strings escape theirs).

const NATIVE_DEPTH = 5

// The pieces made so far, not yet handed out.
interface Out {
  parts: Array<string>
  size: number
}

const emitTo = (out: Out, piece: string): void => {
  out.parts.push(piece)
  out.size += piece.length
}

// A leaf (or a value below NATIVE_DEPTH), its toJSON already applied: written by the native serialiser, re-indented.
// Returns false when JSON.stringify skips the value (undefined, a function, a symbol).
const leaf = (value: unknown, indent: string, out: Out): boolean => {
  // A string, finite or not number, boolean or null is written alone as it is as a member (no newline to re-indent):
  // a plan's million replay ids need no holder each.
  const type = typeof value
  if (type === "string" || type === "number" || type === "boolean" || value === null) {
    emitTo(out, JSON.stringify(value))
    return true
  }
  // A holder whose member is the value: the native serialiser then treats it exactly as a member.
  const text = JSON.stringify({ v: value }, null, 2)
  if (text === "{}") return false
  // `{\n  "v": <value at indent 2>\n}`: cut the wrapper, re-indent from 2 to `indent`.
  const inner = text.slice(9, text.length - 2)
  emitTo(out, indent.length === 2 ? inner : inner.replaceAll("\n  ", `\n${indent}`))
  return true
}

// At most this many array members are written by one native call (`leafRun`); fewer for small pieces (one per 64
// characters of a piece), so that a piece still follows the size asked for.
const LEAF_RUN = 4096

// Whether an array member is written by the native serialiser exactly as `container` writes it member by member: a
// string, finite or not number, boolean or null, or an object below NATIVE_DEPTH (not boxed) with no toJSON of its
// own (so no key is passed to one, and nothing is applied twice). Anything else (undefined, a function, a symbol, a
// bigint, a value with toJSON, a container above NATIVE_DEPTH) takes the member-by-member path.
const isPlainLeaf = (member: unknown, depth: number): boolean => {
  const type = typeof member
  if (type === "string" || type === "number" || type === "boolean" || member === null) return true
  return type === "object" && depth >= NATIVE_DEPTH &&
    typeof (member as { readonly toJSON?: unknown }).toJSON !== "function" &&
    !(member instanceof Number || member instanceof String || member instanceof Boolean)
}

// The end (exclusive) of the run of plain leaves of `array` from `start` (at most `most` of them); `start` when none.
const leafRunEnd = (array: ReadonlyArray<unknown>, start: number, depth: number, most: number): number => {
  const limit = Math.min(array.length, start + most)
  let end = start
  while (end < limit && Object.hasOwn(array, end) && isPlainLeaf(array[end], depth)) end++
  return end
}

// Members `start` to `end` of an array whose members are at `indent`, as `container` writes them one by one (each
// after `\n<indent>`, with a comma after the one before): the native text of the slice, its brackets cut. The slice
// is wrapped in as many arrays as it takes for the native serialiser to write its members at `indent` already (a
// wrapper's brackets and lines are cut with the slice's), so the text is never re-indented.
const leafRun = (array: ReadonlyArray<unknown>, start: number, end: number, indent: string): string => {
  const levels = (indent.length >> 1) - 1
  let wrapped: unknown = array.slice(start, end)
  for (let i = 0; i < levels; i++) wrapped = [wrapped]
  const text = JSON.stringify(wrapped, null, 2)
  // `[\n  [\n    [\n      a,\n      b\n    ]\n  ]\n]` (levels 2) -> `\n      a,\n      b`
  const lines = text.slice(openingLength(levels), text.length - closingLength(levels))
  return start === 0 ? lines : `,${lines}`
}

// The length of the text before the slice's first member when it is wrapped in `levels` arrays: each wrapper's `[`,
// a newline and its member's indentation, then the slice's own `[`.
const openingLength = (levels: number): number => levels * (levels + 3) + 1

// The length of the text after the slice's last member: the newline, indentation and `]` of the slice and of each
// wrapper.
const closingLength = (levels: number): number => levels * (levels + 3) + 2

const applyToJSON = (value: unknown, key: string): unknown => {
  if (value !== null && (typeof value === "object" || typeof value === "bigint")) {
    const toJSON = (value as { readonly toJSON?: unknown }).toJSON
    if (typeof toJSON === "function") return toJSON.call(value, key)
  }
  return value
}

const isContainer = (value: unknown, depth: number): value is object =>
  value !== null && typeof value === "object" && depth < NATIVE_DEPTH &&
  !(value instanceof Number || value instanceof String || value instanceof Boolean)

// Writes `value` (its toJSON applied) at `depth` with `indent`, yielding whenever `pieceSize` characters are ready.
// Returns false when the value is one JSON.stringify skips.
function* container(value: object, indent: string, depth: number, out: Out, pieceSize: number): Generator<void, boolean> {
  const inner = indent + "  "
  if (Array.isArray(value)) {
    if (value.length === 0) {
      emitTo(out, "[]")
      return true
    }
    emitTo(out, "[")
    for (let i = 0; i < value.length; i++) {
      // A run of plain leaves (a plan's replay ids, its operations below NATIVE_DEPTH) is written by one native call.
      const end = leafRunEnd(value, i, depth + 1, Math.max(1, Math.min(LEAF_RUN, pieceSize >> 6)))
      if (end > i) {
        emitTo(out, leafRun(value, i, end, inner))
        i = end - 1
        if (out.size >= pieceSize) yield
        continue
      }
      emitTo(out, i === 0 ? `\n${inner}` : `,\n${inner}`)
      const member = applyToJSON(value[i], String(i))
      const wrote = isContainer(member, depth + 1)
        ? yield* container(member, inner, depth + 1, out, pieceSize)
        : leaf(member, inner, out)
      if (!wrote) emitTo(out, "null")
      if (out.size >= pieceSize) yield
    }
    emitTo(out, `\n${indent}]`)
    return true
  }
  let first = true
  for (const k of Object.keys(value)) {
    const member = applyToJSON((value as Record<string, unknown>)[k], k)
    // A skipped member writes nothing, its key included: a container is never skipped, a leaf is known at once.
    if (isContainer(member, depth + 1)) {
      emitTo(out, `${first ? "{" : ","}\n${inner}${JSON.stringify(k)}: `)
      yield* container(member, inner, depth + 1, out, pieceSize)
      first = false
    } else {
      const mark = out.parts.length
      const size = out.size
      emitTo(out, `${first ? "{" : ","}\n${inner}${JSON.stringify(k)}: `)
      if (leaf(member, inner, out)) first = false
      else {
        out.parts.length = mark
        out.size = size
      }
    }
    if (out.size >= pieceSize) yield
  }
  emitTo(out, first ? "{}" : `\n${indent}}`)
  return true
}

/**
 * The text of `JSON.stringify(document, null, 2)` in consecutive pieces of about `pieceSize` characters or more
 * (the last may be shorter), for a document that is a tree of data. Nothing at all when the document serialises to
 * nothing (`JSON.stringify` would return `undefined`).
 *
 * @since 0.1.0
 * @category cli
 */
export function* stringifyInPieces(document: unknown, pieceSize: number): Generator<string, void> {
  const out: Out = { parts: [], size: 0 }
  const value = applyToJSON(document, "")
  if (isContainer(value, 0)) {
    const run = container(value, "", 0, out, pieceSize)
    for (let step = run.next(); step.done !== true; step = run.next()) {
      yield out.parts.join("")
      out.parts = []
      out.size = 0
    }
  } else {
    leafTop(value, out)
  }
  if (out.size > 0) yield out.parts.join("")
}

// A document that is itself a leaf: no member indent to cut.
const leafTop = (value: unknown, out: Out): void => {
  const text = JSON.stringify(value, null, 2) as string | undefined
  if (text !== undefined) emitTo(out, text)
}
