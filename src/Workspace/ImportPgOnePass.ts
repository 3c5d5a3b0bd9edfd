// `import` into a PostgreSQL workspace that does not exist yet, in one pass (docs/stores.md "PostgreSQL"): the file is
// read, checked and written in ONE transaction that also creates the workspace's schema and tables, so a file the pass
// does not take leaves nothing (no schema, no table, no row), and a killed import is rolled back by the server.
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { LedgerImport } from "../Programs/ImportLedger.js"
import { pgServerUrl } from "./WorkspaceBackend.js"

/**
 * Imports FILE into the PostgreSQL workspace `workspace` (the server `pgUrl`, else `RUNTIME_RESUME_PG_URL`) in one pass
 * when it does not exist yet. `None` when the one pass was not used or did not take the file (the workspace exists,
 * the server or its client could not be reached, another process is creating it, or the file is refused or of a shape
 * only the two passes take): nothing was created, and the caller imports as before (the two passes), which refuses or
 * writes exactly what it always did.
 *
 * @since 0.1.0
 * @category programs
 */
export const importFreshPg = (
  pgUrl: string | undefined,
  workspace: string,
  file: string
): Effect.Effect<Option.Option<LedgerImport>, never, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const url = yield* Effect.option(pgServerUrl(pgUrl))
    if (Option.isNone(url)) return Option.none()
    // The module (and the PostgreSQL client) is loaded only here: an import into a folder never loads it.
    const module = yield* Effect.option(Effect.tryPromise(() => import("./internal/pgOnePass.js")))
    if (Option.isNone(module)) return Option.none()
    return yield* module.value.importFreshPgWith(url.value, workspace, file)
  })
