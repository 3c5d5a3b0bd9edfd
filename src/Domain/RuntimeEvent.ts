// The RuntimeEvent wire format of docs/spec/01-ledger.md: an envelope of ids and a body tagged by `_tag`, decoded strictly.
// Also the committed row (`seq`, `end`, `digest`, event) and the canonical encoding of events.
import * as Either from "effect/Either"
import { describeParseError } from "./ParseIssues.js"
import * as Effect from "effect/Effect"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as CanonicalJson from "./CanonicalJson.js"
import * as Digest from "./Digest.js"
import { CallId, EventId, InvocationId, OperationId, RunId, SessionId, TurnId, WellFormedString } from "./Ids.js"
import { Stamped } from "./Stamped.js"
import {
  ContinuationSource,
  JsonValue,
  NonNegativeSafeInt,
  PositiveSafeInt,
  RecoveryMode,
  SourceHighWater,
  TerminalStatus,
  ToolBoundary
} from "./EventFields.js"

// The field schemas live in EventFields; this module, where they were first defined, still exports every one of them.
export * from "./EventFields.js"

/**
 * First event of an ordinary run.
 *
 * @since 0.1.0
 * @category models
 */
export class RunOpened extends Schema.TaggedClass<RunOpened>()("RunOpened", {
  toolBoundary: ToolBoundary
}) {}

/**
 * First event of a continuation run.
 *
 * @since 0.1.0
 * @category models
 */
export class ContinuationStarted extends Schema.TaggedClass<ContinuationStarted>()("ContinuationStarted", {
  toolBoundary: ToolBoundary,
  source: ContinuationSource,
  claimId: Schema.String
}) {}

/**
 * User input.
 *
 * @since 0.1.0
 * @category models
 */
export class UserMessage extends Schema.TaggedClass<UserMessage>()("UserMessage", {
  text: Schema.String
}) {}

/**
 * Model output.
 *
 * @since 0.1.0
 * @category models
 */
export class ModelText extends Schema.TaggedClass<ModelText>()("ModelText", {
  text: Schema.String
}) {}

/**
 * The provider's tool call.
 *
 * @since 0.1.0
 * @category models
 */
export class FunctionCall extends Schema.TaggedClass<FunctionCall>()("FunctionCall", {
  callId: CallId,
  name: WellFormedString,
  args: JsonValue
}) {}

/**
 * T1: every preflight passed; from here on the tool may have run.
 *
 * @since 0.1.0
 * @category models
 */
export class ToolDispatched extends Schema.TaggedClass<ToolDispatched>()("ToolDispatched", {
  callId: CallId,
  operationId: OperationId,
  argsHash: Digest.Digest,
  recoveryMode: RecoveryMode,
  idempotencyKey: Schema.optionalWith(Schema.String, { exact: true }),
  evidence: Schema.optionalWith(JsonValue, { exact: true })
}) {}

/**
 * The tool result; `operationId` is present when written by T2 or a recovery bundle.
 *
 * @since 0.1.0
 * @category models
 */
export class FunctionResponse extends Schema.TaggedClass<FunctionResponse>()("FunctionResponse", {
  callId: CallId,
  name: WellFormedString,
  result: JsonValue,
  isError: Schema.Boolean,
  operationId: Schema.optionalWith(OperationId, { exact: true }),
  idempotencyKey: Schema.optionalWith(Schema.String, { exact: true })
}) {}

/**
 * Opens a permission request; an open one blocks continuation.
 *
 * @since 0.1.0
 * @category models
 */
export class PermissionRequested extends Schema.TaggedClass<PermissionRequested>()("PermissionRequested", {
  requestId: Schema.String
}) {}

/**
 * Closes a permission request.
 *
 * @since 0.1.0
 * @category models
 */
export class PermissionResolved extends Schema.TaggedClass<PermissionResolved>()("PermissionResolved", {
  requestId: Schema.String,
  decision: Schema.Literal("allow", "deny", "timed_out")
}) {}

/**
 * Seals the run.
 *
 * @since 0.1.0
 * @category models
 */
export class RunTerminated extends Schema.TaggedClass<RunTerminated>()("RunTerminated", {
  status: TerminalStatus,
  failureClass: Schema.optionalWith(Schema.String, { exact: true }),
  abortSource: Schema.optionalWith(Schema.String, { exact: true })
}) {}

/**
 * Phase 3: what a reconciler observed about an operation.
 *
 * @since 0.1.0
 * @category models
 */
export class ReconcileObserved extends Schema.TaggedClass<ReconcileObserved>()("ReconcileObserved", {
  operationId: OperationId,
  callId: CallId,
  observation: Schema.Literal("matches_expected_state", "matches_prior_state", "diverged", "unreadable"),
  evidenceDigest: Digest.Digest
}) {}

/**
 * Who decided a recovery.
 *
 * @since 0.1.0
 * @category models
 */
export class RecoveryProvenance extends Schema.Class<RecoveryProvenance>("RecoveryProvenance")({
  kind: Schema.Literal("reconciler", "manual"),
  actor: Schema.String.pipe(Schema.minLength(1))
}) {}

