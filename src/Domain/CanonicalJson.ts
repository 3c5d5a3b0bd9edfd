// The canonical JSON encoding of docs/spec/01-ledger.md: sorted keys, no whitespace, ES2019 string escapes, `-0` as `0`.
// Strict JSON only, depth- and size-limited, and never recursive beyond the depth limit, so it cannot overflow the stack.

/**
 * Maximum JSON nesting depth of one event (containers; the event object itself is depth 1).
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_DEPTH = 256

/**
 * Maximum size of one event's canonical encoding, in UTF-8 bytes (16 MiB).
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_BYTES = 16 * 1024 * 1024

/**
 * Why a value has no canonical encoding.
 *
 * @since 0.1.0
 * @category models
 */
export type CanonicalFailure =
  | { readonly _tag: "TooDeep"; readonly message: string }
  | { readonly _tag: "TooLarge"; readonly bytes: number; readonly message: string }
  | { readonly _tag: "NotStrictJson"; readonly path: string; readonly message: string }

/**
 * The result of encoding: the canonical text, or why there is none.
 *
 * @since 0.1.0
 * @category models
 */
export type CanonicalResult =
  | { readonly _tag: "Ok"; readonly text: string }
  | { readonly _tag: "Fail"; readonly failure: CanonicalFailure }

class Refused {
  constructor(readonly failure: CanonicalFailure) {}
}

const notStrict = (path: string, what: string): Refused =>
  new Refused({ _tag: "NotStrictJson", path, message: `${what} at ${path || "$"} is not strict JSON` })

const ObjectProto = Object.prototype

// Keys in UTF-16 code-unit order (what `<` compares): an insertion sort for the few keys objects usually have,
// the built-in sort (the same order) beyond that.
const sortKeys = (keys: Array<string>): Array<string> => {
  const n = keys.length
  if (n > 16) return keys.sort()
  for (let i = 1; i < n; i++) {
    const key = keys[i]!
    let j = i - 1
    while (j >= 0 && keys[j]! > key) {
      keys[j + 1] = keys[j]!
      j--
    }
    keys[j + 1] = key
  }
  return keys
}

// `"key":` for a key: the few keys events repeat are escaped once and remembered (a bounded cache).
const KEY_CACHE_LIMIT = 1024
const quotedKeys = new Map<string, string>()
const quotedKey = (key: string): string => {
  let quoted = quotedKeys.get(key)
  if (quoted === undefined) {
    quoted = JSON.stringify(key) + ":"
    if (quotedKeys.size < KEY_CACHE_LIMIT && key.length <= 64) quotedKeys.set(key, quoted)
  }
  return quoted
}

const encodeValue = (value: unknown, depth: number, checked: boolean, path: string): string => {
  switch (typeof value) {
    case "string":
      return JSON.stringify(value)
    case "number":
      if (!Number.isFinite(value)) throw notStrict(path, String(value))
      return value === 0 ? "0" : JSON.stringify(value)
    case "boolean":
      return value ? "true" : "false"
    case "object": {
      if (value === null) return "null"
      if (depth >= MAX_DEPTH) {
        throw new Refused({ _tag: "TooDeep", message: `JSON nesting deeper than ${MAX_DEPTH} at ${path || "$"}` })
      }
      if (!checked && value instanceof Encoded) return value.text
      if (Array.isArray(value)) {
        const n = value.length
        if (n === 0) return "[]"
        let out = "["
        for (let i = 0; i < n; i++) {
          if (checked && !(i in value)) throw notStrict(`${path}[${i}]`, "a hole")
          if (i > 0) out += ","
          out += encodeValue(value[i], depth + 1, checked, checked ? `${path}[${i}]` : path)
        }
        return out + "]"
      }
      if (checked) {
        const proto = Object.getPrototypeOf(value)
        if (proto !== ObjectProto && proto !== null) throw notStrict(path, "a non-plain object")
        if (Object.getOwnPropertySymbols(value).length > 0) throw notStrict(path, "a symbol key")
      }
      const keys = sortKeys(Object.keys(value))
      let out = "{"
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i]!
        if (checked) {
          const d = Object.getOwnPropertyDescriptor(value, key)!
          if (d.get !== undefined || d.set !== undefined) throw notStrict(`${path}.${key}`, "an accessor")
        }
        if (i > 0) out += ","
        out += quotedKey(key) +
          encodeValue((value as Record<string, unknown>)[key], depth + 1, checked, checked ? `${path}.${key}` : path)
      }
      return out + "}"
    }
    default:
      throw notStrict(path, `a value of type ${typeof value}`)
  }
}

