// The `verify` verb (spec 06): re-reads every run and checks density, identities, canonical bytes and the chain.
// It exits 0 when every run verifies, else 2; a failing run shows the last row that verified before the problem.
import * as Command from "@effect/cli/Command"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { RunVerification, WorkspaceVerification } from "../Programs/VerifyWorkspace.js"
import {
  errorJson,
  errorLine,
  jsonOption,
  optionalWorkspace,
  printJson,
  printOut,
  reportFailure,
  setExitCode,
  ledgerStoreOption,
  pgUrlOption,
  storeSlot,
  table,
  withStore
} from "./internal/common.js"
import { human } from "./internal/terminalText.js"

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

/** `verify [--store S] [--json] [WS]`. */
export const verify = Command.make("verify", { store: ledgerStoreOption,
  pgUrl: pgUrlOption, json: jsonOption, workspace: optionalWorkspace }, (args) =>
  Effect.gen(function*() {
    const workspace = args.workspace
    const slot = storeSlot(args.store, args.pgUrl)
    const outcome = yield* Effect.either(Effect.gen(function*() {
      const Verify = yield* Effect.promise(() => import("../Programs/VerifyWorkspace.js"))
      const verification = yield* withStore(slot, { workspace, readOnly: true }, Verify.verifyWorkspace())
      return { verification, ok: Verify.verificationOk(verification) }
    }))
    if (Either.isLeft(outcome)) {
      return yield* reportFailure(args.json, { workspace, store: slot.store, runs: [] }, outcome.left)
    }
    const { ok, verification } = outcome.right
    yield* setExitCode(ok ? 0 : 2)
    if (args.json) {
      return yield* printJson({
        workspace,
        store: slot.store,
        ...(verification.integrity !== undefined
          ? { integrity: { check: verification.integrity.check, ok: verification.integrity.ok } }
          : {}),
        runs: verification.runs.map(runJson)
      })
    }
    yield* printOut(humanTable(verification))
  }))