/**
 * Phase 3: the decision that settles an unknown operation.
 *
 * @since 0.1.0
 * @category models
 */
export class RecoveryDecided extends Schema.TaggedClass<RecoveryDecided>()("RecoveryDecided", {
  operationId: OperationId,
  callId: CallId,
  disposition: Schema.Literal("completed", "parked"),
  reasonCode: Schema.String,
  evidenceEventIds: Schema.Array(Schema.String),
  outcomeEventId: Schema.optionalWith(Schema.String, { exact: true }),
  provenance: RecoveryProvenance
}) {}

/**
 * A diagnostic note; never shown to a model.
 *
 * @since 0.1.0
 * @category models
 */
export class Diagnostic extends Schema.TaggedClass<Diagnostic>()("Diagnostic", {
  message: Schema.String,
  code: Schema.optionalWith(Schema.String, { exact: true })
}) {}

/**
 * The body of a RuntimeEvent, tagged by `_tag`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const EventBody = Schema.Union(
  RunOpened,
  ContinuationStarted,
  UserMessage,
  ModelText,
  FunctionCall,
  ToolDispatched,
  FunctionResponse,
  PermissionRequested,
  PermissionResolved,
  RunTerminated,
  ReconcileObserved,
  RecoveryDecided,
  Diagnostic
)
/**
 * The body of a RuntimeEvent.
 *
 * @since 0.1.0
 * @category models
 */
export type EventBody = typeof EventBody.Type

/**
 * One ledger event: the envelope of ids, the caller's `ts`, the optional `hidden` flag, and the body.
 *
 * @since 0.1.0
 * @category models
 */
export class RuntimeEvent extends Schema.Class<RuntimeEvent>("RuntimeEvent")({
  id: EventId,
  sessionId: SessionId,
  invocationId: InvocationId,
  runId: RunId,
  turnId: TurnId,
  ts: NonNegativeSafeInt,
  hidden: Schema.optionalWith(Schema.Literal(true), { exact: true }),
  body: EventBody
}) {}

/**
 * The JSON shape of a RuntimeEvent on the wire.
 *
 * @since 0.1.0
 * @category models
 */
export type RuntimeEventEncoded = typeof RuntimeEvent.Encoded

/**
 * A committed row: the event plus its store-assigned `seq`, the `end` of its append group, and its chain `digest`.
 *
 * @since 0.1.0
 * @category models
 */
export class CommittedRow extends Schema.Class<CommittedRow>("CommittedRow")({
  digest: Digest.Digest,
  end: PositiveSafeInt,
  event: RuntimeEvent,
  seq: PositiveSafeInt
}) {}

// One plain constructor per class, sharing the class's prototype. Its instances are sized to their fields by V8's
// slack tracking, where an `Object.create` object keeps room for four more: it matters for a million ReplayRefs.
const shells = new Map<object, () => void>()

const shellOf = (prototype: object): (() => void) => {
  let shell = shells.get(prototype)
  if (shell === undefined) {
    shell = function() {}
    shell.prototype = prototype
    shells.set(prototype, shell)
  }
  return shell
}

/**
 * An instance of a Schema class from props the caller has already checked, in the class's field order with a
 * tagged class's `_tag` last: what `new Class(props, true)` builds (the class's prototype, the props as own
 * properties in that order), without the constructor's two copies and its default merging, which cost more than
 * the rest of reading a row. For hot paths only; test/FastDecode.test.ts checks that the two are indistinguishable.
 *
 * @since 0.1.0
 * @category models
 */
export const unsafeMake = <A extends object>(Class: { readonly prototype: A }, props: Omit<A, never>): A =>
  Object.assign(Reflect.construct(shellOf(Class.prototype), []), props)

// Plain constructors of the classes every read builds per event, with the fields in the order `unsafeMake` gives
// them (the class's, `_tag` last): the same objects without a props literal to build and copy per event.
// test/FastDecode.test.ts compares what the decoder builds with them against the Schema's instances.
type Construct<A> = new(...args: Array<never>) => A
const shell = <A>(prototype: A, f: (this: Record<string, unknown>, ...args: Array<never>) => void): Construct<A> => {
  ;(f as unknown as { prototype: unknown }).prototype = prototype
  return f as unknown as Construct<A>
}
// `hidden` is set only when true, before `body` (the class's field order): the two shapes a Schema instance has.
const EventShell = shell(
  RuntimeEvent.prototype,
  function(this: Record<string, unknown>, id: EventId, sessionId: SessionId, invocationId: InvocationId, runId: RunId, turnId: TurnId, ts: number, hidden: boolean, body: EventBody) {
    this.id = id
    this.sessionId = sessionId
    this.invocationId = invocationId
    this.runId = runId
    this.turnId = turnId
    this.ts = ts
    if (hidden) this.hidden = true
    this.body = body
  }
) as new(id: EventId, sessionId: SessionId, invocationId: InvocationId, runId: RunId, turnId: TurnId, ts: number, hidden: boolean, body: EventBody) => RuntimeEvent
const UserMessageShell = shell(UserMessage.prototype, function(this: Record<string, unknown>, text: string) {
  this.text = text
  this._tag = "UserMessage"
}) as new(text: string) => UserMessage
const ModelTextShell = shell(ModelText.prototype, function(this: Record<string, unknown>, text: string) {
  this.text = text
  this._tag = "ModelText"
}) as new(text: string) => ModelText
const FunctionCallShell = shell(FunctionCall.prototype, function(this: Record<string, unknown>, callId: CallId, name: string, args: unknown) {
  this.callId = callId
  this.name = name
  this.args = args
  this._tag = "FunctionCall"
}) as new(callId: CallId, name: string, args: unknown) => FunctionCall
const FunctionResponseShell = shell(
  FunctionResponse.prototype,
  function(this: Record<string, unknown>, callId: CallId, name: string, result: unknown, isError: boolean) {
    this.callId = callId
    this.name = name
    this.result = result
    this.isError = isError
    this._tag = "FunctionResponse"
  }
) as new(callId: CallId, name: string, result: unknown, isError: boolean) => FunctionResponse
const CommittedRowShell = shell(
  CommittedRow.prototype,
  function(this: Record<string, unknown>, digest: string, end: number, event: RuntimeEvent, seq: number) {
    this.digest = digest
    this.end = end
    this.event = event
    this.seq = seq
  }
) as new(digest: string, end: number, event: RuntimeEvent, seq: number) => CommittedRow