const finish = (text: string): CanonicalResult => {
  // UTF-8 length is at least the UTF-16 length (lone surrogates are escaped), so this check is a cheap upper bound.
  if (text.length > MAX_BYTES / 3) {
    const bytes = Buffer.byteLength(text, "utf8")
    if (bytes > MAX_BYTES) {
      return {
        _tag: "Fail",
        failure: { _tag: "TooLarge", bytes, message: `canonical encoding is ${bytes} bytes, over the ${MAX_BYTES}-byte limit` }
      }
    }
  }
  return { _tag: "Ok", text }
}

/**
 * Encodes a value supplied by a caller canonically, checking that it is strict JSON
 * (plain objects, no accessors, no holes, finite numbers) within the depth and size limits.
 *
 * @since 0.1.0
 * @category models
 */
export const encode = (value: unknown): CanonicalResult => {
  try {
    return finish(encodeValue(value, 0, true, ""))
  } catch (e) {
    if (e instanceof Refused) return { _tag: "Fail", failure: e.failure }
    if (e instanceof RangeError) return { _tag: "Fail", failure: { _tag: "TooLarge", bytes: -1, message: e.message } }
    throw e
  }
}

/**
 * Canonical text already made by `encodeAt`, which `encodeAssembled` splices in as it is.
 *
 * @since 0.1.0
 * @category models
 */
export class Encoded {
  constructor(readonly text: string) {}
}

/**
 * Encodes a caller's value, with every strictness check, as it will sit at `depth` inside a larger value (so the
 * depth limit counts from the top): the untrusted parts of a value that `encodeAssembled` then encodes.
 *
 * @since 0.1.0
 * @category models
 */
export const encodeAt = (value: unknown, depth: number): Encoded | CanonicalFailure => {
  try {
    return new Encoded(encodeValue(value, depth, true, ""))
  } catch (e) {
    if (e instanceof Refused) return e.failure
    if (e instanceof RangeError) return { _tag: "TooLarge", bytes: -1, message: e.message }
    throw e
  }
}

/**
 * Encodes a value the caller assembled itself from plain data objects, arrays and primitives (no accessors, holes
 * or symbols), with `Encoded` parts spliced in as they are: the strictness checks are skipped, the limits kept.
 *
 * @since 0.1.0
 * @category models
 */
export const encodeAssembled = (value: unknown): CanonicalResult => encodeParsed(value)

/**
 * Encodes a value produced by `JSON.parse` canonically. It skips the strictness checks that
 * parsed JSON always passes, but keeps the depth and size limits.
 *
 * @since 0.1.0
 * @category models
 */
export const encodeParsed = (value: unknown): CanonicalResult => {
  try {
    return finish(encodeValue(value, 0, false, ""))
  } catch (e) {
    if (e instanceof Refused) return { _tag: "Fail", failure: e.failure }
    if (e instanceof RangeError) return { _tag: "Fail", failure: { _tag: "TooLarge", bytes: -1, message: e.message } }
    throw e
  }
}

