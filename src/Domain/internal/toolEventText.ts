// The canonical text (docs/spec/01-ledger.md) of the two events the tool runtime builds, T1's `ToolDispatched` and T2's
// response, written straight from their fields, each checked as the strict decoder checks it: no copy, no decode.
import * as CanonicalJson from "../CanonicalJson.js"
import { FunctionResponse, isWellFormedString, rememberCanonicalText, RuntimeEvent, ToolDispatched } from "../RuntimeEvent.js"

const OPERATION_ID = /^op_[0-9a-f]{32}$/
const DIGEST = /^sha256:[0-9a-f]{64}$/
const hasOwn = Object.prototype.hasOwnProperty

const isId = (u: unknown): u is string => isWellFormedString(u) && u.length >= 1
const isRecoveryMode = (u: unknown): boolean =>
  u === "read_only" || u === "idempotent" || u === "reconcilable" || u === "never_auto_retry"

// The number of own enumerable keys of an object.
const keyCount = (o: object): number => Object.keys(o).length

// `{"_tag":"ToolDispatched",…}` of a dispatch with no evidence, or `undefined` when any field is not as the decoder
// accepts it (the store's encoder then decides, and words any error).
const dispatchBodyText = (b: ToolDispatched): string | undefined => {
  const idempotencyKey = b.idempotencyKey
  if (
    !isId(b.callId) || typeof b.operationId !== "string" || !OPERATION_ID.test(b.operationId) ||
    typeof b.argsHash !== "string" || !DIGEST.test(b.argsHash) || !isRecoveryMode(b.recoveryMode) ||
    hasOwn.call(b, "evidence") || (hasOwn.call(b, "idempotencyKey") && !isWellFormedString(idempotencyKey)) ||
    keyCount(b) !== (idempotencyKey !== undefined ? 6 : 5)
  ) return undefined
  return "{\"_tag\":\"ToolDispatched\",\"argsHash\":\"" + b.argsHash + "\",\"callId\":" + JSON.stringify(b.callId) +
    (idempotencyKey !== undefined ? ",\"idempotencyKey\":" + JSON.stringify(idempotencyKey) : "") +
    ",\"operationId\":\"" + b.operationId + "\",\"recoveryMode\":\"" + b.recoveryMode + "\"}"
}

// `{"_tag":"FunctionResponse",…}`, its result encoded with every strictness check; `undefined` as above.
const responseBodyText = (b: FunctionResponse): string | undefined => {
  const operationId = b.operationId
  const idempotencyKey = b.idempotencyKey
  if (
    !isId(b.callId) || !isWellFormedString(b.name) || typeof b.isError !== "boolean" || !hasOwn.call(b, "result") ||
    (hasOwn.call(b, "operationId") && (typeof operationId !== "string" || !OPERATION_ID.test(operationId))) ||
    (hasOwn.call(b, "idempotencyKey") && !isWellFormedString(idempotencyKey)) ||
    keyCount(b) !== 5 + (operationId !== undefined ? 1 : 0) + (idempotencyKey !== undefined ? 1 : 0)
  ) return undefined
  const result = CanonicalJson.encodeAt(b.result, 2)
  if (!(result instanceof CanonicalJson.Encoded)) return undefined
  return "{\"_tag\":\"FunctionResponse\",\"callId\":" + JSON.stringify(b.callId) +
    (idempotencyKey !== undefined ? ",\"idempotencyKey\":" + JSON.stringify(idempotencyKey) : "") +
    ",\"isError\":" + (b.isError ? "true" : "false") + ",\"name\":" + JSON.stringify(b.name) +
    (operationId !== undefined ? ",\"operationId\":\"" + operationId + "\"" : "") + ",\"result\":" + result.text + "}"
}

/**
 * Remembers the canonical text of a `ToolDispatched` (with no evidence) or `FunctionResponse` event the tool runtime
 * built, written straight from its fields when each is exactly what the strict decoder accepts (an instance of
 * exactly the event and body class, the ids, `ts`, `hidden`, brands and payload checked): the text the store then
 * hashes and writes, without encoding the event again. Any other event, or any doubt, is left as it was: the store's
 * encoder then encodes it and refuses what it must, as before. test/ToolEventText.test.ts compares the two texts.
 *
 * @since 0.1.0
 * @category encoding
 */
export const rememberToolEventText = (event: RuntimeEvent): void => {
  if (Object.getPrototypeOf(event) !== RuntimeEvent.prototype) return
  const body = event.body
  const proto = Object.getPrototypeOf(body)
  const bodyText = proto === ToolDispatched.prototype
    ? dispatchBodyText(body as ToolDispatched)
    : proto === FunctionResponse.prototype
    ? responseBodyText(body as FunctionResponse)
    : undefined
  if (bodyText === undefined) return
  const hidden = event.hidden
  if (
    !isId(event.id) || !isId(event.sessionId) || !isId(event.invocationId) || !isId(event.runId) || !isId(event.turnId) ||
    !Number.isSafeInteger(event.ts) || event.ts < 0 || (hasOwn.call(event, "hidden") && hidden !== true) ||
    keyCount(event) !== (hidden === true ? 8 : 7)
  ) return
  const text = "{\"body\":" + bodyText + (hidden === true ? ",\"hidden\":true,\"id\":" : ",\"id\":") + JSON.stringify(event.id) +
    ",\"invocationId\":" + JSON.stringify(event.invocationId) + ",\"runId\":" + JSON.stringify(event.runId) +
    ",\"sessionId\":" + JSON.stringify(event.sessionId) + ",\"ts\":" + String(event.ts) + ",\"turnId\":" +
    JSON.stringify(event.turnId) + "}"
  // A text long enough that the size limit must be measured is left to the encoder (as its own fast path does).
  if (text.length > CanonicalJson.MAX_BYTES / 3) return
  rememberCanonicalText(event, text)
}
