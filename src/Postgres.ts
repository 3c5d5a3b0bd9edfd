// runtime-resume/postgres: the PostgreSQL layers (a separate entry point, so only users of PostgreSQL need @effect/sql-pg).
// One database holds many workspaces, each in its own schema `rr_<name>`; the URL comes from Config as a Redacted value.
export * as PgRuntimeEventStore from "./Layers/PgRuntimeEventStore.js"
export * as PgRunHeaderStore from "./Layers/PgRunHeaderStore.js"
export * as PgWorkspaceOwner from "./Layers/PgWorkspaceOwner.js"
export * as PgWorkspace from "./Layers/PgWorkspace.js"
export * as PgContinuationSafetyInspector from "./Layers/PgContinuationSafetyInspector.js"
