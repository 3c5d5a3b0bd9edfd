// The args hash of a FunctionCall read off its event's canonical text: the canonical encoding of `{"args","name"}` is
// made of two pieces of that text, so it need not be encoded again from the parsed value.
import * as Digest from "../Digest.js"

// A FunctionCall event's canonical text begins with its body (`body` sorts before every other envelope key), and the
// body with its `_tag`, then `args` (`_tag` < `args` < `callId` < `name` by UTF-16 code units).
const PREFIX = "{\"body\":{\"_tag\":\"FunctionCall\",\"args\":"
const CALL_ID = ",\"callId\":"
const NAME = ",\"name\":"

// The index just past the JSON string whose opening quote is at `i`, or -1. A quote ends the string unless an odd
// number of backslashes precedes it.
const skipString = (text: string, i: number): number => {
  if (text.charCodeAt(i) !== 34) return -1
  let from = i + 1
  for (;;) {
    const q = text.indexOf("\"", from)
    if (q < 0) return -1
    let b = q - 1
    while (text.charCodeAt(b) === 92) b--
    if ((q - 1 - b) % 2 === 0) return q + 1
    from = q + 1
  }
}

// The index just past the JSON value that starts at `i` (a container: past its closing bracket; a string: past its
// closing quote; a number or literal: the delimiter after it), or -1 when the text ends first.
const skipValue = (text: string, i: number): number => {
  const n = text.length
  let depth = 0
  while (i < n) {
    const c = text.charCodeAt(i)
    if (c === 34) {
      i = skipString(text, i)
      if (i < 0) return -1
      if (depth === 0) return i
    } else if (c === 123 || c === 91) {
      depth++
      i++
    } else if (c === 125 || c === 93) {
      if (depth === 0) return i
      i++
      if (--depth === 0) return i
    } else if (c === 44) {
      if (depth === 0) return i
      i++
    } else {
      i++
    }
  }
  return -1
}

/**
 * The `argsHash` of the FunctionCall whose event's canonical text is `text` (`sha256:` of the canonical
 * `{"args":…,"name":…}`), taken from the text's own args and name: the same value `LedgerRules.argsHash(name, args)`
 * gives for that event, without encoding its args again. `undefined` when the text is not shaped as a FunctionCall
 * event's canonical text (the caller then encodes). Only for a text known to be the event's canonical encoding.
 *
 * @since 0.1.0
 * @category rules
 */
export const argsHashOfEventText = (text: string): string | undefined => {
  if (text === lastText) return lastHash
  const input = argsHashInputOfEventText(text)
  const hash = input === undefined ? undefined : Digest.ofText(input)
  lastText = text
  lastHash = hash
  return hash
}

// The last answer: a tool cycle asks it twice of one call's text (the runtime for its dispatch, T1's check).
let lastText: string | undefined
let lastHash: string | undefined

/**
 * What `argsHashOfEventText` hashes: the canonical `{"args":…,"name":…}` of the FunctionCall whose event's canonical
 * text is `text`, cut from that text; `undefined` when the text is not shaped as a FunctionCall event's. For a caller
 * that hashes it its own way (the SQLite call index keeps the digest's raw bytes).
 *
 * @since 0.1.0
 * @category rules
 */
export const argsHashInputOfEventText = (text: string): string | undefined => {
  if (!text.startsWith(PREFIX)) return undefined
  const argsEnd = skipValue(text, PREFIX.length)
  if (argsEnd < 0 || !text.startsWith(CALL_ID, argsEnd)) return undefined
  const callIdEnd = skipString(text, argsEnd + CALL_ID.length)
  if (callIdEnd < 0 || !text.startsWith(NAME, callIdEnd)) return undefined
  const nameStart = callIdEnd + NAME.length
  const nameEnd = skipString(text, nameStart)
  if (nameEnd < 0 || text.charCodeAt(nameEnd) !== 125) return undefined
  return "{\"args\":" + text.slice(PREFIX.length, argsEnd) + NAME + text.slice(nameStart, nameEnd) + "}"
}
