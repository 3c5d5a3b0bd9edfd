// A local stub of the OpenAI Responses API (POST /v1/responses) on 127.0.0.1 for the real @effect/ai-openai client:
// it enforces the API's tool-call rule — every function_call item followed by its function_call_output — with HTTP 400.
import * as Effect from "effect/Effect"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

/** One request the stub received: its body, and why it was rejected (400), if it was. */
export interface StubRequest {
  readonly body: { readonly input: ReadonlyArray<Record<string, unknown>> } & Record<string, unknown>
  readonly rejected?: string
}

/** One output item of a Responses API answer: assistant text, or a function call. */
export type StubOutput =
  | { readonly type: "text"; readonly text: string }
  | { readonly type: "call"; readonly callId: string; readonly name: string; readonly args: unknown }

/** The stub's model: the output of the n-th valid request (0-based), from its input items. */
export type StubScript = (input: ReadonlyArray<Record<string, unknown>>, n: number) => ReadonlyArray<StubOutput>

/** A started stub: its base URL (the client's `apiUrl`) and every request it received, in order. */
export interface OpenAiStub {
  readonly apiUrl: string
  readonly requests: () => ReadonlyArray<StubRequest>
}

/**
 * Why a Responses API input is invalid, or undefined: each `function_call` must have a non-empty `call_id` used by
 * no other call, and be followed (later in `input`) by a `function_call_output` of the same `call_id`; each output
 * must follow its call. The wording follows the API's own 400 (`No tool output found for function call <id>.`).
 */
export const invalidInput = (input: ReadonlyArray<Record<string, unknown>>): string | undefined => {
  const calls = new Set<string>()
  const answered = new Set<string>()
  for (const item of input) {
    if (item.type === "function_call") {
      const id = item.call_id
      if (typeof id !== "string" || id === "") return "a function_call without a call_id"
      if (calls.has(id)) return `Duplicate function call id ${id}.`
      calls.add(id)
    } else if (item.type === "function_call_output") {
      const id = item.call_id
      if (typeof id !== "string" || !calls.has(id)) return `No tool call found for function call output with call_id ${String(id)}.`
      if (answered.has(id)) return `Duplicate function call output for call_id ${id}.`
      answered.add(id)
    }
  }
  for (const id of calls) if (!answered.has(id)) return `No tool output found for function call ${id}.`
  return undefined
}

const responseOf = (n: number, model: unknown, outputs: ReadonlyArray<StubOutput>) => ({
  id: `resp_${n}`,
  object: "response",
  created_at: 1_700_000_000 + n,
  status: "completed",
  error: null,
  incomplete_details: null,
  instructions: null,
  metadata: null,
  temperature: null,
  top_p: null,
  model: typeof model === "string" ? model : "gpt-4o-mini",
  parallel_tool_calls: true,
  tool_choice: "auto",
  tools: [],
  output: outputs.map((o, i) =>
    o.type === "text"
      ? {
        type: "message",
        id: `msg_${n}_${i}`,
        role: "assistant",
        status: "completed",
        content: [{ type: "output_text", text: o.text, annotations: [] }]
      }
      : { type: "function_call", id: `fc_${n}_${i}`, call_id: o.callId, name: o.name, arguments: JSON.stringify(o.args), status: "completed" }
  )
})

const send = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json" })
  res.end(JSON.stringify(body))
}

const readBody = (req: IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    req.on("error", reject)
  })

/** Starts the stub on 127.0.0.1 (a free port) for the current scope; valid requests are answered by `script`. */
export const start = (script: StubScript) =>
  Effect.acquireRelease(
    Effect.async<{ readonly stub: OpenAiStub; readonly close: () => Promise<void> }>((resume) => {
      const requests: Array<StubRequest> = []
      let answered = 0
      const server = createServer((req, res) => {
        readBody(req).then((text) => {
          if (req.method !== "POST" || !(req.url ?? "").endsWith("/responses")) {
            return send(res, 404, { error: { message: `no route ${req.method} ${req.url}`, type: "invalid_request_error" } })
          }
          const body = JSON.parse(text) as StubRequest["body"]
          const input = Array.isArray(body.input) ? body.input : []
          const rejected = invalidInput(input)
          requests.push(rejected === undefined ? { body } : { body, rejected })
          if (rejected !== undefined) {
            return send(res, 400, { error: { message: rejected, type: "invalid_request_error", param: "input", code: null } })
          }
          send(res, 200, responseOf(answered, body.model, script(input, answered++)))
        }).catch((error) => send(res, 500, { error: { message: String(error), type: "server_error" } }))
      })
      server.listen(0, "127.0.0.1", () => {
        const port = (server.address() as AddressInfo).port
        resume(Effect.succeed({
          stub: { apiUrl: `http://127.0.0.1:${port}/v1`, requests: () => requests.slice() },
          close: () => new Promise<void>((done) => {
            server.close(() => done())
            server.closeAllConnections()
          })
        }))
      })
    }),
    (started) => Effect.promise(started.close)
  ).pipe(Effect.map((started) => started.stub))
