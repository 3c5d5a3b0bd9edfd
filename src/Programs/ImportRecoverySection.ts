// The recovery section of a version 2 export as `import` reads it (docs/wire-format.md, "Export file"): the order of
// its records, the run headers and claims checked against the file's own events, and the records to restore.
import * as Either from "effect/Either"
import * as CanonicalJson from "../Domain/CanonicalJson.js"
import * as ExportFormat from "../Domain/ExportFormat.js"
import type { ImportInvalidReason } from "../Domain/Errors.js"
import type { ContinuationClaim, RunHeader } from "../Domain/RunHeader.js"
import { isTerminalStatus } from "../Domain/RunHeader.js"
import type { RuntimeEvent } from "../Domain/RuntimeEvent.js"
import { checkRestore } from "../Services/RunHeaderStore.js"
import type { RestoredHeader } from "../Services/RunHeaderStore.js"

/**
 * A refusal of the section: the reason, what is wrong, and where.
 *
 * @since 0.1.0
 * @category programs
 */
export class SectionRefusal {
  constructor(
    readonly reason: ImportInvalidReason,
    readonly detail: string,
    readonly where: { readonly line?: number; readonly runId?: string } = {}
  ) {}
}

/** What the section check keeps of one run's events: its opener and whether (and how) it is sealed. */
interface RunFacts {
  readonly opener: RuntimeEvent
  readonly line: number
  lastSeq: number
  sealed: boolean
}

/**
 * A header record and its line.
 *
 * @since 0.1.0
 * @category models
 */
export interface HeaderRecord {
  readonly line: number
  readonly header: RunHeader
}

/**
 * A claim record and its line.
 *
 * @since 0.1.0
 * @category models
 */
export interface ClaimRecord {
  readonly line: number
  readonly claim: ContinuationClaim
}

const canonical = (value: unknown): string => {
  const encoded = CanonicalJson.encode(value)
  return encoded._tag === "Ok" ? encoded.text : ""
}

/**
 * Reads the non-row records of an import file line by line, as the parser meets them, and the facts of each run's
 * events. A file whose first non-blank line is not a marker is version 1 (no section; records are then read as
 * events, and refused as such). Version 2: marker, store-format lines, run header records, claim records, trailer.
 *
 * @since 0.1.0
 * @category programs
 */
export class RecoverySection {
  /** 1 (no marker) or the marker's version; `undefined` before the first non-blank line. */
  version: number | undefined = undefined
  private phase: "rows" | "runHeader" | "continuationClaim" | "done" = "rows"
  private rows = 0
  private trailer: { readonly line: number; readonly counts: ExportFormat.ExportCounts } | undefined
  private readonly facts = new Map<string, RunFacts>()
  /** The header records, in file order. */
  readonly headers: Array<HeaderRecord> = []
  /** The claim records, in file order. */
  readonly claims: Array<ClaimRecord> = []

  /**
   * Whether `take` returns `false` for any store-format line now (a version 1 file, or a version 2 file before its
   * run headers), so a parser may skip handing it such a line.
   */
  rowsNext(): boolean {
    return this.version === 1 || (this.version === 2 && this.phase === "rows")
  }

