// The `verify` verb (docs/spec/06-cli.md): re-reads every run and checks density, identities, canonical bytes and the chain.
// It exits 0 when every run verifies, else 2; a failing run shows the last row that verified before the problem.
import * as Command from "@effect/cli/Command"
import * as Effect from "effect/Effect"
import * as Verify from "../Programs/VerifyWorkspace.js"
import type { RunVerification, WorkspaceVerification } from "../Programs/VerifyWorkspace.js"
import { withStore } from "./internal/backend.js"
import { errorJson, errorLine, storeSlot, table } from "./internal/common.js"
import { pure, verb } from "./internal/verb.js"
import { human } from "./internal/terminalText.js"
import { verifyOptions } from "./internal/verbOptions.js"

const runJson = (run: RunVerification) => ({
  runId: run.runId,
  ok: run.ok,
  seq: run.seq,
  digest: run.digest,
  error: run.error === null ? null : errorJson(run.error)
})

// The store's own integrity check, when it ran (SQLite's quick_check): it passed, or verify failed before this.
const integrityLine = (verification: WorkspaceVerification): string =>
  verification.integrity !== undefined ? `integrity: ${verification.integrity.check} ok\n` : ""

const humanTable = (verification: WorkspaceVerification): string => integrityLine(verification) + runsTable(verification)

const runsTable = (verification: WorkspaceVerification): string => {
  if (verification.runs.length === 0) return "no runs\n"
  const rows = verification.runs.map((run) => [
    run.runId,
    run.ok ? "ok" : "FAILED",
    run.seq === null ? "-" : String(run.seq),
    run.digest ?? "-",
    run.error === null ? "" : run.error.reason
  ])
  const details = verification.runs.flatMap((run) => run.error !== null ? [`${human`${run.runId}`}: ${errorLine(run.error)}`] : [])
  return table(["RUN", "VERIFIED", "SEQ", "DIGEST", "ERROR"], rows) +
    (details.length > 0 ? `\n${details.join("\n")}\n` : "")
}

/**
 * `verify [--store S] [--json] [WS]`.
 *
 * @since 0.1.0
 * @category cli
 */
export const verify = Command.make("verify", verifyOptions, (args) => {
  const workspace = args.workspace
  const slot = storeSlot(args.store, args.pgUrl)
  return verb(withStore(slot, { workspace, readOnly: true }, Verify.verifyWorkspace()), {
    json: args.json,
    failure: () => ({ workspace, store: slot.store, runs: [] }),
    exitCode: (verification) => Verify.verificationOk(verification) ? 0 : 2,
    document: (verification) =>
      Effect.succeed({
        workspace,
        store: slot.store,
        ...(verification.integrity !== undefined
          ? { integrity: { check: verification.integrity.check, ok: verification.integrity.ok } }
          : {}),
        runs: verification.runs.map(runJson)
      }),
    table: pure(humanTable)
  })
})
