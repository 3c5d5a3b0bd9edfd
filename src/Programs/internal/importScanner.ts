// The byte-level scanner of an import line written as the store writes it: where the event's text lies inside the
// store-format wrapper, and the event's `id` and `runId` read off the text's end, without parsing the line.
import * as CanonicalJson from "../../Domain/CanonicalJson.js"
import type { ProvenEvent } from "../../Services/RuntimeEventStore.js"
import type { ImportFormat } from "./importLine.js"

// The decimal digits of t[from, to) are those of `n` (a positive safe integer) exactly: no sign, no leading zero.
const digitsAre = (t: string, from: number, to: number, n: number): boolean => {
  if (to - from < 1 || to - from > 16 || (t.charCodeAt(from) === 0x30 && to - from > 1)) return false
  let value = 0
  for (let i = from; i < to; i++) value = value * 10 + (t.charCodeAt(i) - 0x30)
  return value === n
}

/**
 * Where the event's text lies in a store-format line whose parsed members are `digest`, `end` and `seq`, when the line
 * is written exactly as the store writes it (`{"digest":"<digest>","end":<end>,"event":` + text + `,"seq":<seq>}`):
 * [from, to) in UTF-16 units, else `undefined`. The same answer as comparing the line's start and end with that head and
 * tail built as strings (property-tested), without building them. `digest` must be a digest's text
 * (`Digest.isDigestText`), `end` and `seq` positive safe integers. Exported for tests.
 *
 * @since 0.1.0
 * @category programs
 */
export const writtenSpan = (
  lineText: string,
  digest: string,
  end: number,
  seq: number
): readonly [number, number] | undefined => {
  const span = rowEventSpan(lineText)
  if (span === undefined) return undefined
  const [from, to] = span
  return lineText.startsWith(digest, 11) && digitsAre(lineText, 90, from - 9, end) &&
      digitsAre(lineText, to + 7, lineText.length - 1, seq)
    ? span
    : undefined
}

const isDigit = (c: number): boolean => c >= 0x30 && c <= 0x39

/**
 * Where the event's text lies in a line written as the store writes it, `{"digest":"sha256:<64>","end":<digits>,"event":`
 * + text + `,"seq":<digits>}`: [from, to) in UTF-16 units; `undefined` when the line is not of that shape. Nothing
 * but the position is read: the digest's 64 characters, the digits (`end` from 90 to `from - 9`, `seq` from `to + 7`
 * to the last character) and the text are the caller's to check.
 *
 * @since 0.1.0
 * @category programs
 */
export const rowEventSpan = (t: string): readonly [number, number] | undefined => {
  if (!t.startsWith(`{"digest":"sha256:`)) return undefined
  let i = 82
  if (!t.startsWith(`","end":`, i)) return undefined
  i += 8
  const digits = i
  while (i < t.length && isDigit(t.charCodeAt(i))) i++
  if (i === digits || !t.startsWith(`,"event":`, i)) return undefined
  const from = i + 9
  let j = t.length - 1
  if (t.charCodeAt(j) !== 0x7d) return undefined
  const last = --j
  while (j > from && isDigit(t.charCodeAt(j))) j--
  const to = j - 6
  if (j === last || to <= from || !t.startsWith(`,"seq":`, to)) return undefined
  return [from, to]
}

// The opening quote of the JSON string whose closing quote is at `close`: the first quote before it that no backslash
// escapes (inside a string a quote is always escaped; outside one, no backslash comes before a quote).
const openingQuote = (t: string, close: number): number => {
  let at = close - 1
  for (;;) {
    at = t.lastIndexOf(`"`, at)
    if (at < 0) return -1
    let backslashes = 0
    while (at - 1 - backslashes >= 0 && t.charCodeAt(at - 1 - backslashes) === 0x5c) backslashes++
    if (backslashes % 2 === 0) return at
    at--
  }
}

// A JSON string's value as a string of its own: never a slice of the line (a store keeps ids for as long as it is open,
// and a slice would keep its whole line alive with it).
const unquote = (quoted: string): string | undefined => {
  try {
    const value: unknown = JSON.parse(quoted)
    return typeof value === "string" ? value : undefined
  } catch {
    return undefined
  }
}

/**
 * The `id` and `runId` of a RuntimeEvent from its canonical text, read from the text's end without parsing it: with
 * sorted keys, the members after `body` are `hidden`, `id`, `invocationId`, `runId`, `sessionId`, `ts`, `turnId`, all
 * strings, numbers or `true`, so the members are walked back from the closing brace to `id`. For any canonical
 * RuntimeEvent text this is what `JSON.parse` reads (property-tested); on anything else it may answer `undefined` or
 * other names, which is why only a text the check pass proved is given to it (and the store's chain over the text
 * must still end where the check pass's did). Exported for tests.
 *
 * @since 0.1.0
 * @category programs
 */