// Whether every object in a parsed value lists its keys in canonical order (UTF-16 code units) and no container
// sits deeper than the limit: then `JSON.stringify` writes exactly the canonical encoding (it escapes as ES2019,
// writes -0 as 0, and follows the key order; parsed JSON has no holes, accessors or non-finite numbers).
const sortedWithinLimit = (value: unknown, depth: number): boolean => {
  if (typeof value !== "object" || value === null) return true
  if (depth >= MAX_DEPTH) return false
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (!sortedWithinLimit(value[i], depth + 1)) return false
    return true
  }
  const keys = Object.keys(value)
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!
    if (i > 0 && !(keys[i - 1]! < key)) return false
    if (!sortedWithinLimit((value as Record<string, unknown>)[key], depth + 1)) return false
  }
  return true
}

/**
 * Whether `text` is certainly the canonical encoding of `value`, a value `JSON.parse` produced from it. A fast
 * check that only ever confirms: `false` means "not shown" (integer-like keys, deep or huge values), and the
 * caller decides with `encodeParsed`.
 *
 * @since 0.1.0
 * @category models
 */
export const isCanonicalTextOf = (value: unknown, text: string): boolean =>
  text.length <= MAX_BYTES / 3 && sortedWithinLimit(value, 0) && JSON.stringify(value) === text

// ---- The canonical-form scanner -------------------------------------------------------------------------------
// Reads JSON text once, left to right, and confirms that it is already in canonical form, without parsing it into a
// second value or building a second string: no whitespace, object keys strictly ascending by UTF-16 code units (so no
// duplicates), strings escaped exactly as `JSON.stringify` escapes them, numbers as integers it writes digit for
// digit, nesting within the limit. It assumes the text parses as JSON (the caller parsed it) and only ever confirms:
// anything it is not certain of (a fraction or exponent, a `\u` escape of a surrogate, a key with an escape, an
// ill-formed string, a deep or huge text) is "not shown", and the caller decides with the encoder.

const OBJECT = 1
const ARRAY = 2
// Per open container: its kind, and where the previous key of an object starts and ends in the text (-1: none yet).
const kinds = new Uint8Array(MAX_DEPTH + 1)
const keyStarts = new Int32Array(MAX_DEPTH + 1)
const keyEnds = new Int32Array(MAX_DEPTH + 1)

// Whether text[as, ae) < text[bs, be) by UTF-16 code units (what the encoder's key sort compares).
const rangeLess = (text: string, as: number, ae: number, bs: number, be: number): boolean => {
  const n = Math.min(ae - as, be - bs)
  for (let k = 0; k < n; k++) {
    const a = text.charCodeAt(as + k)
    const b = text.charCodeAt(bs + k)
    if (a !== b) return a < b
  }
  return ae - as < be - bs
}

const isLowerHex = (c: number): boolean => (c >= 48 && c <= 57) || (c >= 97 && c <= 102)
const hexValue = (c: number): number => (c <= 57 ? c - 48 : c - 87)

type WellFormedString = { isWellFormed?: () => boolean }

/**
 * Whether `text`, which `JSON.parse` accepts, is certainly canonical: the canonical encoding of the value it parses to.
 * A fast check that only ever confirms (never true for a non-canonical text); `false` means "not shown", and the
 * caller decides with `encodeParsed`. One pass over the text, no allocation. Never true for a text that holds more
 * than one value, so a caller may also pass a slice of a text that parses, believed to be one member's value.
 *
 * @since 0.1.0
 * @category models
 */
