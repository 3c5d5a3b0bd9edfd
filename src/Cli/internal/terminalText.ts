// Text from the ledger or from an argument never reaches a terminal raw (docs/cli.md, "What the CLI prints"): every
// value placed in a human-readable line goes through `escapeTerminal`, so control sequences (ESC, BEL, …) cannot
// drive the terminal and a newline inside a value can never start an output line of its own (a fake `next:` line).

// C0 controls, DEL, C1 controls, the Unicode line and paragraph separators, and the bidirectional overrides and
// isolates (which reorder what a person reads), plus the backslash itself so an escape in the output is unambiguous.
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069\\]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g
const HAS_UNSAFE = new RegExp(UNSAFE.source)

const NAMED: Readonly<Record<string, string>> = { "\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\" }

const escapeOne = (char: string): string => {
  const named = NAMED[char]
  if (named !== undefined) return named
  const code = char.charCodeAt(0)
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`
}

/**
 * A value made safe for one line of a terminal: control characters (C0, DEL, C1), line and paragraph separators,
 * bidirectional overrides and lone surrogates are shown escaped (`\n`, `\x1b`, `\u202e`), and a backslash as `\\`.
 * Everything else is kept as it is, so ordinary ids, paths and names read unchanged.
 *
 * @since 0.1.0
 * @category cli
 */
export const escapeTerminal = (value: string): string => HAS_UNSAFE.test(value) ? value.replace(UNSAFE, escapeOne) : value

/**
 * A tagged template for a human-readable line: the literal parts are the program's own text and are kept; every
 * interpolated value is converted with `String` and escaped with `escapeTerminal`.
 *
 * @example
 * human`run ${runId} is blocked`
 *
 * @since 0.1.0
 * @category cli
 */
export const human = (strings: TemplateStringsArray, ...values: ReadonlyArray<unknown>): string => {
  let out = strings[0]!
  for (let i = 0; i < values.length; i++) out += escapeTerminal(String(values[i])) + strings[i + 1]!
  return out
}
