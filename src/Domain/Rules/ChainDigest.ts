// The ledger's hash chain computed fast (docs/spec/01-ledger.md, "Identities"): a call's argsHash, d(n) from d(n-1) as
// text or as bytes, and the check of a stored digest, with one-shot SHA-256 over a reused buffer. LedgerRules
// re-exports the first three under its own name.
import * as Crypto from "node:crypto"
import * as Either from "effect/Either"
import * as CanonicalJson from "../CanonicalJson.js"
import * as Digest from "../Digest.js"

/**
 * The `argsHash` of a call: `sha256:` + hex(SHA-256(canonical `{"args": args, "name": name}`)).
 *
 * @since 0.1.0
 * @category rules
 */
export const argsHash = (name: string, args: unknown): Either.Either<string, CanonicalJson.CanonicalFailure> => {
  const enc = CanonicalJson.encode({ args, name })
  return enc._tag === "Ok" ? Either.right(Digest.ofText(enc.text)) : Either.left(enc.failure)
}

// One-shot hashing (Node >= 20.12) over a reused buffer avoids a Hash object and two buffers per event.
const oneShotHash: ((algorithm: string, data: Uint8Array, encoding: "hex") => string) | undefined =
  typeof Crypto.hash === "function" ? Crypto.hash : undefined
const SCRATCH_BYTES = 64 * 1024
const scratch = Buffer.allocUnsafe(SCRATCH_BYTES)
const TWO_32 = 2 ** 32
// Views of the scratch buffer's first n bytes, made once per length: a `subarray` per event would build a Buffer object.
const views: Array<Buffer | undefined> = new Array<Buffer | undefined>(SCRATCH_BYTES + 1).fill(undefined)
const viewOf = (length: number): Buffer => views[length] ?? (views[length] = scratch.subarray(0, length))

/**
 * d(n) from d(n-1), the seq n and the canonical text of event n: the same value as `Digest.next`, computed with
 * one-shot SHA-256 over a reused buffer when the inputs fit it (else with `Digest.next` itself).
 *
 * @since 0.1.0
 * @category rules
 */
export const nextDigest = (previous: string, seq: number, text: string): string => {
  if (
    oneShotHash === undefined || previous.length !== 71 || !Number.isSafeInteger(seq) || seq < 0 ||
    40 + text.length * 3 > SCRATCH_BYTES || scratch.write(previous.slice(7), 0, 32, "hex") !== 32
  ) return Digest.next(previous, seq, text)
  scratch.writeUInt32BE(Math.floor(seq / TWO_32), 32)
  scratch.writeUInt32BE(seq % TWO_32, 36)
  const n = scratch.write(text, 40, "utf8")
  return "sha256:" + oneShotHash("sha256", viewOf(40 + n), "hex")
}

/**
 * `nextDigest` of a text given as its UTF-8 bytes: the same value as `nextDigest(previous, seq, text)` when `bytes` is
 * the UTF-8 encoding of `text` (the chain hashes exactly those bytes), without decoding or encoding the text.
 *
 * @since 0.1.0
 * @category rules
 */
export const nextDigestOfBytes = (previous: string, seq: number, bytes: Uint8Array): string => {
  if (
    oneShotHash === undefined || previous.length !== 71 || !Number.isSafeInteger(seq) || seq < 0 ||
    40 + bytes.length > SCRATCH_BYTES || scratch.write(previous.slice(7), 0, 32, "hex") !== 32
  ) {
    const seqBytes = Buffer.allocUnsafe(8)
    seqBytes.writeBigUInt64BE(BigInt(seq))
    return "sha256:" + Crypto.createHash("sha256").update(Buffer.from(previous.slice(7), "hex")).update(seqBytes).update(bytes)
      .digest("hex")
  }
  scratch.writeUInt32BE(Math.floor(seq / TWO_32), 32)
  scratch.writeUInt32BE(seq % TWO_32, 36)
  scratch.set(bytes, 40)
  return "sha256:" + oneShotHash("sha256", viewOf(40 + bytes.length), "hex")
}

// The digest the last match was found for, and its hex part as its own (flat) string: the next link writes it
// into the scratch buffer without slicing the digest first.
let lastDigest = ""
let lastHex = ""
const DIGEST_PREFIX = "sha256:"

/**
 * Whether `stored` is d(seq) after `previous` for `text`, as `nextDigest(previous, seq, text) === stored`, without
 * building the computed digest's string (one hash, no concatenation): `undefined` when the fast path does not apply.
 *
 * @since 0.1.0
 * @category rules
 */
export const storedDigestMatches = (previous: string, seq: number, text: string, stored: string): boolean | undefined => {
  if (
    oneShotHash === undefined || previous.length !== 71 || !Number.isSafeInteger(seq) || seq < 0 ||
    40 + text.length * 3 > SCRATCH_BYTES
  ) return undefined
  if (scratch.write(previous === lastDigest ? lastHex : previous.slice(7), 0, 32, "hex") !== 32) return undefined
  scratch.writeUInt32BE(Math.floor(seq / TWO_32), 32)
  scratch.writeUInt32BE(seq % TWO_32, 36)
  const n = scratch.write(text, 40, "utf8")
  const hex = oneShotHash("sha256", viewOf(40 + n), "hex")
  if (stored.length !== 71 || !stored.startsWith(DIGEST_PREFIX) || !stored.endsWith(hex)) return false
  lastDigest = stored
  lastHex = hex
  return true
}

