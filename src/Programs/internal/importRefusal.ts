// A refusal while reading or checking an import file, and how it becomes the ImportInvalid that names the file, the
// line, the run and the event (docs/wire-format.md, "Import").
import * as Effect from "effect/Effect"
import { ImportInvalid } from "../../Domain/Errors.js"
import type { ImportInvalidReason } from "../../Domain/Errors.js"
import { SectionRefusal } from "../ImportRecoverySection.js"

/**
 * A refusal while reading or checking the file, before it becomes an ImportInvalid.
 *
 * @since 0.1.0
 * @category programs
 */
export class Refusal {
  constructor(
    readonly reason: ImportInvalidReason,
    readonly detail: string,
    readonly where: { readonly line?: number; readonly runId?: string; readonly eventId?: string } = {}
  ) {}
}

/**
 * The ImportInvalid of a refusal in FILE: what, where, and that nothing was imported.
 *
 * @since 0.1.0
 * @category programs
 */
export const invalid = (file: string, refusal: Refusal): ImportInvalid => {
  const { line, runId, eventId } = refusal.where
  const at = [
    runId !== undefined ? `run ${runId}` : undefined,
    eventId !== undefined ? `event ${eventId}` : undefined
  ].filter((s) => s !== undefined).join(", ")
  return new ImportInvalid({
    file,
    reason: refusal.reason,
    message: `${file}${line !== undefined ? `:${line}` : ""}: ${refusal.reason}${at ? ` (${at})` : ""}: ${refusal.detail}; ` +
      "nothing was imported",
    ...(line !== undefined ? { line } : {}),
    ...(runId !== undefined ? { runId } : {}),
    ...(eventId !== undefined ? { eventId } : {})
  })
}

/**
 * The refusal of a file that cannot be read.
 *
 * @since 0.1.0
 * @category programs
 */
export const unreadable = (file: string) => (error: { readonly message: string }) =>
  invalid(file, new Refusal("unreadable", `cannot read the file: ${error.message}`))

/**
 * Runs `f`, turning a thrown `Refusal` or `SectionRefusal` into an ImportInvalid of FILE.
 *
 * @since 0.1.0
 * @category programs
 */
export const guard = <A>(file: string, f: () => A): Effect.Effect<A, ImportInvalid> =>
  Effect.try({
    try: f,
    catch: (error) => {
      if (error instanceof Refusal) return invalid(file, error)
      if (error instanceof SectionRefusal) return invalid(file, new Refusal(error.reason, error.detail, error.where))
      throw error
    }
  })
