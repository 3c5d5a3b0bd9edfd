// runtime-resume: a crash-recovery ledger for AI-agent tool calls, built on Effect.
// The Effect API: domain schemas and errors, the store services and their layers, and the programs.
/**
 * The Effect API: domain schemas and errors, the store services and their layers, and the programs a host and its
 * tests use. The pure rules and folds behind them are in `runtime-resume/internals` (no stability promise).
 *
 * @module runtime-resume
 * @since 0.1.0
 */
export * as Errors from "./Domain/Errors.js"
export * as FileWriteEvidence from "./Domain/FileWriteEvidence.js"
export * as Failpoints from "./Domain/Failpoints.js"
export * as HighWater from "./Domain/HighWater.js"
export * as Ids from "./Domain/Ids.js"
export * as ContinuationErrors from "./Domain/ContinuationErrors.js"
export * as ContinuationPlan from "./Domain/ContinuationPlan.js"
export * as ContinuationOutcome from "./Domain/ContinuationOutcome.js"
export * as RepairReport from "./Domain/RepairReport.js"
export * as Observation from "./Domain/Observation.js"
export * as RecoveryDecision from "./Domain/RecoveryDecision.js"
export * as ResumePlan from "./Domain/ResumePlan.js"
export * as RunHeader from "./Domain/RunHeader.js"
export * as RuntimeEvent from "./Domain/RuntimeEvent.js"
export * as Settlement from "./Domain/Settlement.js"
export * as Tool from "./Domain/Tool.js"
export * as ToolOperation from "./Domain/ToolOperation.js"

export * as RuntimeEventStore from "./RuntimeEventStore.js"
export * as RunHeaderStore from "./RunHeaderStore.js"
export * as ContinuationSafetyInspector from "./Services/ContinuationSafetyInspector.js"
export * as ContinuationFailpoints from "./Services/ContinuationFailpoints.js"
export * as RecoveryFailpoints from "./Services/RecoveryFailpoints.js"
export * as ModelProvider from "./Services/ModelProvider.js"
export * as Operator from "./Services/Operator.js"
export * as NodeOperator from "./Layers/NodeOperator.js"
export * as NodeContinuationSafetyInspector from "./Layers/NodeContinuationSafetyInspector.js"
export * as WorkspaceLock from "./WorkspaceLock.js"
export * as WorkspaceOwner from "./WorkspaceOwner.js"
export * as NodeLedgerFileSystem from "./Layers/NodeLedgerFileSystem.js"
export * as NoFollowFileSystem from "./Services/NoFollowFileSystem.js"
export * as NodeNoFollowFileSystem from "./Layers/NodeNoFollowFileSystem.js"
export * as ToolFailpoints from "./Services/Failpoints.js"

export * as Decide from "./Domain/Rules/Decide.js"
export * as EventBuilder from "./Domain/Rules/EventBuilder.js"
export * as FileWriteTool from "./Programs/FileWriteTool.js"
export * as ExportLedger from "./Programs/ExportLedger.js"
export * as ImportLedger from "./Programs/ImportLedger.js"
export * as ExportFormat from "./Domain/ExportFormat.js"
export * as InspectWorkspace from "./Programs/InspectWorkspace.js"
export * as Reconcile from "./Programs/Reconcile.js"
export * as Resolve from "./Programs/Resolve.js"
export * as ResolveWorkspace from "./Workspace/ResolveWorkspace.js"
export * as StartupRepair from "./Programs/StartupRepair.js"
export * as HostStartup from "./Programs/HostStartup.js"
export * as ContinuationExecutor from "./Programs/ContinuationExecutor.js"
export * as RepairWorkspace from "./Workspace/RepairWorkspace.js"
export * as ResumeWorkspace from "./Workspace/ResumeWorkspace.js"
export * as WorkspaceIdentity from "./Services/WorkspaceIdentity.js"
export * as ToolRuntime from "./Programs/ToolRuntime.js"
export * as VerifyWorkspace from "./Programs/VerifyWorkspace.js"

export {
  AppendRejected,
  LedgerCorruption,
  OwnershipLost,
  RunNotFound,
  RunSealed,
  RuntimeOffsetMismatch,
  StoreReadFailed,
  StoreWriteFailed,
  WorkspaceAmbiguous,
  WorkspaceLocked,
  WorkspaceNotFound
} from "./Domain/Errors.js"
export {
  ClaimRefused,
  ContinuationAlreadyExists,
  RunHeaderCorruption,
  RunHeaderExists,
  RunHeaderNotFound,
  RunHeaderUpdateRefused
} from "./Domain/ContinuationErrors.js"
export { RUNTIME_RESUME_FAILPOINTS } from "./Domain/Failpoints.js"
export { decide } from "./Domain/Rules/Decide.js"
export type { Decision } from "./Domain/Rules/Decide.js"
export { planResume } from "./Domain/Rules/PlanResume.js"
