// IdSet, the verifier's set of event ids: the same answers as a native Set, across growth, duplicates and the
// degrade to a native Set that ids crafted to collide trigger.
import { assert, describe, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { hashOf, IdSet } from "../src/Domain/IdSet.js"

describe("IdSet", () => {
  it("answers add and has as a native Set does, across growth", () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.string(), fc.constantFrom("a", "b", "run:1", "")), { maxLength: 3000 }), (ids) => {
        const ours = new IdSet()
        const theirs = new Set<string>()
        for (const id of ids) {
          assert.strictEqual(ours.has(id), theirs.has(id))
          const fresh = !theirs.has(id)
          theirs.add(id)
          assert.strictEqual(ours.add(id), fresh)
          assert.strictEqual(ours.size, theirs.size)
        }
        assert.deepStrictEqual([...ours], [...theirs])
      }),
      { numRuns: 60 }
    )
  })

  it("answers add, has, delete and clear as a native Set does (the JSONL store's undo of a failed write)", () => {
    const op = fc.oneof(
      { weight: 120, arbitrary: fc.record({ op: fc.constant("add" as const), id: fc.oneof(fc.string({ maxLength: 4 }), fc.nat(400).map(String)) }) },
      { weight: 60, arbitrary: fc.record({ op: fc.constant("delete" as const), id: fc.oneof(fc.string({ maxLength: 4 }), fc.nat(400).map(String)) }) },
      { weight: 40, arbitrary: fc.record({ op: fc.constant("has" as const), id: fc.nat(400).map(String) }) },
      // Undo of the last n adds, newest first (what `TailIndex.undo` does with a journal).
      { weight: 20, arbitrary: fc.record({ op: fc.constant("rollback" as const), id: fc.nat(300).map(String) }) },
      { weight: 1, arbitrary: fc.record({ op: fc.constant("clear" as const), id: fc.constant("") }) }
    )
    fc.assert(
      fc.property(fc.array(op, { maxLength: 4000 }), (ops) => {
        const ours = new IdSet()
        const theirs = new Set<string>()
        const added: Array<string> = []
        for (const { op, id } of ops) {
          switch (op) {
            case "add": {
              const fresh = !theirs.has(id)
              theirs.add(id)
              assert.strictEqual(ours.add(id), fresh)
              if (fresh) added.push(id)
              break
            }
            case "delete":
              assert.strictEqual(ours.delete(id), theirs.delete(id))
              break
            case "has":
              assert.strictEqual(ours.has(id), theirs.has(id))
              break
            case "rollback":
              for (let n = Number(id); n > 0 && added.length > 0; n--) {
                const last = added.pop()!
                assert.strictEqual(ours.delete(last), theirs.delete(last))
              }
              break
            case "clear":
              ours.clear()
              theirs.clear()
              break
          }
          assert.strictEqual(ours.size, theirs.size)
        }
        assert.deepStrictEqual(new Set(ours), theirs)
        for (const id of theirs) assert.isTrue(ours.has(id))
        for (let i = 0; i <= 400; i++) assert.strictEqual(ours.has(String(i)), theirs.has(String(i)))
      }),
      { numRuns: 150 }
    )
  })

  it("deletes keep every other id reachable in a crowded table (ids that share a home slot)", () => {
    // Ids whose hashes share their low 8 bits cluster in one run of slots; deleting from the middle of the run must
    // move the later ones back (a plain emptied slot would cut them off).
    const crowd: Array<string> = []
    for (let i = 0; crowd.length < 40; i++) {
      const id = `k${i}`
      if ((hashOf(id) & 255) === 7) crowd.push(id)
    }
    fc.assert(
      fc.property(fc.shuffledSubarray(crowd), fc.shuffledSubarray(crowd), (adds, deletes) => {
        const set = new IdSet()
        for (const id of adds) set.add(id)
        for (const id of deletes) assert.strictEqual(set.delete(id), adds.includes(id))
        for (const id of crowd) assert.strictEqual(set.has(id), adds.includes(id) && !deletes.includes(id))
        assert.strictEqual(set.size, adds.filter((id) => !deletes.includes(id)).length)
      }),
      { numRuns: 200 }
    )
  })

  it("holds a hundred thousand ids; a repeated one is refused", () => {
    const set = new IdSet()
    for (let i = 0; i < 100_000; i++) assert.isTrue(set.add(`run:${i}`))
    assert.strictEqual(set.size, 100_000)
    assert.isFalse(set.add("run:99999"))
    assert.isFalse(set.add(`run:${0}`))
    assert.isTrue(set.has("run:54321"))
    assert.isFalse(set.has("run:100000"))
  })

  it("ids crafted to collide make it degrade to a native Set, with the same answers", () => {
    // 200 ids whose hashes share their low 10 bits (the first table's slot): the probes grow past the bound.
    const colliding: Array<string> = []
    for (let i = 0; colliding.length < 200; i++) {
      const id = `c${i}`
      if ((hashOf(id) & 1023) === 0) colliding.push(id)
    }
    const set = new IdSet()
    for (const id of colliding) assert.isTrue(set.add(id))
    assert.strictEqual(Reflect.get(set, "fallback") instanceof Set, true, "expected the degrade to a native Set")
    for (const id of colliding) {
      assert.isFalse(set.add(id))
      assert.isTrue(set.has(id))
    }
    assert.isTrue(set.add("fresh"))
    assert.strictEqual(set.size, 201)
    assert.isTrue(set.delete(colliding[3]!))
    assert.isFalse(set.has(colliding[3]!))
    assert.isFalse(set.delete(colliding[3]!))
    assert.isTrue(set.add(colliding[3]!))
    assert.deepStrictEqual(new Set(set), new Set([...colliding, "fresh"]))
  })
})