  /**
   * Takes a parsed non-blank line. Returns `true` when the line was a record of the section (the parser then has
   * nothing more to do with it); throws a `SectionRefusal` for a record that is malformed or out of place.
   */
  take(line: number, value: unknown): boolean {
    // The hot path: every row of a version 1 file, and of a version 2 file before its headers, returns here.
    if (this.version === 1) return false
    if (this.phase === "rows" && this.version === 2 && typeof value === "object" && value !== null && Object.hasOwn(value, "event")) {
      return false
    }
    const kind = ExportFormat.recordKind(value)
    if (this.version === undefined) {
      if (kind !== "marker") {
        this.version = 1
        return false
      }
      const version = ExportFormat.markerVersion(value)
      if (Either.isLeft(version)) throw new SectionRefusal("record_invalid", `the first line is ${version.left}`, { line })
      if (version.right !== ExportFormat.EXPORT_VERSION) {
        throw new SectionRefusal(
          "version_unsupported",
          `the file is a version ${version.right} export; this runtime-resume reads versions 1 and ${ExportFormat.EXPORT_VERSION}: ` +
            "import it with the runtime-resume that exported it, or a newer one",
          { line }
        )
      }
      this.version = version.right
      return true
    }
    if (this.phase === "done") throw new SectionRefusal("record_invalid", "a line after the trailer (the trailer is the last line of an export)", { line })
    if (kind === undefined) {
      if (this.phase !== "rows") {
        throw new SectionRefusal("record_invalid", "a line that is not a run header, claim or trailer record after the run header records", { line })
      }
      return false
    }
    if (kind === "marker") throw new SectionRefusal("record_invalid", "a second marker line (the marker is the first line)", { line })
    const order = ["rows", "runHeader", "continuationClaim"]
    if (kind !== "trailer" && order.indexOf(kind) < order.indexOf(this.phase)) {
      throw new SectionRefusal("record_invalid", `a ${kind} record after the ${this.phase} records (the order is rows, run headers, claims, trailer)`, { line })
    }
    if (kind === "runHeader") {
      this.phase = "runHeader"
      const header = ExportFormat.decodeHeaderRecord(value)
      if (Either.isLeft(header)) throw new SectionRefusal("header_invalid", `not a run header record: ${header.left}`, { line })
      const earlier = this.headers.find((h) => h.header.runId === header.right.runId)
      if (earlier !== undefined) {
        throw new SectionRefusal("duplicate_header", `a second header of run ${header.right.runId} (the first is at line ${earlier.line})`, {
          line,
          runId: header.right.runId
        })
      }
      this.headers.push({ line, header: header.right })
    } else if (kind === "continuationClaim") {
      this.phase = "continuationClaim"
      const claim = ExportFormat.decodeClaimRecord(value)
      if (Either.isLeft(claim)) throw new SectionRefusal("claim_invalid", `not a continuation claim record: ${claim.left}`, { line })
      const earlier = this.claims.find((c) => c.claim.claimId === claim.right.claimId)
      if (earlier !== undefined) {
        throw new SectionRefusal("duplicate_claim", `a second claim ${claim.right.claimId} (the first is at line ${earlier.line})`, {
          line,
          runId: claim.right.continuationRunId
        })
      }
      this.claims.push({ line, claim: claim.right })
    } else {
      const counts = ExportFormat.decodeTrailerRecord(value)
      if (Either.isLeft(counts)) throw new SectionRefusal("record_invalid", `not a trailer record: ${counts.left}`, { line })
      this.phase = "done"
      this.trailer = { line, counts: counts.right }
    }
    return true
  }

  /** Takes an event line of the file (store-format or bare), in file order. */
  event(line: number, event: RuntimeEvent, seq: number | undefined): void {
    if (this.version === 2 && this.phase !== "rows") {
      throw new SectionRefusal("record_invalid", "an event line after the run header records (the order is rows, run headers, claims, trailer)", {
        line,
        runId: event.runId
      })
    }
    this.rows++
    let facts = this.facts.get(event.runId)
    if (facts === undefined) this.facts.set(event.runId, facts = { opener: event, line, lastSeq: 0, sealed: false })
    facts.lastSeq = seq ?? facts.lastSeq + 1
    if (event.body._tag === "RunTerminated") facts.sealed = true
  }

  /**
   * At the end of the file: a version 2 file ends with its trailer and holds what it counts (else `export_truncated`),
   * and every header and claim matches the file's events and the claim rules (`check`).
   */
  finish(): void {
    if (this.version !== 2) return
    if (this.trailer === undefined) {
      throw new SectionRefusal(
        "export_truncated",
        "the file has no trailer: it was cut short (a version 2 export always ends with its trailer); export again"
      )
    }
    const { counts, line } = this.trailer
    const found = { rows: this.rows, runHeaders: this.headers.length, claims: this.claims.length }
    if (found.rows !== counts.rows || found.runHeaders !== counts.runHeaders || found.claims !== counts.claims) {
      throw new SectionRefusal(
        "export_truncated",
        `the trailer counts ${counts.rows} row(s), ${counts.runHeaders} run header(s) and ${counts.claims} claim(s), the file holds ` +
          `${found.rows}, ${found.runHeaders} and ${found.claims}: lines were lost or added; export again`,
        { line }
      )
    }
    this.check()
  }

