// Adds `@since` and `@category` to the doc comment of every exported declaration under src/ that lacks them.
// Usage: node scripts/doc-tags.mjs [repo] [--check] (repo: default the current folder). `--check` changes nothing and
// exits 1 when an export lacks a doc comment or either tag (test/DocTags.test.ts runs it so).
import ts from "typescript"
import { readFileSync, writeFileSync, readdirSync, statSync } from "node:fs"
import { join, relative } from "node:path"

const repo = process.argv[2] !== undefined && !process.argv[2].startsWith("--") ? process.argv[2] : process.cwd()
const check = process.argv.includes("--check")
const since = JSON.parse(readFileSync(join(repo, "package.json"), "utf8")).version
const files = []
const walk = (d) => { for (const f of readdirSync(d)) { const p = join(d, f); if (statSync(p).isDirectory()) walk(p); else if (p.endsWith(".ts")) files.push(p) } }
walk(join(repo, "src"))

const folderCategory = (rel) => {
  const parts = rel.split("/")
  const top = parts[1]
  if (parts.length === 2) return "entry points"
  if (top === "Domain") return parts[2] === "Rules" ? "rules" : "models"
  if (top === "Services") return "services"
  if (top === "Layers") return "layers"
  if (top === "Programs") return "programs"
  if (top === "Workspace") return "workspace"
  if (top === "Testing") return "testing"
  if (top === "Cli") return "cli"
  if (top === "Console") return "console"
  if (top === "Mcp") return "mcp"
  if (top === "Ai") return "ai"
  return "utils"
}

const categoryOf = (node, text, rel) => {
  const src = text.slice(node.getStart(), node.end)
  if (ts.isClassDeclaration(node)) {
    if (/extends\s+(Schema\.TaggedError|Data\.TaggedError|Schema\.TaggedErrorClass)/.test(src)) return "errors"
    if (/extends\s+Context\.Tag|extends\s+Effect\.Tag|extends\s+Context\.Reference/.test(src)) return "tags"
    if (/extends\s+Schema\.(Class|TaggedClass)/.test(src)) return "models"
  }
  if (ts.isInterfaceDeclaration(node) || ts.isTypeAliasDeclaration(node)) return "models"
  if (ts.isVariableStatement(node)) {
    const name = node.declarationList.declarations[0]?.name.getText() ?? ""
    if (/^layer/.test(name) || /:\s*Layer\.Layer</.test(src.split("=")[0])) return "layers"
    if (/^[A-Z0-9_]+$/.test(name)) return "constants"
    if (/=\s*(Schema\.|Context\.GenericTag)/.test(src)) return folderCategory(rel) === "models" ? "schemas" : folderCategory(rel)
  }
  if (ts.isFunctionDeclaration(node) && /^layer/.test(node.name?.getText() ?? "")) return "layers"
  return folderCategory(rel)
}

let missingDoc = []
let changed = 0
let lacking = 0
for (const file of files) {
  const rel = relative(repo, file)
  const text = readFileSync(file, "utf8")
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  const edits = []
  const seen = new Set()
  for (const st of sf.statements) {
    const mods = ts.canHaveModifiers(st) ? ts.getModifiers(st) : undefined
    if (!mods?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword)) continue
    if (ts.isExportDeclaration(st) || ts.isExportAssignment(st)) continue
    // An overloaded function: the doc comment is on its first signature.
    if (ts.isFunctionDeclaration(st) && st.name !== undefined) {
      if (seen.has(st.name.text)) continue
      seen.add(st.name.text)
    }
    const docs = st.jsDoc
    const doc = docs?.[docs.length - 1]
    const name = ts.isVariableStatement(st) ? st.declarationList.declarations.map((d) => d.name.getText()).join(",") : st.name?.getText()
    if (doc === undefined) { missingDoc.push(`${rel}: ${name}`); continue }
    const docText = text.slice(doc.pos, doc.end)
    const hasSince = /@since\b/.test(docText)
    const hasCat = /@category\b/.test(docText)
    if (hasSince && hasCat) continue
    lacking++
    const cat = categoryOf(st, text, rel)
    // indentation of the doc
    const lineStart = text.lastIndexOf("\n", doc.pos) + 1
    const indent = text.slice(lineStart, doc.pos).match(/^\s*/)[0]
    const tags = []
    if (!hasSince) tags.push(`@since ${since}`)
    if (!hasCat) tags.push(`@category ${cat}`)
    let replacement
    if (!docText.includes("\n")) {
      const body = docText.replace(/^\/\*\*\s?/, "").replace(/\s?\*\/$/, "")
      replacement = `/**\n${indent} * ${body}\n${indent} *\n${tags.map((t) => `${indent} * ${t}`).join("\n")}\n${indent} */`
    } else {
      const closing = docText.lastIndexOf("*/")
      let head = docText.slice(0, closing).replace(/\s*\*?\s*$/, "")
      replacement = `${head}\n${indent} *\n${tags.map((t) => `${indent} * ${t}`).join("\n")}\n${indent} */`
    }
    edits.push({ start: doc.pos, end: doc.end, replacement })
  }
  if (edits.length > 0 && !check) {
    let out = text
    for (const e of edits.sort((a, b) => b.start - a.start)) out = out.slice(0, e.start) + e.replacement + out.slice(e.end)
    writeFileSync(file, out)
    changed++
  }
}
console.log(`${lacking} exports lacked tags; ${changed} files changed; ${missingDoc.length} exports without a doc comment`)
if (missingDoc.length) console.log(missingDoc.slice(0, 40).join("\n"))
if (check && (lacking > 0 || missingDoc.length > 0)) process.exit(1)