export const isCanonicalText = (text: string): boolean => {
  const n = text.length
  if (n > MAX_BYTES / 3) return false
  // Lone surrogates: `JSON.stringify` escapes them, so a raw one is never canonical (decoded UTF-8 has none).
  const wf = (text as WellFormedString).isWellFormed
  if (wf === undefined ? /[\ud800-\udfff]/.test(text) : !wf.call(text)) return false
  let depth = 0
  let expectKey = false
  // The next backslash at or after the scan position (-1: none left); strings without one are skipped by indexOf.
  let backslash = text.indexOf("\\")
  let i = 0
  while (i < n) {
    // One value, and nothing after it: a text that holds more (`{…},"k":{…}`, `1,2`) is never the encoding of one
    // value, even when it is a slice of a text that parses (a JSONL line's event member, cut out by position).
    if (depth === 0 && i > 0) return false
    const c = text.charCodeAt(i)
    if (c === 34) {
      // A string: [start, end) is its raw content.
      const start = i + 1
      let end = text.indexOf("\"", start)
      if (end < 0) return false
      if (backslash >= 0 && backslash < start) backslash = text.indexOf("\\", start)
      let escaped = false
      if (backslash >= 0 && backslash < end) {
        // A string with escapes: walked unit by unit from its first backslash to its real closing quote.
        escaped = true
        let k = backslash
        for (;;) {
          if (k >= n) return false
          const ch = text.charCodeAt(k)
          if (ch === 34) break
          if (ch !== 92) {
            k++
            continue
          }
          const e = text.charCodeAt(k + 1)
          if (e === 117) {
            // \u00xx, lowercase hex, only for a C0 control that has no short form.
            if (
              text.charCodeAt(k + 2) !== 48 || text.charCodeAt(k + 3) !== 48 || !isLowerHex(text.charCodeAt(k + 4)) ||
              !isLowerHex(text.charCodeAt(k + 5))
            ) return false
            const code = hexValue(text.charCodeAt(k + 4)) * 16 + hexValue(text.charCodeAt(k + 5))
            if (code >= 0x20 || code === 0x08 || code === 0x09 || code === 0x0a || code === 0x0c || code === 0x0d) return false
            k += 6
          } else if (e === 34 || e === 92 || e === 98 || e === 102 || e === 110 || e === 114 || e === 116) {
            k += 2
          } else {
            return false
          }
        }
        end = k
        backslash = text.indexOf("\\", end + 1)
      }
      if (expectKey) {
        // Keys are compared as raw text, which equals their value only without escapes.
        if (escaped) return false
        if (keyStarts[depth]! >= 0 && !rangeLess(text, keyStarts[depth]!, keyEnds[depth]!, start, end)) return false
        keyStarts[depth] = start
        keyEnds[depth] = end
        expectKey = false
      }
      i = end + 1
    } else if (c === 123 || c === 91) {
      if (++depth >= MAX_DEPTH) return false
      kinds[depth] = c === 123 ? OBJECT : ARRAY
      keyStarts[depth] = -1
      expectKey = c === 123
      i++
    } else if (c === 125 || c === 93) {
      depth--
      expectKey = false
      i++
    } else if (c === 44) {
      expectKey = kinds[depth] === OBJECT
      i++
    } else if (c === 58) {
      i++
    } else if (c === 45 || (c >= 48 && c <= 57)) {
      // An integer of at most 15 digits is exact, and `JSON.stringify` writes it digit for digit; not "-0".
      const first = c === 45 ? i + 1 : i
      let k = first
      while (k < n) {
        const d = text.charCodeAt(k)
        if (d < 48 || d > 57) break
        k++
      }
      const digits = k - first
      if (digits === 0 || digits > 15 || (c === 45 && text.charCodeAt(first) === 48)) return false
      if (k < n) {
        const d = text.charCodeAt(k)
        if (d === 46 || d === 101 || d === 69) return false
      }
      i = k
    } else if (c === 116 || c === 110) {
      i += 4
    } else if (c === 102) {
      i += 5
    } else {
      return false
    }
  }
  return depth === 0
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

/**
 * Decodes UTF-8 bytes strictly: `undefined` when they are not valid UTF-8 (never repaired).
 *
 * @since 0.1.0
 * @category models
 */
export const decodeUtf8 = (bytes: Uint8Array): string | undefined => {
  try {
    return utf8.decode(bytes)
  } catch {
    return undefined
  }
}

/**
 * Parses JSON text: `undefined` when it is not valid JSON.
 *
 * @since 0.1.0
 * @category models
 */
export const parseJson = (text: string): { readonly value: unknown } | undefined => {
  try {
    return { value: JSON.parse(text) }
  } catch {
    return undefined
  }
}
