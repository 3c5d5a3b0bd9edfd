// The args hash of a FunctionCall read from its event's canonical text, without encoding the args again (SQLite's
// derived-row checks and import's check pass).
import * as Digest from "./Digest.js"

// How the canonical text of every FunctionCall event begins (keys ascending: `body` first, `_tag` then `args`).
const CALL_PREFIX = '{"body":{"_tag":"FunctionCall","args":'
const CALL_ID_KEY = ',"callId":'
const NAME_KEY = ',"name":'

// The end (exclusive) of the JSON string that opens at `at` (a `"`), or -1.
const stringEnd = (text: string, at: number): number => {
  if (text.charCodeAt(at) !== 34) return -1
  for (let i = at + 1; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 92) i++
    else if (c === 34) return i + 1
  }
  return -1
}

// The end (exclusive) of the JSON value of canonical text (no whitespace) that starts at `at`, or -1.
const valueEnd = (text: string, at: number): number => {
  const first = text.charCodeAt(at)
  if (first === 34) return stringEnd(text, at)
  if (first === 123 || first === 91) {
    let depth = 0
    for (let i = at; i < text.length;) {
      const c = text.charCodeAt(i)
      if (c === 34) {
        i = stringEnd(text, i)
        if (i < 0) return -1
        continue
      }
      if (c === 123 || c === 91) depth++
      else if (c === 125 || c === 93) {
        depth--
        if (depth === 0) return i + 1
      }
      i++
    }
    return -1
  }
  let i = at
  while (i < text.length) {
    const c = text.charCodeAt(i)
    if (c === 44 || c === 125 || c === 93) break
    i++
  }
  return i > at ? i : -1
}

/**
 * The args hash of a `FunctionCall` event read from its verified canonical text: `sha256:` of
 * `{"args":<args>,"name":<name>}`, the two values' canonical texts cut from the event's (canonical encoding is
 * compositional: a value's text inside the event is its text alone). `undefined` when the text is not shaped as a
 * FunctionCall's (`LedgerRules.argsHash` then encodes the args itself).
 */
export const argsHashFromText = (text: string): string | undefined => {
  if (!text.startsWith(CALL_PREFIX)) return undefined
  const argsStart = CALL_PREFIX.length
  const argsEnd = valueEnd(text, argsStart)
  if (argsEnd <= argsStart || !text.startsWith(CALL_ID_KEY, argsEnd)) return undefined
  const callIdEnd = stringEnd(text, argsEnd + CALL_ID_KEY.length)
  if (callIdEnd < 0 || !text.startsWith(NAME_KEY, callIdEnd)) return undefined
  const nameStart = callIdEnd + NAME_KEY.length
  const nameEnd = stringEnd(text, nameStart)
  if (nameEnd < 0 || text.charCodeAt(nameEnd) !== 125) return undefined
  return Digest.ofText(`{"args":${text.slice(argsStart, argsEnd)},"name":${text.slice(nameStart, nameEnd)}}`)
}