/**
 * A `CommittedRow` from fields the caller has already checked: what `unsafeMake(CommittedRow, { digest, end, event,
 * seq })` builds, without the props object. For the readers' hot loops.
 *
 * @since 0.1.0
 * @category models
 */
export const makeCommittedRow = (digest: string, end: number, event: RuntimeEvent, seq: number): CommittedRow =>
  new CommittedRowShell(digest, end, event, seq)

/**
 * What the planner needs of a committed row.
 *
 * @since 0.1.0
 * @category models
 */
export interface PrefixRow {
  readonly seq: number
  readonly digest: string
  readonly event: RuntimeEvent
}

const strict = { onExcessProperty: "error", errors: "first" } as const
const schemaDecodeEvent = Schema.decodeUnknownEither(RuntimeEvent, strict)
const encodeEventEither = Schema.encodeEither(RuntimeEvent)

// Effect's union parser reads a body's `_tag` with `String(value)`, which throws a TypeError for an object that has no
// callable `toString`/`valueOf` (JSON can spell one: `{"_tag":{"toString":0}}`). Such a value is not an event: it is
// refused as a parse error, like every other malformed value, never thrown.
const decodeEventEither = (u: unknown): Either.Either<RuntimeEvent, ParseResult.ParseError> => {
  try {
    return schemaDecodeEvent(u)
  } catch (cause) {
    const why = cause instanceof Error ? cause.message : String(cause)
    return Either.left(
      ParseResult.parseError(new ParseResult.Type(RuntimeEvent.ast, u, `the value cannot be read as an event (${why})`))
    )
  }
}

/**
 * Decodes an unknown value strictly as a RuntimeEvent (unknown keys rejected); a malformed value is a `ParseError`.
 *
 * @since 0.1.0
 * @category models
 */
export const decodeEvent = (u: unknown): Either.Either<RuntimeEvent, ParseResult.ParseError> => decodeEventEither(u)

/**
 * Decodes an unknown value strictly as a RuntimeEvent, as an Effect.
 *
 * @since 0.1.0
 * @category models
 */
export const decodeEventEffect = (u: unknown): Effect.Effect<RuntimeEvent, ParseResult.ParseError> =>
  Effect.suspend(() => decodeEventEither(u))

// The canonical text remembered on an event (see `canonicalText`): a private field stamped onto the event object
// (a base constructor that returns its argument lets a subclass's field initializer add the field to any object).
// Not a WeakMap: V8's scavenger keeps every WeakMap entry alive, so a WeakMap over a million read events would move
// all of them, and their texts, to the old generation. Private, so invisible to Equal, Hash, keys and JSON.

class CanonicalTextSlot extends Stamped {
  #text: string | undefined = undefined

  static get(event: object): string | undefined {
    return #text in event ? event.#text : undefined
  }

  static set(event: object, text: string): void {
    const slot = #text in event ? event : new CanonicalTextSlot(event)
    slot.#text = text
  }
}

const cachedText = (event: RuntimeEvent): string | undefined =>
  typeof event === "object" && event !== null ? CanonicalTextSlot.get(event) : undefined

const cacheText = (event: RuntimeEvent, text: string): void => {
  if (typeof event === "object" && event !== null) CanonicalTextSlot.set(event, text)
}

/**
 * The canonical text an event carries (decoded from a store, or encoded once before), without encoding it: `undefined`
 * when it carries none (then `canonicalText` encodes it).
 *
 * @since 0.1.0
 * @category models
 */
export const carriedCanonicalText = (event: RuntimeEvent): string | undefined => cachedText(event)

/**
 * Why an event has no canonical text.
 *
 * @since 0.1.0
 * @category models
 */
export type EventEncodingFailure =
  | CanonicalJson.CanonicalFailure
  | { readonly _tag: "SchemaInvalid"; readonly message: string }

