// Branded identities of the ledger (docs/spec/01-ledger.md, "Identities") and the normative OperationId derivation.
// Each id is a non-empty string, branded so that a RunId can never be passed where a TurnId is expected.
import { sha256Hex } from "./Digest.js"
import * as Schema from "effect/Schema"

// A lone surrogate: a high one not followed by a low one, or a low one not preceded by a high one.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

/**
 * A string with a UTF-8 form (no lone surrogates). Ids and tool names are hashed as UTF-8 (d(0), the OperationId) and
 * stored as SQLite TEXT, both of which would replace a lone surrogate; so such a string is refused, never repaired.
 *
 * @since 0.1.0
 * @category schemas
 */
export const WellFormedString = Schema.String.pipe(
  Schema.filter((s) => !LONE_SURROGATE.test(s), {
    message: () => "the string holds a lone surrogate (it has no UTF-8 form); ids and tool names must be well-formed Unicode"
  })
)

const IdString = WellFormedString.pipe(Schema.minLength(1))

/**
 * Which long-lived conversation owns the work.
 *
 * @since 0.1.0
 * @category models
 */
export const SessionId = IdString.pipe(Schema.brand("SessionId"))
/**
 * Which long-lived conversation owns the work.
 *
 * @since 0.1.0
 * @category models
 */
export type SessionId = typeof SessionId.Type

/**
 * Which user-visible round.
 *
 * @since 0.1.0
 * @category models
 */
export const TurnId = IdString.pipe(Schema.brand("TurnId"))
/**
 * Which user-visible round.
 *
 * @since 0.1.0
 * @category models
 */
export type TurnId = typeof TurnId.Type

/**
 * Which durable execution attempt.
 *
 * @since 0.1.0
 * @category models
 */
export const RunId = IdString.pipe(Schema.brand("RunId"))
/**
 * Which durable execution attempt.
 *
 * @since 0.1.0
 * @category models
 */
export type RunId = typeof RunId.Type

/**
 * Which model/tool flow; one invocation belongs to exactly one run.
 *
 * @since 0.1.0
 * @category models
 */
export const InvocationId = IdString.pipe(Schema.brand("InvocationId"))
/**
 * Which model/tool flow; one invocation belongs to exactly one run.
 *
 * @since 0.1.0
 * @category models
 */
export type InvocationId = typeof InvocationId.Type

/**
 * Which concrete tool side-effect attempt; derived from the invocation and the call id.
 *
 * @since 0.1.0
 * @category schemas
 */
export const OperationId = Schema.String.pipe(Schema.pattern(/^op_[0-9a-f]{32}$/), Schema.brand("OperationId"))
/**
 * Which concrete tool side-effect attempt; derived from the invocation and the call id.
 *
 * @since 0.1.0
 * @category models
 */
export type OperationId = typeof OperationId.Type

/**
 * The id of one event, unique across the whole store.
 *
 * @since 0.1.0
 * @category models
 */
export const EventId = IdString.pipe(Schema.brand("EventId"))
/**
 * The id of one event, unique across the whole store.
 *
 * @since 0.1.0
 * @category models
 */
export type EventId = typeof EventId.Type

/**
 * The provider's tool-call id; pairs a call with its response inside one run.
 *
 * @since 0.1.0
 * @category models
 */
export const CallId = IdString.pipe(Schema.brand("CallId"))
/**
 * The provider's tool-call id; pairs a call with its response inside one run.
 *
 * @since 0.1.0
 * @category models
 */
export type CallId = typeof CallId.Type

const TWO_32 = 2 ** 32

// The hashed bytes: u64be(len(invocationId)) ‖ UTF-8(invocationId) ‖ u64be(len(callId)) ‖ UTF-8(callId).
const operationInput = (invocationId: string, callId: string): Buffer => {
  const invLength = Buffer.byteLength(invocationId, "utf8")
  const callLength = Buffer.byteLength(callId, "utf8")
  const b = Buffer.allocUnsafe(16 + invLength + callLength)
  b.writeUInt32BE(Math.floor(invLength / TWO_32), 0)
  b.writeUInt32BE(invLength % TWO_32, 4)
  b.write(invocationId, 8, "utf8")
  b.writeUInt32BE(Math.floor(callLength / TWO_32), 8 + invLength)
  b.writeUInt32BE(callLength % TWO_32, 12 + invLength)
  b.write(callId, 16 + invLength, "utf8")
  return b
}

// The last derivation: a tool cycle derives the same id several times (runtime, T1 check, T2 check).
let lastInvocation = ""
let lastCall = ""
let lastOperation: OperationId | undefined

/**
 * Derives the OperationId: `"op_"` + the first 32 hex digits of
 * SHA-256(u64be(len(invocationId)) ‖ UTF-8(invocationId) ‖ u64be(len(callId)) ‖ UTF-8(callId)).
 *
 * @since 0.1.0
 * @category models
 */
export const deriveOperationId = (invocationId: string, callId: string): OperationId => {
  if (lastOperation !== undefined && invocationId === lastInvocation && callId === lastCall) return lastOperation
  const hex = sha256Hex(operationInput(invocationId, callId))
  const operationId = OperationId.make(`op_${hex.slice(0, 32)}`, true)
  lastInvocation = invocationId
  lastCall = callId
  lastOperation = operationId
  return operationId
}
