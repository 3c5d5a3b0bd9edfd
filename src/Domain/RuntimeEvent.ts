// The RuntimeEvent wire format of spec 01: an envelope of ids and a body tagged by `_tag`, decoded strictly.
// Also the committed row (`seq`, `end`, `digest`, event) and the canonical encoding of events.
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as CanonicalJson from "./CanonicalJson.js"
import * as Digest from "./Digest.js"
import { CallId, EventId, InvocationId, OperationId, RunId, SessionId, TurnId, WellFormedString } from "./Ids.js"

/** Any strict-JSON value (the canonical encoder enforces strictness on append). */
export const JsonValue = Schema.Unknown
/** The tool-boundary protocol a run declares in its opener. */
export const ToolBoundary = Schema.Literal("none", "t1_after_preflight_v1")
/** The tool-boundary protocol a run declares in its opener. */
export type ToolBoundary = typeof ToolBoundary.Type
/** How a tool may be recovered when its outcome is unknown. */
export const RecoveryMode = Schema.Literal("read_only", "idempotent", "reconcilable", "never_auto_retry")
/** How a tool may be recovered when its outcome is unknown. */
export type RecoveryMode = typeof RecoveryMode.Type
/** The status a `RunTerminated` event seals a run with. */
export const TerminalStatus = Schema.Literal("completed", "failed", "cancelled")
/** The status a `RunTerminated` event seals a run with. */
export type TerminalStatus = typeof TerminalStatus.Type
/** A non-negative safe integer. */
export const NonNegativeSafeInt = Schema.Number.pipe(Schema.int(), Schema.nonNegative())
/** A positive safe integer (seqs are 1-based). */
export const PositiveSafeInt = Schema.Number.pipe(Schema.int(), Schema.positive())

/** The high-water a continuation starts from. */
export class SourceHighWater extends Schema.Class<SourceHighWater>("SourceHighWater")({
  seq: NonNegativeSafeInt,
  digest: Digest.Digest
}) {}

/** The run a continuation continues. */
export class ContinuationSource extends Schema.Class<ContinuationSource>("ContinuationSource")({
  sessionId: SessionId,
  invocationId: InvocationId,
  runId: RunId,
  turnId: TurnId,
  highWater: SourceHighWater
}) {}

/** First event of an ordinary run. */
export class RunOpened extends Schema.TaggedClass<RunOpened>()("RunOpened", {
  toolBoundary: ToolBoundary
}) {}

/** First event of a continuation run. */
export class ContinuationStarted extends Schema.TaggedClass<ContinuationStarted>()("ContinuationStarted", {
  toolBoundary: ToolBoundary,
  source: ContinuationSource,
  claimId: Schema.String
}) {}

/** User input. */
export class UserMessage extends Schema.TaggedClass<UserMessage>()("UserMessage", {
  text: Schema.String
}) {}

/** Model output. */
export class ModelText extends Schema.TaggedClass<ModelText>()("ModelText", {
  text: Schema.String
}) {}

/** The provider's tool call. */
export class FunctionCall extends Schema.TaggedClass<FunctionCall>()("FunctionCall", {
  callId: CallId,
  name: WellFormedString,
  args: JsonValue
}) {}

/** T1: every preflight passed; from here on the tool may have run. */
export class ToolDispatched extends Schema.TaggedClass<ToolDispatched>()("ToolDispatched", {
  callId: CallId,
  operationId: OperationId,
  argsHash: Digest.Digest,
  recoveryMode: RecoveryMode,
  idempotencyKey: Schema.optionalWith(Schema.String, { exact: true }),
  evidence: Schema.optionalWith(JsonValue, { exact: true })
}) {}

/** The tool result; `operationId` is present when written by T2 or a recovery bundle. */
export class FunctionResponse extends Schema.TaggedClass<FunctionResponse>()("FunctionResponse", {
  callId: CallId,
  name: WellFormedString,
  result: JsonValue,
  isError: Schema.Boolean,
  operationId: Schema.optionalWith(OperationId, { exact: true }),
  idempotencyKey: Schema.optionalWith(Schema.String, { exact: true })
}) {}

/** Opens a permission request; an open one blocks continuation. */
export class PermissionRequested extends Schema.TaggedClass<PermissionRequested>()("PermissionRequested", {
  requestId: Schema.String
}) {}

/** Closes a permission request. */
export class PermissionResolved extends Schema.TaggedClass<PermissionResolved>()("PermissionResolved", {
  requestId: Schema.String,
  decision: Schema.Literal("allow", "deny", "timed_out")
}) {}

/** Seals the run. */
export class RunTerminated extends Schema.TaggedClass<RunTerminated>()("RunTerminated", {
  status: TerminalStatus,
  failureClass: Schema.optionalWith(Schema.String, { exact: true }),
  abortSource: Schema.optionalWith(Schema.String, { exact: true })
}) {}

/** Phase 3: what a reconciler observed about an operation. */
export class ReconcileObserved extends Schema.TaggedClass<ReconcileObserved>()("ReconcileObserved", {
  operationId: OperationId,
  observation: Schema.Literal("matches_expected_state", "matches_prior_state", "diverged", "unreadable"),
  evidenceDigest: Schema.String
}) {}

/** Who decided a recovery. */
export class RecoveryProvenance extends Schema.Class<RecoveryProvenance>("RecoveryProvenance")({
  kind: Schema.Literal("reconciler", "manual"),
  actor: Schema.String
}) {}