/**
 * The canonical text of an event (what the digest chain hashes). Events decoded from a store
 * carry their verified text; others are encoded here, with the strictness checks and limits.
 *
 * @since 0.1.0
 * @category models
 */
export const canonicalText = (event: RuntimeEvent): Either.Either<string, EventEncodingFailure> => {
  const cached = cachedText(event)
  if (cached !== undefined) return Either.right(cached)
  const fast = fastCanonicalText(event)
  if (fast !== undefined) {
    cacheText(event, fast)
    return Either.right(fast)
  }
  let encoded: ReturnType<typeof encodeEventEither>
  try {
    encoded = encodeEventEither(event)
  } catch (error) {
    // Effect's Schema encode throws, rather than failing, on some values no valid event holds (a `_tag` that `String`
    // cannot convert: an object whose `toString` is not a function): a typed failure all the same, never a throw.
    return Either.left({ _tag: "SchemaInvalid", message: `the event cannot be encoded: ${error instanceof Error ? error.message : String(error)}` })
  }
  if (Either.isLeft(encoded)) {
    return Either.left({ _tag: "SchemaInvalid", message: describeParseError(encoded.left) })
  }
  const result = CanonicalJson.encode(encoded.right)
  return result._tag === "Ok" ? Either.right(result.text) : Either.left(result.failure)
}

/**
 * Why stored text is not a valid event.
 *
 * @since 0.1.0
 * @category models
 */
export type StoredEventFailure = {
  readonly reason: "invalid_json" | "non_canonical" | "schema_invalid"
  readonly message: string
}

/**
 * Parses, canonical-checks and strictly decodes an event's stored text. The decoded event
 * remembers its text, so the chain can hash it without encoding it again.
 *
 * @since 0.1.0
 * @category models
 */
export const decodeStoredText = (text: string): Either.Either<RuntimeEvent, StoredEventFailure> => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return Either.left({ reason: "invalid_json", message: "the stored event is not valid JSON" })
  }
  return decodeParsed(value, text)
}

/**
 * Canonical-checks and decodes an already-parsed value against the text it was parsed from.
 *
 * @since 0.1.0
 * @category models
 */
export const decodeParsed = (value: unknown, text: string): Either.Either<RuntimeEvent, StoredEventFailure> => {
  // The fast checks only ever confirm; on any doubt the full encoder and the Schema decide (and word the error).
  if (!CanonicalJson.isCanonicalText(text) && !CanonicalJson.isCanonicalTextOf(value, text)) {
    const canonical = CanonicalJson.encodeParsed(value)
    if (canonical._tag === "Fail") {
      return Either.left({ reason: "schema_invalid", message: canonical.failure.message })
    }
    if (canonical.text !== text) {
      return Either.left({ reason: "non_canonical", message: "the stored bytes differ from their canonical encoding" })
    }
  }
  const fast = decodeJsonEvent(value)
  if (fast !== undefined) {
    cacheText(fast, text)
    return Either.right(fast)
  }
  const decoded = decodeEventEither(value)
  if (Either.isLeft(decoded)) {
    return Either.left({
      reason: "schema_invalid",
      message: `the event fails the strict decode: ${describeParseError(decoded.left)}`
    })
  }
  cacheText(decoded.right, text)
  return Either.right(decoded.right)
}

// ---- The fast strict decoder ---------------------------------------------------------------------------------
// A hand-written validator for the closed set of event shapes, for values produced by `JSON.parse` (plain objects,
// arrays, strings, finite numbers, booleans, null). It accepts only what the strict Schema decode accepts (unknown
// keys refused, every brand and filter of Ids.ts and Digest.ts) and builds the same class instances, with their
// fields in the Schema's order; anything else, including a required `Unknown` field that is absent, it leaves to
// the Schema. test/FastDecode.test.ts checks both directions against the Schema. The events and bodies of the
// common shapes are built with `unsafeMake`; the rare ones with their constructors.

type JsonObject = { readonly [key: string]: unknown }

const hasOwn = Object.prototype.hasOwnProperty

const isObject = (u: unknown): u is JsonObject => typeof u === "object" && u !== null && !Array.isArray(u)

// Whether `o` has every required key and no key beyond the optional ones (the strict decode's excess check).
const exactKeys = (o: JsonObject, required: ReadonlyArray<string>, optional: ReadonlyArray<string>): boolean => {
  let expected = required.length
  for (let i = 0; i < required.length; i++) if (!hasOwn.call(o, required[i]!)) return false
  for (let i = 0; i < optional.length; i++) if (hasOwn.call(o, optional[i]!)) expected++
  let count = 0
  for (const _key in o) count++
  return count === expected
}

// The filter of `WellFormedString` (Ids.ts): no lone surrogate. A string without any surrogate skips the full test.
const ANY_SURROGATE = /[\ud800-\udfff]/
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/
/**
 * The regular-expression form of the `WellFormedString` filter (the reference the native check is tested against).
 *
 * @since 0.1.0
 * @category models
 */
export const isWellFormedByPattern = (u: unknown): u is string =>
  typeof u === "string" && !(ANY_SURROGATE.test(u) && LONE_SURROGATE.test(u))
