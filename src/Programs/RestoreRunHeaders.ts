// `import`'s restore of a version 2 export's run headers and claims (docs/wire-format.md, "Export file"): checked
// against the store before any event is written, restored after the events, in the importing workspace's identity.
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as CanonicalJson from "../Domain/CanonicalJson.js"
import { ImportInvalid } from "../Domain/Errors.js"
import { ContinuationClaim, RunHeader } from "../Domain/RunHeader.js"
import { checkRestore, checkStatusChange, RunHeaderStore } from "../Services/RunHeaderStore.js"
import type { RestoredHeader } from "../Services/RunHeaderStore.js"
import { importPrepared } from "./ImportLedger.js"
import type { LedgerImport, PreparedImport } from "./ImportLedger.js"
import type { RecoverySection } from "./ImportRecoverySection.js"

/**
 * What the restore did: headers and claims written, and those the store already held (skipped).
 *
 * @since 0.1.0
 * @category models
 */
export interface HeadersRestored {
  readonly runHeaders: { readonly restored: number; readonly skipped: number }
  readonly claims: { readonly restored: number; readonly skipped: number }
}

/**
 * The records a restore will write (each with its line in the file), and what it found already stored.
 *
 * @since 0.1.0
 * @category models
 */
export interface HeaderRestorePlan {
  readonly pending: ReadonlyArray<{ readonly line: number; readonly record: RestoredHeader }>
  readonly skippedHeaders: number
  readonly skippedClaims: number
}

/**
 * Nothing to restore (a version 1 file, or an export with no header).
 *
 * @since 0.1.0
 * @category programs
 */
export const emptyPlan: HeaderRestorePlan = { pending: [], skippedHeaders: 0, skippedClaims: 0 }

const encodeHeader = Schema.encodeSync(RunHeader)
const encodeClaim = Schema.encodeSync(ContinuationClaim)
const text = (value: unknown): string => {
  const encoded = CanonicalJson.encode(value)
  return encoded._tag === "Ok" ? encoded.text : ""
}

// A header's fields that never change, without `workspaceId` (an imported header takes the importing workspace's).
const fixedPart = (header: RunHeader): string => {
  const { status: _s, statusReason: _r, updatedAt: _u, workspaceId: _w, ...fields } = encodeHeader(header)
  return text(fields)
}

// The stored header is the file's, or the file's moved on by status changes only.
const storedIsSameRun = (stored: RunHeader, file: RunHeader): boolean => {
  if (fixedPart(stored) !== fixedPart(file)) return false
  if (stored.status === file.status && stored.statusReason === file.statusReason) return true
  return Either.isRight(checkStatusChange(file, stored.status, {
    at: stored.updatedAt,
    ...(stored.statusReason !== undefined ? { reason: stored.statusReason } : {})
  }))
}

const refusal = (file: string, line: number, runId: string, why: string, outcome = "nothing was imported") =>
  new ImportInvalid({
    file,
    line,
    runId,
    reason: "header_conflict",
    message: `${file}:${line}: header_conflict (run ${runId}): ${why}; ${outcome}`
  })

// After the events were written, a refusal of the headers (a writer created one meanwhile) says so.
const AFTER_EVENTS = "the events were imported, no header was: run the same import again once the other writer is done"

/**
 * Before any event is written: which of the section's headers and claims the store lacks, each checked against what
 * it holds. A header the store holds for the same run (the same fixed fields, its status the same or moved on) is
 * skipped with its claim, which the store must hold identically; any other stored header is `header_conflict`, as is
 * a claim the store's claims on its boundary refuse. Reads only.
 *
 * @since 0.1.0
 * @category programs
 */
