// runtime-resume/internals: the pure rules and folds behind the public programs, for tools and tests that need them.
/**
 * The rules and folds the public programs are built from: the ledger's rules, the planners and resolvers, the recovery
 * bundles, the tool projection, canonical JSON and digests. No stability promise: these may change in any release.
 * A host needs none of them; `planResume`, `decide` and the workspace programs of `runtime-resume` are the API.
 *
 * @module runtime-resume/internals
 * @since 0.1.0
 */
export * as CanonicalJson from "./Domain/CanonicalJson.js"
export * as ContinuationFacts from "./Programs/ContinuationFacts.js"
export * as ContinuationPlanner from "./Domain/Rules/ContinuationPlanner.js"
export * as Digest from "./Domain/Digest.js"
export * as LedgerRules from "./Domain/Rules/LedgerRules.js"
export * as RecoveryBundle from "./Domain/Rules/RecoveryBundle.js"
export * as RecoveryResolver from "./Domain/Rules/RecoveryResolver.js"
export * as RestoreRunHeaders from "./Programs/RestoreRunHeaders.js"
export * as ResumePlanner from "./Domain/Rules/ResumePlanner.js"
export * as ToolProjection from "./Domain/Rules/ToolProjection.js"