// `String.prototype.isWellFormed` (Node >= 20) answers the same question natively, without scanning a one-byte
// string at all (it cannot hold a surrogate); the pattern where it is missing. test/FastDecode.test.ts compares them.
const nativeWellFormed = (String.prototype as { isWellFormed?: () => boolean }).isWellFormed
/**
 * The `WellFormedString` filter as the fast decoder applies it: a string with no lone surrogate.
 *
 * @since 0.1.0
 * @category models
 */
export const isWellFormedString: (u: unknown) => u is string = nativeWellFormed === undefined
  ? isWellFormedByPattern
  : (u: unknown): u is string => typeof u === "string" && nativeWellFormed.call(u)
const isWellFormed = isWellFormedString
const isId = (u: unknown): u is string => isWellFormed(u) && u.length >= 1
const isString = (u: unknown): u is string => typeof u === "string"
const isNonNegativeSafeInt = (u: unknown): u is number => typeof u === "number" && Number.isSafeInteger(u) && u >= 0
const OPERATION_ID = /^op_[0-9a-f]{32}$/
const DIGEST = /^sha256:[0-9a-f]{64}$/
const isOperationId = (u: unknown): u is string => typeof u === "string" && OPERATION_ID.test(u)
const isDigest = (u: unknown): u is string => typeof u === "string" && DIGEST.test(u)
const isToolBoundary = (u: unknown): u is ToolBoundary => u === "none" || u === "t1_after_preflight_v1"
const isRecoveryMode = (u: unknown): u is RecoveryMode =>
  u === "read_only" || u === "idempotent" || u === "reconcilable" || u === "never_auto_retry"
const isTerminalStatus = (u: unknown): u is TerminalStatus => u === "completed" || u === "failed" || u === "cancelled"
// An optional field: `undefined` when absent, its value when present and valid, `INVALID` otherwise.
const INVALID: unique symbol = Symbol("INVALID")
const optional = <A>(o: JsonObject, key: string, is: (u: unknown) => u is A): A | undefined | typeof INVALID => {
  if (!hasOwn.call(o, key)) return undefined
  const value = o[key]
  return is(value) ? value : INVALID
}

const NO_KEYS: ReadonlyArray<string> = []

// The ids every event of a run repeats: an equal string is swapped for the one the previous event kept, so the
// events of a long read share one copy of each (the parsed copies die young).
let lastSessionId = ""
let lastInvocationId = ""
let lastRunId = ""
let lastTurnId = ""
const EVENT_KEYS = ["id", "sessionId", "invocationId", "runId", "turnId", "ts", "body"]
const HIDDEN_KEY = ["hidden"]
const TEXT_KEYS = ["_tag", "text"]

const decodeSource = (u: unknown): ContinuationSource | undefined => {
  if (!isObject(u) || !exactKeys(u, ["sessionId", "invocationId", "runId", "turnId", "highWater"], NO_KEYS)) return undefined
  const hw = u.highWater
  if (
    !isId(u.sessionId) || !isId(u.invocationId) || !isId(u.runId) || !isId(u.turnId) || !isObject(hw) ||
    !exactKeys(hw, ["seq", "digest"], NO_KEYS) || !isNonNegativeSafeInt(hw.seq) || !isDigest(hw.digest)
  ) return undefined
  return new ContinuationSource({
    sessionId: SessionId.make(u.sessionId, true),
    invocationId: InvocationId.make(u.invocationId, true),
    runId: RunId.make(u.runId, true),
    turnId: TurnId.make(u.turnId, true),
    highWater: new SourceHighWater({ seq: hw.seq, digest: hw.digest }, true)
  }, true)
}

