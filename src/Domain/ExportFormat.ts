// The export file's version 2 (docs/wire-format.md, "Export file"): a marker line, the store-format lines, the run
// headers and continuation claims a sealed run's recovery needs, and a trailer that counts them (a cut file is refused).
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { encode } from "./CanonicalJson.js"
import { ContinuationClaim, RunHeader } from "./RunHeader.js"

/**
 * The `format` of the marker line.
 *
 * @since 0.1.0
 * @category constants
 */
export const EXPORT_FORMAT = "runtime-resume.export"

/**
 * The version `export` writes. A file without a marker line is version 1 (store-format lines or bare events only).
 *
 * @since 0.1.0
 * @category constants
 */
export const EXPORT_VERSION = 2

/**
 * What the trailer counts: the file's store-format lines, run header records and claim records.
 *
 * @since 0.1.0
 * @category models
 */
export interface ExportCounts {
  readonly rows: number
  readonly runHeaders: number
  readonly claims: number
}

const Count = Schema.Int.pipe(Schema.nonNegative())

/**
 * The trailer's body.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Trailer = Schema.Struct({ rows: Count, runHeaders: Count, claims: Count })

const strict = { onExcessProperty: "error", errors: "first" } as const
const decodeHeaderEither = Schema.decodeUnknownEither(RunHeader, strict)
const decodeClaimEither = Schema.decodeUnknownEither(ContinuationClaim, strict)
const decodeTrailerEither = Schema.decodeUnknownEither(Trailer, strict)
const encodeHeader = Schema.encodeSync(RunHeader)
const encodeClaim = Schema.encodeSync(ContinuationClaim)

// The canonical line of a flat, strict-JSON record: these always encode.
const lineOf = (value: unknown): string => {
  const encoded = encode(value)
  if (encoded._tag === "Fail") throw new Error(`an export record has no canonical encoding: ${encoded.failure.message}`)
  return `${encoded.text}\n`
}

/**
 * The first line of a version 2 export.
 *
 * @since 0.1.0
 * @category models
 */
export const markerLine = (): string => lineOf({ format: EXPORT_FORMAT, version: EXPORT_VERSION })

/**
 * A run header record: `{"runHeader": <RunHeader>}`.
 *
 * @since 0.1.0
 * @category models
 */
export const headerLine = (header: RunHeader): string => lineOf({ runHeader: encodeHeader(header) })

/**
 * A continuation claim record: `{"continuationClaim": <ContinuationClaim>}`.
 *
 * @since 0.1.0
 * @category models
 */
export const claimLine = (claim: ContinuationClaim): string => lineOf({ continuationClaim: encodeClaim(claim) })

/**
 * The last line: `{"trailer": {"claims", "rows", "runHeaders"}}`.
 *
 * @since 0.1.0
 * @category models
 */
export const trailerLine = (counts: ExportCounts): string =>
  lineOf({ trailer: { rows: counts.rows, runHeaders: counts.runHeaders, claims: counts.claims } })

/**
 * What a non-row line of a version 2 export is.
 *
 * @since 0.1.0
 * @category models
 */
export type RecordKind = "marker" | "runHeader" | "continuationClaim" | "trailer"

/**
 * The kind of an export record from its one key (`format` and `version` for the marker); `undefined` for anything
 * else (a store-format line, or something that is no record).
 *
 * @since 0.1.0
 * @category models
 */
export const recordKind = (value: unknown): RecordKind | undefined => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined
  if (Object.hasOwn(value, "format")) return "marker"
  const keys = Object.keys(value)
  if (keys.length !== 1) return undefined
  const key = keys[0]
  return key === "runHeader" || key === "continuationClaim" || key === "trailer" ? key : undefined
}

/**
 * The version a marker names, or why it is no marker of this format.
 *
 * @since 0.1.0
 * @category models
 */
export const markerVersion = (value: unknown): Either.Either<number, string> => {
  const marker = value as { readonly [key: string]: unknown }
  const keys = Object.keys(marker).sort()
  if (marker["format"] !== EXPORT_FORMAT || keys.length !== 2 || keys[1] !== "version") {
    return Either.left(`not the marker of a runtime-resume export (expected {"format":"${EXPORT_FORMAT}","version":${EXPORT_VERSION}})`)
  }
  const version = marker["version"]
  return typeof version === "number" && Number.isSafeInteger(version) && version >= 1
    ? Either.right(version)
    : Either.left("its version is not a positive integer")
}

/**
 * Decodes a run header record's body (strict), or says what is wrong with it.
 *
 * @since 0.1.0
 * @category models
 */
export const decodeHeaderRecord = (value: unknown): Either.Either<RunHeader, string> =>
  Either.mapLeft(decodeHeaderEither((value as { readonly runHeader: unknown }).runHeader), (e) => e.message)

/**
 * Decodes a claim record's body (strict), or says what is wrong with it.
 *
 * @since 0.1.0
 * @category models
 */
export const decodeClaimRecord = (value: unknown): Either.Either<ContinuationClaim, string> =>
  Either.mapLeft(decodeClaimEither((value as { readonly continuationClaim: unknown }).continuationClaim), (e) => e.message)

/**
 * Decodes the trailer's body (strict), or says what is wrong with it.
 *
 * @since 0.1.0
 * @category models
 */
export const decodeTrailerRecord = (value: unknown): Either.Either<ExportCounts, string> =>
  Either.mapLeft(decodeTrailerEither((value as { readonly trailer: unknown }).trailer), (e) => e.message)

/**
 * Whether a header may name a run the file holds no event of: exactly the states a header is in before its run's
 * first event (`created`), or after repair closed such a run (`failed`, `continuation_abandoned_before_provider_call`).
 *
 * @since 0.1.0
 * @category models
 */
export const headerAllowsNoEvents = (header: RunHeader): boolean =>
  header.status === "created" ||
  (header.status === "failed" && header.statusReason === "continuation_abandoned_before_provider_call")
