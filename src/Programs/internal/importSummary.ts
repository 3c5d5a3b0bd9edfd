// An import's summary (docs/spec/06-cli.md, `import`): what the two passes and both one passes report alike.
import type { ImportFormat } from "./importLine.js"
import type { LedgerImport, RunImport } from "../ImportLedger.js"

/**
 * An import's summary from its runs' reports: the totals are the runs' sums.
 *
 * @since 0.1.0
 * @category internal
 */
export const ledgerImportOf = (file: string, format: ImportFormat | null, runs: ReadonlyArray<RunImport>): LedgerImport => ({
  file,
  format,
  added: runs.reduce((n, r) => n + r.added, 0),
  skipped: runs.reduce((n, r) => n + r.skipped, 0),
  runs
})

