// The code blocks of README.md, as `npm run test:consumer` runs them (scripts/test-consumer.mjs).
//
// Every fenced block is run as written unless the line just above it is one of these comments:
//   <!-- test:consumer skip: WHY -->          illustrative only (a synopsis, a server of your own): not run; say why
//   <!-- test:consumer excerpt: FILE -->      lines quoted from FILE (type-checked and run as a whole elsewhere):
//                                            each of its lines must appear in FILE, in order (// lines annotate)
//   <!-- test:consumer repo: WHY -->          a shell block run in the repository clone (it names the repo's files)
// `text` blocks are printed output, not code. `ts` blocks are type-checked strictly and run with plain node (compiled),
// twice in the same folder; a `console.log(…) // TEXT` line expects TEXT as a line of stdout. A `ts` block importing
// `@effect/vitest` is a test suite: it is run with vitest. `sh` blocks run one command a line (`\` continues a line),
// in the host project, each expecting the exit code its comment names (`# exit 1: …`), else 0.

/** The fenced blocks of a markdown text: line (1-based), language, code (the list indentation removed), marker. */
export const readmeBlocks = (text) => {
  const lines = text.split("\n")
  const blocks = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^( *)(`{3,})(\w*)\s*$/.exec(lines[i])
    if (open === null) continue
    const indent = open[1].length
    const close = new RegExp(`^ {0,${indent + 3}}${open[2]}\\s*$`)
    const body = []
    let j = i + 1
    for (; j < lines.length && !close.test(lines[j]); j++) body.push(lines[j].slice(Math.min(indent, lines[j].search(/\S|$/))))
    let k = i - 1
    while (k >= 0 && lines[k].trim() === "") k--
    const m = k >= 0 ? /^\s*<!--\s*test:consumer\s+(skip|excerpt|repo):\s*(.*?)\s*-->\s*$/.exec(lines[k]) : null
    blocks.push({ line: i + 1, lang: open[3], code: `${body.join("\n")}\n`, marker: m === null ? undefined : { kind: m[1], arg: m[2] } })
    i = j
  }
  return blocks
}

/** The commands of a shell block: `\` continuations joined, comments split off, the expected exit code from `exit N`. */
export const shellCommands = (code) => {
  const out = []
  let pending = ""
  for (const raw of code.split("\n")) {
    const line = pending + raw
    if (/\\\s*$/.test(line)) {
      pending = line.replace(/\\\s*$/, " ")
      continue
    }
    pending = ""
    const comment = /\s#\s(.*)$/.exec(line)
    const command = (comment === null ? line : line.slice(0, comment.index)).trim()
    if (command === "" || command.startsWith("#")) continue
    const exit = comment === null ? null : /\bexit (\d+)\b/.exec(comment[1])
    out.push({ command: command.replace(/\s+/g, " "), code: exit === null ? 0 : Number(exit[1]) })
  }
  return out
}

/** The lines a `ts` block expects on stdout: the text of each `console.log(…) // TEXT` comment. */
export const expectedOutput = (code) =>
  [...code.matchAll(/console\.log\(.*\)\s*\/\/\s*(.+?)\s*$/gm)].map((m) => m[1])

/**
 * Whether every line of `excerpt` appears in `file`, in order (leading and trailing spaces ignored); a whole-line
 * `//` comment of the excerpt annotates it and need not. Returns true, or the first line not found.
 */
export const isExcerptOf = (excerpt, file) => {
  const lines = file.split("\n").map((l) => l.trim())
  let at = 0
  for (const line of excerpt.split("\n").map((l) => l.trim()).filter((l) => l !== "" && !l.startsWith("//"))) {
    const found = lines.indexOf(line, at)
    if (found < 0) return line
    at = found + 1
  }
  return true
}
