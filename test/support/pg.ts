// Test helpers for the PostgreSQL suites: the server URL the globalSetup provided, and a fresh workspace name per
// folder (the suites written over a temp folder map each folder to its own workspace in the shared database).
import { createHash } from "node:crypto"
import { Redacted } from "effect"
import { inject } from "vitest"

/** The test server's URL as the stores take it (a Redacted value). */
export const pgUrl = (): Redacted.Redacted<string> => Redacted.make(inject("pgUrl"))

/** The workspace name standing for a temp folder (a plain identifier, unique per folder). */
export const workspaceFor = (folder: string): string => `t_${createHash("sha256").update(folder).digest("hex").slice(0, 24)}`
