// One word for a POSIX shell (docs/cli.md "What the CLI prints"): every command the CLI, the console and a store's
// message print is quoted by this one function, so it types back to the same word on one line.

// What a terminal acts on or what breaks a line (as `escapeTerminal`): such a word is quoted `$'…'` with escapes.
const TERMINAL_UNSAFE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/

const ansiC = (word: string): string =>
  "$'" + word.replace(/[\\'\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g, (char) => {
    if (char === "\\" || char === "'") return `\\${char}`
    if (char === "\n") return "\\n"
    if (char === "\t") return "\\t"
    if (char === "\r") return "\\r"
    const code = char.charCodeAt(0)
    // `\xHH` is a byte in `$'…'`: only below 0x80 is it the same character; above, `\uHHHH` (its UTF-8).
    return code < 0x80 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`
  }) + "'"

/**
 * Quotes one word for a POSIX shell when it needs it: as it is when plain, in single quotes otherwise, and as
 * `$'…'` with escapes (bash, zsh, ksh, POSIX.1-2024 sh) when it holds a control character, a line or paragraph
 * separator or a bidi override, so the command stays on one line, types back to the same word, and never drives
 * the terminal it is printed on.
 *
 * @since 0.1.0
 * @category rules
 */
export const shellWord = (word: string): string =>
  /^[A-Za-z0-9_@%+=:,./-]+$/.test(word)
    ? word
    : TERMINAL_UNSAFE.test(word)
    ? ansiC(word)
    : `'${word.replace(/'/g, `'\\''`)}'`