const decodeBody = (b: unknown): EventBody | undefined => {
  if (!isObject(b)) return undefined
  switch (b._tag) {
    case "UserMessage":
    case "ModelText": {
      if (!exactKeys(b, TEXT_KEYS, NO_KEYS) || !isString(b.text)) return undefined
      return b._tag === "UserMessage" ? new UserMessageShell(b.text) : new ModelTextShell(b.text)
    }
    case "FunctionCall": {
      if (!exactKeys(b, ["_tag", "callId", "name", "args"], NO_KEYS) || !isId(b.callId) || !isWellFormed(b.name)) return undefined
      return new FunctionCallShell(CallId.make(b.callId, true), b.name, b.args)
    }
    case "FunctionResponse": {
      const operationId = optional(b, "operationId", isOperationId)
      const idempotencyKey = optional(b, "idempotencyKey", isString)
      if (
        !exactKeys(b, ["_tag", "callId", "name", "result", "isError"], ["operationId", "idempotencyKey"]) ||
        !isId(b.callId) || !isWellFormed(b.name) || typeof b.isError !== "boolean" || operationId === INVALID ||
        idempotencyKey === INVALID
      ) return undefined
      const callId = CallId.make(b.callId, true)
      const _tag = b._tag
      const isError = b.isError
      const name = b.name
      const result = b.result
      if (operationId === undefined) {
        return idempotencyKey === undefined
          ? new FunctionResponseShell(callId, name, result, isError)
          : unsafeMake(FunctionResponse, { callId, name, result, isError, idempotencyKey, _tag })
      }
      const op = OperationId.make(operationId, true)
      return idempotencyKey === undefined
        ? unsafeMake(FunctionResponse, { callId, name, result, isError, operationId: op, _tag })
        : unsafeMake(FunctionResponse, { callId, name, result, isError, operationId: op, idempotencyKey, _tag })
    }
    case "RunOpened":
      return exactKeys(b, ["_tag", "toolBoundary"], NO_KEYS) && isToolBoundary(b.toolBoundary)
        ? new RunOpened({ toolBoundary: b.toolBoundary }, true)
        : undefined
    case "ContinuationStarted": {
      if (!exactKeys(b, ["_tag", "toolBoundary", "source", "claimId"], NO_KEYS) || !isToolBoundary(b.toolBoundary) || !isString(b.claimId)) {
        return undefined
      }
      const source = decodeSource(b.source)
      return source === undefined ? undefined : new ContinuationStarted({ toolBoundary: b.toolBoundary, source, claimId: b.claimId }, true)
    }
    case "ToolDispatched": {
      const idempotencyKey = optional(b, "idempotencyKey", isString)
      if (
        !exactKeys(b, ["_tag", "callId", "operationId", "argsHash", "recoveryMode"], ["idempotencyKey", "evidence"]) ||
        !isId(b.callId) || !isOperationId(b.operationId) || !isDigest(b.argsHash) || !isRecoveryMode(b.recoveryMode) ||
        idempotencyKey === INVALID
      ) return undefined
      // Every tool cycle writes one (and every read decodes one per dispatched call): `unsafeMake`, in the class's
      // field order, rather than the constructor's default merging.
      const props: { -readonly [K in keyof ToolDispatched]?: ToolDispatched[K] } = {
        callId: CallId.make(b.callId, true),
        operationId: OperationId.make(b.operationId, true),
        argsHash: b.argsHash,
        recoveryMode: b.recoveryMode
      }
      if (idempotencyKey !== undefined) props.idempotencyKey = idempotencyKey
      if (hasOwn.call(b, "evidence")) props.evidence = b.evidence
      props._tag = "ToolDispatched"
      return unsafeMake(ToolDispatched, props as ToolDispatched)
    }
    case "PermissionRequested":
      return exactKeys(b, ["_tag", "requestId"], NO_KEYS) && isString(b.requestId)
        ? new PermissionRequested({ requestId: b.requestId }, true)
        : undefined
    case "PermissionResolved": {
      const decision = b.decision
      return exactKeys(b, ["_tag", "requestId", "decision"], NO_KEYS) && isString(b.requestId) &&
          (decision === "allow" || decision === "deny" || decision === "timed_out")
        ? new PermissionResolved({ requestId: b.requestId, decision }, true)
        : undefined
    }
    case "RunTerminated": {
      const failureClass = optional(b, "failureClass", isString)
      const abortSource = optional(b, "abortSource", isString)
      if (
        !exactKeys(b, ["_tag", "status"], ["failureClass", "abortSource"]) || !isTerminalStatus(b.status) ||
        failureClass === INVALID || abortSource === INVALID
      ) return undefined
      return new RunTerminated({
        status: b.status,
        ...(failureClass !== undefined ? { failureClass } : {}),
        ...(abortSource !== undefined ? { abortSource } : {})
      }, true)
    }
    case "ReconcileObserved": {
      const observation = b.observation
      return exactKeys(b, ["_tag", "operationId", "callId", "observation", "evidenceDigest"], NO_KEYS) && isOperationId(b.operationId) &&
          isId(b.callId) &&
          (observation === "matches_expected_state" || observation === "matches_prior_state" || observation === "diverged" ||
            observation === "unreadable") && isDigest(b.evidenceDigest)
        ? new ReconcileObserved({
          operationId: OperationId.make(b.operationId, true),
          callId: CallId.make(b.callId, true),
          observation,
          evidenceDigest: b.evidenceDigest
        }, true)
        : undefined
    }
    case "RecoveryDecided": {
      const disposition = b.disposition
      const evidence = b.evidenceEventIds
      const provenance = b.provenance
      const outcomeEventId = optional(b, "outcomeEventId", isString)
      if (
        !exactKeys(b, ["_tag", "operationId", "callId", "disposition", "reasonCode", "evidenceEventIds", "provenance"], ["outcomeEventId"]) ||
        !isOperationId(b.operationId) || !isId(b.callId) || (disposition !== "completed" && disposition !== "parked") || !isString(b.reasonCode) ||
        !Array.isArray(evidence) || !evidence.every(isString) || outcomeEventId === INVALID || !isObject(provenance) ||
        !exactKeys(provenance, ["kind", "actor"], NO_KEYS) || (provenance.kind !== "reconciler" && provenance.kind !== "manual") ||
        !isString(provenance.actor) || provenance.actor.length === 0
      ) return undefined
      return new RecoveryDecided({
        operationId: OperationId.make(b.operationId, true),
        callId: CallId.make(b.callId, true),
        disposition,
        reasonCode: b.reasonCode,
        evidenceEventIds: evidence.slice(),
        ...(outcomeEventId !== undefined ? { outcomeEventId } : {}),
        provenance: new RecoveryProvenance({ kind: provenance.kind, actor: provenance.actor }, true)
      }, true)
    }
    case "Diagnostic": {
      const code = optional(b, "code", isString)
      return exactKeys(b, ["_tag", "message"], ["code"]) && isString(b.message) && code !== INVALID
        ? new Diagnostic({ message: b.message, ...(code !== undefined ? { code } : {}) }, true)
        : undefined
    }
    default:
      return undefined
  }
}

