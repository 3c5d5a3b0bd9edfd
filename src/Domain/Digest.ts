// The digest chain of docs/spec/01-ledger.md: d(0) from the run id, d(n) = SHA-256(d(n-1) ‖ u64be(n) ‖ canonical bytes of event n).
// Also the `argsHash` of a call. Digests are written `sha256:<64 lowercase hex>`.
import * as Crypto from "node:crypto"
import { createHash } from "node:crypto"
import * as Schema from "effect/Schema"

// One-shot hashing (Node >= 20.12) avoids a Hash object per call; older Nodes use `createHash`.
const oneShot: ((algorithm: string, data: string | Uint8Array, encoding: "hex") => string) | undefined =
  typeof Crypto.hash === "function" ? Crypto.hash : undefined

/**
 * The SHA-256 of a string's UTF-8 bytes, or of bytes, as 64 lowercase hex digits.
 *
 * @since 0.1.0
 * @category models
 */
export const sha256Hex = (data: string | Uint8Array): string =>
  oneShot !== undefined
    ? oneShot("sha256", data, "hex")
    : typeof data === "string"
    ? createHash("sha256").update(data, "utf8").digest("hex")
    : createHash("sha256").update(data).digest("hex")

/**
 * A digest as written on the wire: `sha256:` and 64 lowercase hex digits.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Digest = Schema.String.pipe(Schema.pattern(/^sha256:[0-9a-f]{64}$/))
/**
 * A digest as written on the wire.
 *
 * @since 0.1.0
 * @category models
 */
export type Digest = typeof Digest.Type

/**
 * Whether `s` is a digest as written: `sha256:` and 64 lowercase hex digits, what `Digest`'s pattern
 * `/^sha256:[0-9a-f]{64}$/` tests, without the regular expression's cost per row (the JSONL readers and import's row
 * shape use it; test/JsonlFastRow.test.ts and test/ImportProvenLine.test.ts check it against the pattern).
 *
 * @since 0.1.0
 * @category models
 */
export const isDigestText = (s: string): boolean => {
  if (s.length !== 71 || !s.startsWith("sha256:")) return false
  for (let i = 7; i < 71; i++) {
    const c = s.charCodeAt(i)
    if (!((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66))) return false
  }
  return true
}

const PREFIX = "sha256:"
const GENESIS_TAG = Buffer.from("runtime-resume.ledger.v1\u0000", "utf8")

/**
 * d(0) of a run: SHA-256("runtime-resume.ledger.v1" ‖ 0x00 ‖ UTF-8(runId)).
 *
 * @since 0.1.0
 * @category models
 */
export const genesis = (runId: string): string =>
  PREFIX + createHash("sha256").update(GENESIS_TAG).update(runId, "utf8").digest("hex")

const seqBuf = Buffer.alloc(8)

/**
 * d(n) from d(n-1), the seq n, and the canonical text of event n.
 *
 * @since 0.1.0
 * @category models
 */
export const next = (previous: string, seq: number, canonicalText: string): string => {
  seqBuf.writeBigUInt64BE(BigInt(seq))
  return PREFIX +
    createHash("sha256").update(Buffer.from(previous.slice(PREFIX.length), "hex")).update(seqBuf).update(
      canonicalText,
      "utf8"
    ).digest("hex")
}

/**
 * The SHA-256 of a canonical text, written `sha256:<hex>`.
 *
 * @since 0.1.0
 * @category models
 */
export const ofText = (canonicalText: string): string => PREFIX + sha256Hex(canonicalText)

/**
 * The SHA-256 of raw bytes, written `sha256:<hex>`.
 *
 * @since 0.1.0
 * @category models
 */
export const ofBytes = (bytes: Uint8Array): string => PREFIX + sha256Hex(bytes)