  // Every header and claim against the file's events, and the claims against each other.
  private check(): void {
    const headerOf = new Map(this.headers.map((h) => [h.header.runId as string, h]))
    for (const { header, line } of this.headers) {
      const runId = header.runId
      const refuse = (why: string): never => {
        throw new SectionRefusal("header_invalid", `the header of run ${runId} ${why}`, { line, runId })
      }
      const facts = this.facts.get(runId)
      if (facts === undefined) {
        if (!ExportFormat.headerAllowsNoEvents(header)) {
          refuse(`says ${header.status}${header.statusReason !== undefined ? ` (${header.statusReason})` : ""}, but the file holds no event of the run (unknown run)`)
        }
        if (header.claimId !== undefined && !this.claims.some((c) => c.claim.claimId === header.claimId)) {
          refuse(`names claim ${header.claimId}, which the file does not hold`)
        }
        continue
      }
      const opener = facts.opener
      for (const key of ["sessionId", "invocationId", "turnId"] as const) {
        if (header[key] !== opener[key]) refuse(`names ${key} ${header[key]}, but its events (line ${facts.line}) name ${opener[key]}`)
      }
      if (opener.body._tag === "ContinuationStarted") {
        const body = opener.body
        if (header.claimId !== body.claimId || header.parentRunId !== body.source.runId) {
          refuse(`must name the claim ${body.claimId} and parent run ${body.source.runId} its ContinuationStarted (line ${facts.line}) names`)
        }
        if (header.continuationSource === undefined || canonical(header.continuationSource) !== canonical(body.source)) {
          refuse(`must carry the continuation source its ContinuationStarted (line ${facts.line}) names`)
        }
      } else if (header.claimId !== undefined || header.parentRunId !== undefined || header.continuationSource !== undefined) {
        refuse(`names a claim or a parent run, but the run opens with ${opener.body._tag} (line ${facts.line}), not ContinuationStarted`)
      }
      if (isTerminalStatus(header.status) && !facts.sealed) {
        refuse(`says ${header.status}, but the run's events hold no RunTerminated (a terminal header follows its terminal event)`)
      }
      if (header.claimId !== undefined && !this.claims.some((c) => c.claim.claimId === header.claimId)) {
        refuse(`names claim ${header.claimId}, which the file does not hold`)
      }
    }
    for (const { claim, line } of this.claims) {
      const refuse = (why: string): never => {
        throw new SectionRefusal("claim_invalid", `claim ${claim.claimId} ${why}`, { line, runId: claim.continuationRunId })
      }
      const continuation = headerOf.get(claim.continuationRunId)
      if (continuation === undefined) refuse(`names continuation run ${claim.continuationRunId}, which has no header in the file`)
      const source = this.facts.get(claim.sourceRunId)
      if (source === undefined) refuse(`names source run ${claim.sourceRunId}, which has no event in the file`)
      else if (claim.sourceSeq > source.lastSeq) refuse(`is on seq ${claim.sourceSeq} of run ${claim.sourceRunId}, which ends at seq ${source.lastSeq} in the file`)
    }
    // The claims' own rules, among the file's records alone (the store checks them again against what it holds).
    const records = this.records()
    const checked = checkRestore(records.map((r) => r.record), { headerOf: () => undefined, claimsAt: () => [], claimIdTaken: () => false })
    if (Either.isLeft(checked)) {
      const at = records.find((r) => r.record.header.runId === (checked.left as { readonly runId?: string }).runId)
      throw new SectionRefusal(checked.left._tag === "RunHeaderExists" ? "duplicate_header" : "claim_invalid", checked.left.message, {
        ...(at !== undefined ? { line: at.line } : {}),
        ...((checked.left as { readonly runId?: string }).runId !== undefined ? { runId: (checked.left as { readonly runId: string }).runId } : {})
      })
    }
  }

  /**
   * The headers to restore in the order `RunHeaderStore.restore` takes them: headers without a claim first, then the
   * continuations' headers with their claims, first claims before the claims that supersede them; with the line of
   * each record's header.
   */
  records(): ReadonlyArray<{ readonly line: number; readonly record: RestoredHeader }> {
    const claimOf = new Map(this.claims.map((c) => [c.claim.continuationRunId as string, c.claim]))
    const plain = this.headers.filter((h) => !claimOf.has(h.header.runId))
    const continued = this.headers.filter((h) => claimOf.has(h.header.runId))
      .map((h) => ({ h, claim: claimOf.get(h.header.runId)! }))
      .sort((a, b) => (a.claim.supersedes === undefined ? 0 : 1) - (b.claim.supersedes === undefined ? 0 : 1))
    return [
      ...plain.map((h) => ({ line: h.line, record: { header: h.header } })),
      ...continued.map(({ claim, h }) => ({ line: h.line, record: { header: h.header, claim } }))
    ]
  }
}
