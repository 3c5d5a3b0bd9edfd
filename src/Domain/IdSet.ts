// A set of strings (event ids) tuned for one insertion per ledger row: open addressing over typed arrays, each
// id's hash computed once and kept, so a million ids cost two typed arrays and one array of references, and no
// per-entry objects. If an input ever makes its probe sequences long (ids crafted to collide), it moves every id into
// a native `Set` and uses that from then on: never slower than a `Set` by more than a constant.

const INITIAL_SLOTS = 1024
// A probe this long means collisions that a fair hash would practically never give at load ≤ 1/2.
const MAX_PROBE = 96

// FNV-1a over UTF-16 code units, then the murmur3 finaliser (so that close ids spread over the table).
/**
 * The 32-bit hash `IdSet` places a string by (exported for tests).
 *
 * @since 0.1.0
 * @category models
 */
export const hashOf = (s: string): number => {
  let h = 0x811c9dc5
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193)
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  return h ^ (h >>> 16)
}

/**
 * A growable set of strings with a combined test-and-add (`add` says whether the string was new).
 *
 * @since 0.1.0
 * @category models
 */
export class IdSet {
  private keys: Array<string> = []
  private hashes = new Int32Array(INITIAL_SLOTS / 2)
  // Slot → 1 + index into `keys`; 0 is an empty slot. Kept at most half full.
  private table = new Int32Array(INITIAL_SLOTS)
  private mask = INITIAL_SLOTS - 1
  private fallback: Set<string> | undefined = undefined

  /** How many strings the set holds. */
  get size(): number {
    return this.fallback !== undefined ? this.fallback.size : this.keys.length
  }

  /** Whether `id` is in the set. */
  has(id: string): boolean {
    if (this.fallback !== undefined) return this.fallback.has(id)
    const h = hashOf(id)
    const table = this.table
    const mask = this.mask
    let i = h & mask
    for (;;) {
      const entry = table[i]!
      if (entry === 0) return false
      if (this.hashes[entry - 1] === h && this.keys[entry - 1] === id) return true
      i = (i + 1) & mask
    }
  }

  /** Adds `id`; `true` when it was not in the set yet, `false` when it was (the set is then unchanged). */
  add(id: string): boolean {
    const fallback = this.fallback
    if (fallback !== undefined) {
      const before = fallback.size
      fallback.add(id)
      return fallback.size !== before
    }
    const h = hashOf(id)
    const table = this.table
    const mask = this.mask
    let i = h & mask
    let probes = 0
    for (;;) {
      const entry = table[i]!
      if (entry === 0) break
      if (this.hashes[entry - 1] === h && this.keys[entry - 1] === id) return false
      i = (i + 1) & mask
      if (++probes > MAX_PROBE) return this.degrade(id)
    }
    const n = this.keys.length
    this.keys.push(id)
    if (n === this.hashes.length) {
      const grown = new Int32Array(n * 2)
      grown.set(this.hashes)
      this.hashes = grown
    }
    this.hashes[n] = h
    table[i] = n + 1
    if ((n + 1) * 2 > table.length) this.grow()
    return true
  }

  /** Every string of the set, in insertion order (a native `Set` keeps its own order after a degrade). */
  *[Symbol.iterator](): IterableIterator<string> {
    if (this.fallback !== undefined) yield* this.fallback
    else yield* this.keys
  }

  private grow(): void {
    const slots = this.table.length * 2
    const table = new Int32Array(slots)
    const mask = slots - 1
    const hashes = this.hashes
    for (let j = 0; j < this.keys.length; j++) {
      let i = hashes[j]! & mask
      while (table[i] !== 0) i = (i + 1) & mask
      table[i] = j + 1
    }
    this.table = table
    this.mask = mask
  }

  // Moves to a native Set (hashed with the engine's seeded string hash), then adds `id` to it.
  private degrade(id: string): boolean {
    const set = new Set(this.keys)
    this.keys = []
    this.hashes = new Int32Array(0)
    this.table = new Int32Array(0)
    this.fallback = set
    return this.add(id)
  }
}
