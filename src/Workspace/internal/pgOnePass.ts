// `import`'s one pass into a PostgreSQL workspace that does not exist yet (docs/stores.md "PostgreSQL"): loaded by
// ImportPgOnePass.ts only when the target is PostgreSQL, so imports into a folder never load the PostgreSQL client.
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type * as Redacted from "effect/Redacted"
import { open } from "../../Layers/internal/pgConnection.js"
import * as PgRuntimeEventStore from "../../Layers/PgRuntimeEventStore.js"
import type { LedgerImport } from "../../Programs/ImportLedger.js"
import { importInOnePass } from "../../Programs/ImportOnePass.js"
import { RuntimeEventStore } from "../../Services/RuntimeEventStore.js"

/**
 * Imports FILE into the PostgreSQL workspace `workspace` of the server `url` in one pass when no such workspace exists:
 * the workspace is opened without being created (`createInWrite`), and the store's `restoreChecked` creates it and
 * writes the file in ONE transaction. `None` when the workspace exists, the open failed, or the pass did not take the
 * file (its transaction rolled back: nothing was created); the caller then imports by the two passes, which create,
 * refuse or write exactly what they always did.
 *
 * @since 0.1.0
 * @category programs
 */
export const importFreshPgWith = (
  url: Redacted.Redacted<string>,
  workspace: string,
  file: string
): Effect.Effect<Option.Option<LedgerImport>, never, FileSystem.FileSystem> =>
  Effect.scoped(Effect.gen(function*() {
    const opened = yield* Effect.either(open({ url, workspace }, { createInWrite: true }))
    if (Either.isLeft(opened) || !opened.right.absent) return Option.none()
    const store = PgRuntimeEventStore.fromLedger(opened.right)
    const done = yield* Effect.either(Effect.provideService(importInOnePass(file), RuntimeEventStore, store))
    return Either.isRight(done) ? Option.some(done.right) : Option.none()
  }))
