// What a line of an import file is (docs/wire-format.md, "Export file"): its format, its decoded entry, the longest
// line `import` reads, and the set of lines the check pass proved canonical as written.
import * as CanonicalJson from "../../Domain/CanonicalJson.js"
import type { RuntimeEvent } from "../../Domain/RuntimeEvent.js"

/**
 * What one file line holds: a bare event, or a committed row as `export` writes it.
 *
 * @since 0.1.0
 * @category models
 */
export type ImportFormat = "events" | "rows"

/**
 * One non-blank line of an import file, decoded and canonically encoded.
 *
 * @since 0.1.0
 * @category models
 */
export interface ImportEntry {
  readonly line: number
  readonly event: RuntimeEvent
  readonly text: string
  /**
   * The UTF-8 bytes of `text` as the line holds them (a view of the bytes read), when `text` is the line's own (its
   * canonical text as written) and where it lies in the line is known: a writer may write them instead of encoding
   * `text` again.
   */
  readonly bytes?: Uint8Array
  /** Present for store-format lines. */
  readonly row?: { readonly seq: number; readonly end: number; readonly digest: string }
}

/**
 * The longest line `import` reads: a store-format line around an event at the 16 MiB limit of docs/spec/01-ledger.md.
 *
 * @since 0.1.0
 * @category constants
 */
export const MAX_LINE_BYTES = CanonicalJson.MAX_BYTES + 1024

/**
 * The lines of an import file whose event text the check pass proved canonical exactly as written (the line's own
 * bytes, confirmed by `decodeParsed`): one bit per line. The write pass decodes those lines without confirming the
 * text again; what it writes is still chained by the store and compared with the check pass's chain at each run's
 * end, so a line changed in between fails the whole import, writing nothing.
 *
 * @since 0.1.0
 * @category programs
 */
export class ProvenLines {
  private bits = new Uint8Array(1024)

  /** Marks `line` (1-based) proven. */
  mark(line: number): void {
    const byte = line >>> 3
    if (byte >= this.bits.length) {
      const grown = new Uint8Array(Math.max(this.bits.length * 2, byte + 1))
      grown.set(this.bits)
      this.bits = grown
    }
    this.bits[byte]! |= 1 << (line & 7)
  }

  /** Whether `line` was marked. */
  has(line: number): boolean {
    const byte = line >>> 3
    return byte < this.bits.length && (this.bits[byte]! & (1 << (line & 7))) !== 0
  }
}
