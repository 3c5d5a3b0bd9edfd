// The walk of a streamed restore (`restoreStream`) shared by the SQLite and JSONL stores: cuts the event stream into
// pieces of one run each, at most `size` events, following the plans' counts; the stores check and write each piece.
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Stream from "effect/Stream"
import { StoreWriteFailed } from "../../Domain/Errors.js"
import * as LedgerRules from "../../Domain/Rules/LedgerRules.js"
import type { RunIdentity } from "../../Domain/Rules/LedgerRules.js"
import type { RuntimeEvent } from "../../Domain/RuntimeEvent.js"
import type { ProvenEvent, ProvenRestorePlan, RestorePlan } from "../../Services/RuntimeEventStore.js"

/**
 * Events per piece of a streamed restore: bounded memory, and few statements per event.
 *
 * @since 0.1.0
 * @category constants
 */
export const PIECE_EVENTS = 2_000

/**
 * What a piece's walk reads of a plan: its run and how many events the stream holds for it.
 *
 * @since 0.1.0
 * @category models
 */
export interface PiecePlan {
  readonly runId: string
  readonly events: number
}

/**
 * What a piece's walk reads of an event: its run and id.
 *
 * @since 0.1.0
 * @category models
 */
export interface PieceEvent {
  readonly runId: string
  readonly id: string
}

/**
 * One piece: events of `plan`'s run, in seq order; `first` and `last` say where it lies in the run's group.
 *
 * @since 0.1.0
 * @category models
 */
export interface RestorePiece<P extends PiecePlan = RestorePlan, A extends PieceEvent = RuntimeEvent> {
  readonly plan: P
  readonly events: ReadonlyArray<A>
  readonly first: boolean
  readonly last: boolean
}

const mismatch = (runId: string, message: string) =>
  new StoreWriteFailed({
    runId,
    cause: "restore stream does not match its plans",
    message: `restore into run ${runId}: ${message}; nothing was written`
  })

/**
 * Feeds `events` to `onPiece` piece by piece. Refuses (`StoreWriteFailed`) plans that are empty or name a run twice,
 * an event of another run than its plan's, and a stream with more or fewer events than the plans count.
 *
 * @since 0.1.0
 * @category layers
 */
export const forEachPiece = <E, E2, R, P extends PiecePlan = RestorePlan, A extends PieceEvent = RuntimeEvent>(
  plans: ReadonlyArray<P>,
  events: Stream.Stream<A, E>,
  size: number,
  onPiece: (piece: RestorePiece<P, A>) => Effect.Effect<void, E2, R>
): Effect.Effect<void, E | E2 | StoreWriteFailed, R> =>
  Effect.suspend(() => {
    const named = new Set<string>()
    for (const plan of plans) {
      if (!Number.isSafeInteger(plan.events) || plan.events < 1) {
        return Effect.fail(mismatch(plan.runId, `a plan must count at least one event, not ${plan.events}`))
      }
      if (named.has(plan.runId)) return Effect.fail(mismatch(plan.runId, "the plans name the run twice"))
      named.add(plan.runId)
    }
    let at = 0
    let taken = 0
    let first = true
    let buffer: Array<A> = []
    const flush = (last: boolean) => {
      const piece: RestorePiece<P, A> = { plan: plans[at]!, events: buffer, first, last }
      buffer = []
      first = last
      if (last) {
        at++
        taken = 0
      }
      return onPiece(piece)
    }
    return Stream.runForEachChunk(events, (chunk) =>
      Effect.gen(function*() {
        for (const event of chunk) {
          const plan = plans[at]
          if (plan === undefined) return yield* mismatch(event.runId, `event ${event.id} is beyond the planned events`)
          if (event.runId !== plan.runId) {
            return yield* mismatch(plan.runId, `event ${event.id} of run ${event.runId} arrived inside its group`)
          }
          buffer.push(event)
          taken++
          if (taken === plan.events) yield* flush(true)
          else if (buffer.length >= size) yield* flush(false)
        }
      })).pipe(
        Effect.zipRight(Effect.suspend(() =>
          at < plans.length
            ? Effect.fail(mismatch(plans[at]!.runId, `the stream ended after ${taken} of its ${plans[at]!.events} events`))
            : Effect.void
        ))
      )
  })

/**
 * The `StoreWriteFailed` of a streamed restore whose run ends elsewhere than its caller computed.
 *
 * @since 0.1.0
 * @category layers
 */
export const restoreDiverged = (
  runId: string,
  expected: { readonly seq: number; readonly digest: string },
  reached: { readonly seq: number; readonly digest: string }
): StoreWriteFailed =>
  new StoreWriteFailed({
    runId,
    cause: "restore diverged",
    message: `restore into run ${runId}: the events reach seq ${reached.seq} digest ${reached.digest}, not seq ` +
      `${expected.seq} digest ${expected.digest} as their caller computed (did the source change while it was read?); ` +
      "nothing was written"
  })

/**
 * The run identity of a `restoreProven` plan whose tail holds together (the plan's own run, at its event count, with
 * the run's identity), else the `StoreWriteFailed` both stores give before writing anything for it.
 *
 * @since 0.1.0
 * @category layers
 */
export const provenPlanIdentity = (plan: ProvenRestorePlan): Either.Either<RunIdentity, StoreWriteFailed> => {
  const tail = plan.tail
  return tail.runId !== plan.runId || tail.seq !== plan.events || tail.identity === undefined
    ? Either.left(restoreDiverged(plan.runId, { seq: plan.events, digest: "(the plan's tail)" }, tail))
    : Either.right(tail.identity)
}

/**
 * Chains a `restoreProven` piece's events from `from` (the run's seq and digest before them) and lays their event rows
 * end to end in `params` (run, seq, group end `end`, id, digest, bytes): each event's bytes (`ProvenEvent.bytes`, else
 * its text's UTF-8) are the bytes chained and the bytes written. Returns the seq and digest reached. Shared by the
 * SQLite and PostgreSQL stores.
 *
 * @since 0.1.0
 * @category layers
 */
export const chainPiece = (
  runId: string,
  end: number,
  events: ReadonlyArray<ProvenEvent>,
  from: { readonly seq: number; readonly digest: string },
  params: Array<unknown>
): { readonly seq: number; readonly digest: string } => {
  let seq = from.seq
  let digest = from.digest
  for (const event of events) {
    seq++
    const bytes = event.bytes
    if (bytes !== undefined) {
      digest = LedgerRules.nextDigestOfBytes(digest, seq, bytes)
      params.push(runId, seq, end, event.id, digest, bytes)
    } else {
      digest = LedgerRules.nextDigest(digest, seq, event.text)
      params.push(runId, seq, end, event.id, digest, Buffer.from(event.text, "utf8"))
    }
  }
  return { seq, digest }
}