/**
 * Decodes a value produced by `JSON.parse` as a RuntimeEvent when it is certainly valid, exactly as the strict
 * Schema decode would; `undefined` means "not certain" (decode it with the Schema, which words the error).
 *
 * @since 0.1.0
 * @category models
 */
export const decodeJsonEvent = (u: unknown): RuntimeEvent | undefined => {
  if (
    !isObject(u) || !exactKeys(u, EVENT_KEYS, HIDDEN_KEY) || !isId(u.id) || !isId(u.sessionId) || !isId(u.invocationId) ||
    !isId(u.runId) || !isId(u.turnId) || !isNonNegativeSafeInt(u.ts) || (hasOwn.call(u, "hidden") && u.hidden !== true)
  ) return undefined
  const body = decodeBody(u.body)
  if (body === undefined) return undefined
  const id = EventId.make(u.id, true)
  const sessionId = SessionId.make(u.sessionId === lastSessionId ? lastSessionId : (lastSessionId = u.sessionId), true)
  const invocationId = InvocationId.make(u.invocationId === lastInvocationId ? lastInvocationId : (lastInvocationId = u.invocationId), true)
  const runId = RunId.make(u.runId === lastRunId ? lastRunId : (lastRunId = u.runId), true)
  const turnId = TurnId.make(u.turnId === lastTurnId ? lastTurnId : (lastTurnId = u.turnId), true)
  return new EventShell(id, sessionId, invocationId, runId, turnId, u.ts, u.hidden === true, body)
}

// ---- The fast encoder ----------------------------------------------------------------------------------------
// The Schema encode of an event that is an instance of exactly these classes is the plain copy of its own fields,
// level by level (the event, its body, and a body's nested classes). So: copy them, canonical-encode the copy with
// every strictness check (args, results and evidence are the caller's values), and let the fast strict decoder
// confirm that the copy is a valid event (every brand, filter and key). Anything else, including every failure,
// goes the Schema's way, which also words the error. test/FastDecode.test.ts checks both against each other.

const BODY_PROTOTYPES: ReadonlyMap<string, object> = new Map<string, object>([
  ["RunOpened", RunOpened.prototype],
  ["ContinuationStarted", ContinuationStarted.prototype],
  ["UserMessage", UserMessage.prototype],
  ["ModelText", ModelText.prototype],
  ["FunctionCall", FunctionCall.prototype],
  ["ToolDispatched", ToolDispatched.prototype],
  ["FunctionResponse", FunctionResponse.prototype],
  ["PermissionRequested", PermissionRequested.prototype],
  ["PermissionResolved", PermissionResolved.prototype],
  ["RunTerminated", RunTerminated.prototype],
  ["ReconcileObserved", ReconcileObserved.prototype],
  ["RecoveryDecided", RecoveryDecided.prototype],
  ["Diagnostic", Diagnostic.prototype]
])

// The own enumerable fields of an instance of exactly `prototype`, as a plain object; `undefined` otherwise.
const fieldsOf = (value: unknown, prototype: object | undefined): Record<string, unknown> | undefined => {
  if (typeof value !== "object" || value === null || prototype === undefined || Object.getPrototypeOf(value) !== prototype) {
    return undefined
  }
  const out: Record<string, unknown> = {}
  for (const key of Object.keys(value)) out[key] = (value as Record<string, unknown>)[key]
  return out
}

const plainEvent = (event: RuntimeEvent): Record<string, unknown> | undefined => {
  const out = fieldsOf(event, RuntimeEvent.prototype)
  if (out === undefined) return undefined
  const body = out.body
  const tag = typeof body === "object" && body !== null && "_tag" in body && typeof body._tag === "string" ? body._tag : ""
  const plainBody = fieldsOf(body, BODY_PROTOTYPES.get(tag))
  if (plainBody === undefined) return undefined
  if (tag === "ContinuationStarted") {
    const source = fieldsOf(plainBody.source, ContinuationSource.prototype)
    if (source === undefined) return undefined
    const highWater = fieldsOf(source.highWater, SourceHighWater.prototype)
    if (highWater === undefined) return undefined
    source.highWater = highWater
    plainBody.source = source
  } else if (tag === "RecoveryDecided") {
    const provenance = fieldsOf(plainBody.provenance, RecoveryProvenance.prototype)
    if (provenance === undefined) return undefined
    plainBody.provenance = provenance
  }
  out.body = plainBody
  return out
}

// The fields of a body that hold the caller's own values (every strictness check applies to them), by tag.
const PAYLOADS: Readonly<Record<string, ReadonlyArray<string>>> = {
  FunctionCall: ["args"],
  FunctionResponse: ["result"],
  ToolDispatched: ["evidence"],
  RecoveryDecided: ["evidenceEventIds"]
}