/** Phase 3: the decision that settles an unknown operation. */
export class RecoveryDecided extends Schema.TaggedClass<RecoveryDecided>()("RecoveryDecided", {
  operationId: OperationId,
  disposition: Schema.Literal("completed", "parked"),
  reasonCode: Schema.String,
  evidenceEventIds: Schema.Array(Schema.String),
  outcomeEventId: Schema.optionalWith(Schema.String, { exact: true }),
  provenance: RecoveryProvenance
}) {}

/** A diagnostic note; never shown to a model. */
export class Diagnostic extends Schema.TaggedClass<Diagnostic>()("Diagnostic", {
  message: Schema.String,
  code: Schema.optionalWith(Schema.String, { exact: true })
}) {}

/** The body of a RuntimeEvent, tagged by `_tag`. */
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
/** The body of a RuntimeEvent. */
export type EventBody = typeof EventBody.Type

/** One ledger event: the envelope of ids, the caller's `ts`, the optional `hidden` flag, and the body. */
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

/** The JSON shape of a RuntimeEvent on the wire. */
export type RuntimeEventEncoded = typeof RuntimeEvent.Encoded

/** A committed row: the event plus its store-assigned `seq`, the `end` of its append group, and its chain `digest`. */
export class CommittedRow extends Schema.Class<CommittedRow>("CommittedRow")({
  digest: Digest.Digest,
  end: PositiveSafeInt,
  event: RuntimeEvent,
  seq: PositiveSafeInt
}) {}

/** What the planner needs of a committed row. */
export interface PrefixRow {
  readonly seq: number
  readonly digest: string
  readonly event: RuntimeEvent
}

const strict = { onExcessProperty: "error", errors: "first" } as const
const decodeEventEither = Schema.decodeUnknownEither(RuntimeEvent, strict)
const encodeEventEither = Schema.encodeEither(RuntimeEvent)

/** Decodes an unknown value strictly as a RuntimeEvent (unknown keys rejected). */
export const decodeEvent = (u: unknown): Either.Either<RuntimeEvent, ParseResult.ParseError> => decodeEventEither(u)

/** Decodes an unknown value strictly as a RuntimeEvent, as an Effect. */
export const decodeEventEffect = Schema.decodeUnknown(RuntimeEvent, strict)

const canonicalCache = new WeakMap<RuntimeEvent, string>()

/** Why an event has no canonical text. */
export type EventEncodingFailure =
  | CanonicalJson.CanonicalFailure
  | { readonly _tag: "SchemaInvalid"; readonly message: string }

/**
 * The canonical text of an event (what the digest chain hashes). Events decoded from a store
 * carry their verified text; others are encoded here, with the strictness checks and limits.
 */
export const canonicalText = (event: RuntimeEvent): Either.Either<string, EventEncodingFailure> => {
  const cached = canonicalCache.get(event)
  if (cached !== undefined) return Either.right(cached)
  const encoded = encodeEventEither(event)
  if (Either.isLeft(encoded)) {
    return Either.left({ _tag: "SchemaInvalid", message: ParseResult.TreeFormatter.formatErrorSync(encoded.left) })
  }
  const result = CanonicalJson.encode(encoded.right)
  return result._tag === "Ok" ? Either.right(result.text) : Either.left(result.failure)
}

/** Why stored text is not a valid event. */
export type StoredEventFailure = {
  readonly reason: "invalid_json" | "non_canonical" | "schema_invalid"
  readonly message: string
}

/**
 * Parses, canonical-checks and strictly decodes an event's stored text. The decoded event
 * remembers its text, so the chain can hash it without encoding it again.
 */
export const decodeStoredText = (text: string): Either.Either<RuntimeEvent, StoredEventFailure> => {
  const parsed = CanonicalJson.parseJson(text)
  if (parsed === undefined) return Either.left({ reason: "invalid_json", message: "the stored event is not valid JSON" })
  return decodeParsed(parsed.value, text)
}

/** Canonical-checks and decodes an already-parsed value against the text it was parsed from. */
export const decodeParsed = (value: unknown, text: string): Either.Either<RuntimeEvent, StoredEventFailure> => {
  const canonical = CanonicalJson.encodeParsed(value)
  if (canonical._tag === "Fail") {
    return Either.left({ reason: "schema_invalid", message: canonical.failure.message })
  }
  if (canonical.text !== text) {
    return Either.left({ reason: "non_canonical", message: "the stored bytes differ from their canonical encoding" })
  }
  const decoded = decodeEventEither(value)
  if (Either.isLeft(decoded)) {
    return Either.left({
      reason: "schema_invalid",
      message: `the event fails the strict decode: ${ParseResult.TreeFormatter.formatErrorSync(decoded.left)}`
    })
  }
  canonicalCache.set(decoded.right, text)
  return Either.right(decoded.right)
}

/**
 * Remembers the canonical text of an event decoded from canonical-checked input (as the JSONL reader does
 * when it checked the whole line), so the chain can hash it without encoding it again.
 */
export const rememberCanonicalText = (event: RuntimeEvent, text: string): void => {
  canonicalCache.set(event, text)
}

/** The JSONL line of a committed row: the canonical bytes of `{"digest","end","event","seq"}` and a newline. */
export const jsonlLine = (seq: number, end: number, digest: string, eventText: string): string =>
  `{"digest":"${digest}","end":${end},"event":${eventText},"seq":${seq}}\n`
