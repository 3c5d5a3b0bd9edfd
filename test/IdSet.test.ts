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
    assert.deepStrictEqual(new Set(set), new Set([...colliding, "fresh"]))
  })
})