export const planRestore = Effect.fn("RestoreRunHeaders.planRestore")(function*(file: string, section: RecoverySection) {
  const records = section.records()
  if (records.length === 0) return emptyPlan
  const headers = yield* RunHeaderStore
  const pending: Array<{ readonly line: number; readonly record: RestoredHeader }> = []
  let skippedHeaders = 0
  let skippedClaims = 0
  for (const entry of records) {
    const { claim, header } = entry.record
    const stored = yield* headers.get(header.runId)
    if (Option.isNone(stored)) {
      pending.push(entry)
      continue
    }
    if (!storedIsSameRun(stored.value, header)) {
      return yield* refusal(
        file,
        entry.line,
        header.runId,
        `the workspace already holds another header for run ${header.runId} (status ${stored.value.status}, created at ` +
          `${stored.value.createdAt}): import into an empty workspace, or one whose headers are the file's`
      )
    }
    skippedHeaders++
    if (claim !== undefined) {
      const held = (yield* headers.claimsAt(claim)).find((c) => c.claimId === claim.claimId)
      if (held === undefined || text(encodeClaim(held)) !== text(encodeClaim(claim))) {
        return yield* refusal(file, entry.line, header.runId, `the workspace holds run ${header.runId} without the claim ${claim.claimId} the file gives it`)
      }
      skippedClaims++
    }
  }
  // The claim rules against the store, read before any event is written (the store checks again as it writes).
  const known = new Map<string, RunHeader | undefined>()
  const atBoundary = new Map<string, ReadonlyArray<ContinuationClaim>>()
  const taken = new Set<string>()
  for (const { record } of pending) {
    known.set(record.header.runId, undefined)
    const claim = record.claim
    if (claim === undefined) continue
    const onBoundary = yield* headers.claimsAt(claim)
    atBoundary.set(`${claim.sourceRunId}\u0000${claim.sourceSeq}\u0000${claim.sourceDigest}`, onBoundary)
    for (const c of onBoundary) known.set(c.continuationRunId, Option.getOrUndefined(yield* headers.get(c.continuationRunId)))
    for (const c of yield* headers.claims(claim.sourceRunId)) taken.add(c.claimId)
  }
  const checked = checkRestore(pending.map((p) => p.record), {
    headerOf: (runId) => known.get(runId),
    claimsAt: (b) => atBoundary.get(`${b.sourceRunId}\u0000${b.sourceSeq}\u0000${b.sourceDigest}`) ?? [],
    claimIdTaken: (claimId) => taken.has(claimId)
  })
  if (Either.isLeft(checked)) {
    const runId = checked.left._tag === "RunHeaderExists" ? checked.left.runId : checked.left.sourceRunId
    const at = pending.find((p) => p.record.header.runId === runId || p.record.claim?.sourceRunId === runId) ?? pending[0]!
    return yield* refusal(file, at.line, at.record.header.runId, checked.left.message)
  }
  const plan: HeaderRestorePlan = { pending, skippedHeaders, skippedClaims }
  return plan
})

/**
 * Writes the planned headers and claims in one `RunHeaderStore.restore` (all or nothing), each header in the
 * importing workspace's identity `workspaceId`. A store that refuses them now (a writer created a header meanwhile) is
 * `header_conflict`.
 *
 * @since 0.1.0
 * @category programs
 */
export const restorePlanned = Effect.fn("RestoreRunHeaders.restorePlanned")(function*(
  file: string,
  plan: HeaderRestorePlan,
  workspaceId: string
) {
  const result: HeadersRestored = {
    runHeaders: { restored: plan.pending.length, skipped: plan.skippedHeaders },
    claims: { restored: plan.pending.filter((p) => p.record.claim !== undefined).length, skipped: plan.skippedClaims }
  }
  if (plan.pending.length === 0) return result
  const headers = yield* RunHeaderStore
  if (headers.restore === undefined) {
    return yield* Effect.dieMessage(`the ${headers.kind} run header store cannot restore headers`)
  }
  const records = plan.pending.map(({ record }) => ({
    header: new RunHeader({ ...record.header, workspaceId }),
    ...(record.claim !== undefined ? { claim: record.claim } : {})
  }))
  yield* headers.restore(records).pipe(
    Effect.catchTags({
      RunHeaderExists: (e) => Effect.fail(refusal(file, lineOf(plan, e.runId), e.runId, e.message, AFTER_EVENTS)),
      ClaimRefused: (e) => Effect.fail(refusal(file, lineOf(plan, e.sourceRunId), e.sourceRunId, e.message, AFTER_EVENTS)),
      ContinuationAlreadyExists: (e) => Effect.fail(refusal(file, lineOf(plan, e.sourceRunId), e.sourceRunId, e.message, AFTER_EVENTS))
    })
  )
  return result
})

const lineOf = (plan: HeaderRestorePlan, runId: string): number =>
  (plan.pending.find((p) => p.record.header.runId === runId || p.record.claim?.sourceRunId === runId) ?? plan.pending[0]!).line

/**
 * The whole `import` of a checked file with its recovery section (docs/wire-format.md, "Export file"): the headers
 * and claims are checked against the store first (a conflict writes nothing), then the events are imported
 * (`importPrepared`), then the headers restored in the identity `workspaceId` gives (read only when there is one to
 * restore).
 *
 * @since 0.1.0
 * @category programs
 */
export const importWithHeaders = <E, R>(prepared: PreparedImport, workspaceId: Effect.Effect<string, E, R>) =>
  Effect.gen(function*() {
    const plan = yield* planRestore(prepared.file, prepared.section)
    const ledger = yield* importPrepared(prepared)
    const restored = yield* restorePlanned(prepared.file, plan, plan.pending.length === 0 ? "" : yield* workspaceId)
    const result: LedgerImport & HeadersRestored = { ...ledger, ...restored }
    return result
  })
