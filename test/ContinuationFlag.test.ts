// The safe-boundary flag (docs/continuation.md): the seed's name and the project's own name mean the same thing, and
// anything but an unambiguous `1` leaves the host waiting for a person.
import { describe, expect, it } from "@effect/vitest"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import { enabledConfig, FLAG, FLAG_ALIAS } from "../src/Programs/ContinuationFacts.js"

const read = (env: ReadonlyArray<readonly [string, string]>) =>
  Effect.withConfigProvider(enabledConfig, ConfigProvider.fromMap(new Map(env)))

describe("the safe-boundary flag", () => {
  it.effect("is on with either name set to exactly 1", () =>
    Effect.gen(function*() {
      expect(yield* read([[FLAG, "1"]])).toBe(true)
      expect(yield* read([[FLAG_ALIAS, "1"]])).toBe(true)
      expect(yield* read([[FLAG, "1"], [FLAG_ALIAS, "1"]])).toBe(true)
    }))

  it.effect("is off when absent, set to anything else, or the two names disagree", () =>
    Effect.gen(function*() {
      expect(yield* read([])).toBe(false)
      for (const value of ["", "0", "true", "yes", " 1", "1 "]) {
        expect(yield* read([[FLAG, value]])).toBe(false)
        expect(yield* read([[FLAG_ALIAS, value]])).toBe(false)
      }
      expect(yield* read([[FLAG, "1"], [FLAG_ALIAS, "0"]])).toBe(false)
      expect(yield* read([[FLAG, ""], [FLAG_ALIAS, "1"]])).toBe(false)
    }))
})
