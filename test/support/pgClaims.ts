// A continuation claim and its header for the PostgreSQL tests and host processes: a claim on run-source at a seq.
// Plain data builders, shared by test/PgStore.test.ts and test/support/pgHost.ts.
import { InvocationId, RunId, SessionId, TurnId } from "../../src/Domain/Ids.js"
import { ContinuationClaim, RunHeader } from "../../src/Domain/RunHeader.js"
import { ContinuationSource, SourceHighWater } from "../../src/Domain/RuntimeEvent.js"

/** The boundary digest every claim names. */
export const DIGEST = `sha256:${"a".repeat(64)}`

/** A claim on run-source at `seq` and its continuation run's header. */
export const claimFor = (claimId: string, runId: string, seq: number) => {
  const claim = new ContinuationClaim({
    claimId,
    sourceRunId: RunId.make("run-source"),
    sourceSeq: seq,
    sourceDigest: DIGEST,
    continuationRunId: RunId.make(runId),
    createdAt: 2000
  })
  const header = new RunHeader({
    runId: RunId.make(runId),
    sessionId: SessionId.make("session-1"),
    invocationId: InvocationId.make(`inv-${runId}`),
    turnId: TurnId.make(`turn-${runId}`),
    status: "created",
    parentRunId: RunId.make("run-source"),
    claimId,
    continuationSource: new ContinuationSource({
      sessionId: SessionId.make("session-1"),
      invocationId: InvocationId.make("inv-run-source"),
      runId: RunId.make("run-source"),
      turnId: TurnId.make("turn-run-source"),
      highWater: new SourceHighWater({ seq, digest: DIGEST })
    }),
    workspaceId: "ws",
    createdAt: 2000,
    updatedAt: 2000
  })
  return { claim, header }
}