export const eventNames = (text: string): { readonly id: string; readonly runId: string } | undefined => {
  let end = text.length - 1
  if (text.charCodeAt(end) !== 0x7d) return undefined
  end--
  let runId: string | undefined
  for (let member = 0; member < 8 && end > 0; member++) {
    // The value ends at `end`: a string, or a number or `true` (no colon in either).
    let start: number
    if (text.charCodeAt(end) === 0x22) start = openingQuote(text, end)
    else {
      start = end
      while (start > 0 && text.charCodeAt(start - 1) !== 0x3a) start--
    }
    if (start <= 1 || text.charCodeAt(start - 1) !== 0x3a || text.charCodeAt(start - 2) !== 0x22) return undefined
    const keyStart = text.lastIndexOf(`"`, start - 3)
    if (keyStart < 1 || text.charCodeAt(keyStart - 1) !== 0x2c) return undefined
    const key = text.slice(keyStart + 1, start - 2)
    if (key === "runId" || key === "id") {
      if (text.charCodeAt(start) !== 0x22) return undefined
      const value = unquote(text.slice(start, end + 1))
      if (value === undefined) return undefined
      if (key === "runId") runId = value
      else return runId === undefined ? undefined : { id: value, runId }
    } else if (key === "body") return undefined
    end = keyStart - 2
  }
  return undefined
}

// `rowEventSpan` over a line's bytes (the wrapper is ASCII, so its offsets are the same): [from, to) in bytes.
const rowEventSpanBytes = (b: Buffer): readonly [number, number] | undefined => {
  if (b.length < 100 || !bytesAt(b, 0, DIGEST_HEAD) || !bytesAt(b, 82, END_KEY)) return undefined
  let i = 90
  const digits = i
  while (i < b.length && isDigit(b[i]!)) i++
  if (i === digits || !bytesAt(b, i, EVENT_KEY)) return undefined
  const from = i + 9
  let j = b.length - 1
  if (b[j] !== 0x7d) return undefined
  const last = --j
  while (j > from && isDigit(b[j]!)) j--
  const to = j - 6
  if (j === last || to <= from || !bytesAt(b, to, SEQ_KEY)) return undefined
  return [from, to]
}

// Whether `b` holds `key` at `at` (no subarray made).
const bytesAt = (b: Buffer, at: number, key: Buffer): boolean => {
  if (at < 0 || at + key.length > b.length) return false
  for (let k = 0; k < key.length; k++) if (b[at + k] !== key[k]) return false
  return true
}
const DIGEST_HEAD = Buffer.from(`{"digest":"sha256:`)
const END_KEY = Buffer.from(`","end":`)
const EVENT_KEY = Buffer.from(`,"event":`)
const SEQ_KEY = Buffer.from(`,"seq":`)
const ID_KEY = Buffer.from(`,"id":"`)

/**
 * A line of the write pass that the check pass proved canonical as written, handed to `restoreProven` as its bytes
 * (`ProvenEvent.bytes`), which both stores chain and write as they are. `text` is decoded from them only if a store
 * asks for it. Nothing here is trusted: the bytes are the ones the store chains and writes in the same step, and a
 * run whose chain does not end where the check pass's did fails the whole import, writing nothing.
 */
class ProvenBytes implements ProvenEvent {
  constructor(readonly runId: string, readonly id: string, readonly bytes: Buffer) {}
  get text(): string {
    // Not UTF-8 (the line changed since the check): a text the chain cannot reach, so the import fails.
    return CanonicalJson.decodeUtf8(this.bytes) ?? ""
  }
}

/**
 * A proven line's run, id and event bytes, with no decode of the line: the event's bytes are the line (bare events) or the
 * span inside the store-format wrapper; its `id` and `runId` are read by `eventNames` off the text's end from its last
 * `,"id":"` on. In a canonical event text that is the top-level `id` member (only the members `invocationId`, `runId`,
 * `sessionId`, `ts`, `turnId` follow it, and inside a string every quote is escaped), so only that short end is
 * decoded. `undefined` when the line is not of that shape: it is then decoded and parsed as any other line. Exported
 * for tests.
 *
 * @since 0.1.0
 * @category programs
 */
export const provenBytes = (line: Buffer, format: ImportFormat): ProvenEvent | undefined => {
  let bytes = line
  if (format === "rows") {
    const span = rowEventSpanBytes(line)
    if (span === undefined) return undefined
    bytes = line.subarray(span[0], span[1])
  }
  const at = bytes.lastIndexOf(ID_KEY)
  if (at <= 0) return undefined
  const names = eventNames(bytes.toString("utf8", at))
  return names === undefined ? undefined : new ProvenBytes(names.runId, names.id, bytes)
}