// The canonical text of an event when the fast path is certain of it; `undefined` leaves it to the Schema. The
// strict decoder vouches for every field but the payloads; those are encoded with the strictness checks, at their
// depth (event, body, payload), and spliced into the copy, which is then encoded without re-checking it.
const fastCanonicalText = (event: RuntimeEvent): string | undefined => {
  const plain = plainEvent(event)
  if (plain === undefined || decodeJsonEvent(plain) === undefined) return undefined
  const body = plain.body as Record<string, unknown>
  const payloads = PAYLOADS[body._tag as string]
  if (payloads !== undefined) {
    for (const key of payloads) {
      if (!hasOwn.call(body, key)) continue
      const encoded = CanonicalJson.encodeAt(body[key], 2)
      if (!(encoded instanceof CanonicalJson.Encoded)) return undefined
      body[key] = encoded
    }
  }
  const assembled = assembledText(plain, body)
  if (assembled !== undefined) return assembled
  const encoded = CanonicalJson.encodeAssembled(plain)
  return encoded._tag === "Ok" ? encoded.text : undefined
}

// The body keys, in canonical order (UTF-16 code units: `_tag` sorts first), of the bodies whose fields are all
// strings, booleans or payloads already encoded (`Encoded`): every body a tool cycle or a plain append writes.
const SORTED_BODY_KEYS: Readonly<Record<string, ReadonlyArray<string>>> = {
  UserMessage: ["_tag", "text"],
  ModelText: ["_tag", "text"],
  FunctionCall: ["_tag", "args", "callId", "name"],
  FunctionResponse: ["_tag", "callId", "idempotencyKey", "isError", "name", "operationId", "result"],
  ToolDispatched: ["_tag", "argsHash", "callId", "evidence", "idempotencyKey", "operationId", "recoveryMode"],
  RunOpened: ["_tag", "toolBoundary"],
  RunTerminated: ["_tag", "abortSource", "failureClass", "status"],
  PermissionRequested: ["_tag", "requestId"],
  PermissionResolved: ["_tag", "decision", "requestId"],
  Diagnostic: ["_tag", "code", "message"]
}

// One field of a checked copy: a string or boolean as `encodeAssembled` writes it, an `Encoded` payload as it is;
// `undefined` for anything else (that copy is left to `encodeAssembled`).
const fieldText = (value: unknown): string | undefined =>
  typeof value === "string"
    ? JSON.stringify(value)
    : typeof value === "boolean"
    ? (value ? "true" : "false")
    : value instanceof CanonicalJson.Encoded
    ? value.text
    : undefined

// The canonical text of a copy the fast strict decoder accepted (its payloads spliced in as `Encoded`), written in
// the canonical key order directly instead of sorting each object's keys: the same text `encodeAssembled` gives
// (test/FastDecode.test.ts compares them). `undefined` when the body is of another shape, or the text is long enough
// that the size limit must be measured (`encodeAssembled` decides both).
const assembledText = (plain: Record<string, unknown>, body: Record<string, unknown>): string | undefined => {
  const keys = SORTED_BODY_KEYS[body._tag as string]
  if (keys === undefined) return undefined
  let out = "{\"body\":{"
  let first = true
  let written = 0
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!
    if (!hasOwn.call(body, key)) continue
    const text = fieldText(body[key])
    if (text === undefined) return undefined
    out += (first ? "\"" : ",\"") + key + "\":" + text
    first = false
    written++
  }
  // Every key of the body written (the decoder allows no other; a class given a new field must be listed above).
  let count = 0
  for (const _key in body) count++
  if (count !== written) return undefined
  // The envelope's keys in canonical order; the decoder checked each (ids are strings, `ts` a safe integer >= 0).
  out += plain.hidden === true ? "},\"hidden\":true,\"id\":" : "},\"id\":"
  out += JSON.stringify(plain.id) + ",\"invocationId\":" + JSON.stringify(plain.invocationId) + ",\"runId\":" +
    JSON.stringify(plain.runId) + ",\"sessionId\":" + JSON.stringify(plain.sessionId) + ",\"ts\":" + String(plain.ts) +
    ",\"turnId\":" + JSON.stringify(plain.turnId) + "}"
  return out.length > CanonicalJson.MAX_BYTES / 3 ? undefined : out
}

/**
 * Remembers the canonical text of an event decoded from canonical-checked input (as the JSONL reader does
 * when it checked the whole line), so the chain can hash it without encoding it again.
 *
 * @since 0.1.0
 * @category models
 */
export const rememberCanonicalText = (event: RuntimeEvent, text: string): void => {
  cacheText(event, text)
}

/**
 * The JSONL line of a committed row: the canonical bytes of `{"digest","end","event","seq"}` and a newline.
 *
 * @since 0.1.0
 * @category models
 */
export const jsonlLine = (seq: number, end: number, digest: string, eventText: string): string =>
  `{"digest":"${digest}","end":${end},"event":${eventText},"seq":${seq}}\n`
