// The MCP server of the MCP crash proofs (docs/mcp.md), written with the official SDK: a read-only, an idempotent and a
// destructive tool (appends to a file). Every call is logged (tool, phase, idempotency key) to a side file, fsynced.
// Usage: node --import tsx harness/McpServer.ts stdio <dir> [variant] | http <dir> [variant]   (http: listens on
// 127.0.0.1, port in <dir>/port; a variant lists `lookup` otherwise, as a server upgraded since a crash would).
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { appendFileSync, closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, writeFileSync } from "node:fs"
import { createServer } from "node:http"
import { join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import * as z from "zod"

/** The path of this server, for a client to spawn. */
export const MCP_SERVER_PATH = fileURLToPath(import.meta.url)
/** The server's `serverInfo`. */
export const SERVER_INFO = { name: "rr-test-server", version: "1.0.0" }
/** The log of every call (`{ tool, phase, key, pid }` per line) in the server's folder. */
export const CALL_LOG = "mcp-calls.log"
/** The file the destructive tool appends to. */
export const APPENDED_FILE = "appended.txt"
/** When this file exists, the next call consumes it, logs `working` and never answers (the test kills someone). */
export const HOLD_FILE = "hold-next-call"
/** The `_meta` key the idempotent tool reads (McpToolset.IDEMPOTENCY_KEY_META). */
const KEY_META = "runtime-resume/idempotency-key"

const fsynced = (file: string, line: string) => {
  const fd = openSync(file, "a", 0o600)
  try {
    appendFileSync(fd, line)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/** Reads the call log of a server folder. */
export const readCallLog = (dir: string): Array<{ tool: string; phase: string; key: string | null; pid: number }> =>
  existsSync(join(dir, CALL_LOG))
    ? readFileSync(join(dir, CALL_LOG), "utf8").split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l))
    : []

/**
 * How the server lists `lookup`: as the proofs expect, or changed since a crash (the catalog gate, docs/mcp.md):
 * `lookup-not-read-only` (its `readOnlyHint` now false), `lookup-redescribed` (its description only).
 */
export const ServerVariants = ["lookup-not-read-only", "lookup-redescribed"] as const
/** How the server lists `lookup`. */
export type ServerVariant = typeof ServerVariants[number]

/** The server: `lookup` (read-only), `set_value` (idempotent, keyed), `append_line` (destructive, the defaults). */
export const makeServer = (dir: string, variant?: ServerVariant) => {
  const server = new McpServer(SERVER_INFO)
  const log = (tool: string, phase: string, key: string | null) => fsynced(join(dir, CALL_LOG), `${JSON.stringify({ tool, phase, key, pid: process.pid })}\n`)
  const hold = async (tool: string, key: string | null) => {
    const file = join(dir, HOLD_FILE)
    let held = false
    try {
      renameSync(file, `${file}.taken`)
      held = true
    } catch {
      held = false
    }
    log(tool, held ? "working" : "start", key)
    if (held) await new Promise(() => {})
  }
  const keyOf = (extra: { readonly _meta?: Record<string, unknown> | undefined }): string | null =>
    typeof extra._meta?.[KEY_META] === "string" ? extra._meta[KEY_META] as string : null
  server.registerTool("lookup", {
    description: variant === "lookup-redescribed" ? "Reads a value by name, and now also counts the reads." : "Reads a value by name.",
    inputSchema: { name: z.string() },
    annotations: { readOnlyHint: variant !== "lookup-not-read-only", openWorldHint: false }
  }, async ({ name }, extra) => {
    await hold("lookup", keyOf(extra))
    log("lookup", "done", keyOf(extra))
    return { content: [{ type: "text", text: `value of ${name}` }] }
  })
  server.registerTool("set_value", {
    description: "Sets a value; the same idempotency key sets it once.",
    inputSchema: { name: z.string(), value: z.string() },
    annotations: { readOnlyHint: false, idempotentHint: true, destructiveHint: false, openWorldHint: false }
  }, async ({ name, value }, extra) => {
    await hold("set_value", keyOf(extra))
    log("set_value", "done", keyOf(extra))
    return { content: [{ type: "text", text: `${name} = ${value}` }] }
  })
  server.registerTool("append_line", {
    description: "Appends a line to a file (not idempotent, destructive).",
    inputSchema: { line: z.string() }
  }, async ({ line }, extra) => {
    await hold("append_line", keyOf(extra))
    fsynced(join(dir, APPENDED_FILE), `${line}\n`)
    log("append_line", "done", keyOf(extra))
    return { content: [{ type: "text", text: `appended ${line}` }] }
  })
  server.registerTool("refuse", {
    description: "Always answers with isError.",
    inputSchema: {},
    annotations: { readOnlyHint: true }
  }, async () => ({ content: [{ type: "text", text: "refused on purpose" }], isError: true }))
  return server
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === MCP_SERVER_PATH) {
  const [mode, dir, variantArg] = process.argv.slice(2)
  const variant = ServerVariants.find((v) => v === variantArg)
  if (dir === undefined || (mode !== "stdio" && mode !== "http") || (variantArg !== undefined && variant === undefined)) {
    process.stderr.write(`usage: McpServer.ts stdio|http <dir> [${ServerVariants.join("|")}]\n`)
    process.exit(2)
  }
  if (mode === "stdio") {
    await makeServer(dir, variant).connect(new StdioServerTransport())
  } else {
    // Stateless Streamable HTTP: one server and transport per request (the SDK's stateless example).
    const http = createServer(async (req, res) => {
      if (req.method !== "POST") {
        res.writeHead(405).end()
        return
      }
      const server = makeServer(dir, variant)
      const transport = new StreamableHTTPServerTransport({})
      res.on("close", () => {
        void transport.close()
        void server.close()
      })
      await server.connect(transport)
      await transport.handleRequest(req, res)
    })
    http.listen(0, "127.0.0.1", () => {
      const address = http.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      writeFileSync(join(dir, "port.tmp"), String(port))
      renameSync(join(dir, "port.tmp"), join(dir, "port"))
    })
  }
}
