// The Node composition of the persistent stores: which ledger a workspace folder holds, and the layer that opens it.
// Read-only openings create nothing; a writer with no ledger yet gets the embedded default, SQLite.
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { basename, dirname, join, resolve } from "node:path"
import type { LedgerCorruption, WorkspaceLocked } from "../Domain/Errors.js"
import { StoreReadFailed, WorkspaceAmbiguous, WorkspaceNotFound } from "../Domain/Errors.js"
import { shellWord } from "../Domain/ShellWord.js"
import type { RuntimeEventStore } from "../Services/RuntimeEventStore.js"
import type { WorkspaceLock } from "../Services/WorkspaceLock.js"
import * as JsonlRuntimeEventStore from "./JsonlRuntimeEventStore.js"
import { DRAFT_PATTERN } from "./internal/jsonlImportDraft.js"
import { draftPattern } from "./internal/sqliteImportDraft.js"
import { refuseSymlinks } from "./internal/symlinks.js"
import * as SqliteRuntimeEventStore from "./SqliteRuntimeEventStore.js"

/**
 * The two persistent stores a workspace can hold.
 *
 * @since 0.1.0
 * @category models
 */
export type PersistentStore = "sqlite" | "jsonl"

/**
 * The ledger file of each persistent store, inside the workspace folder.
 *
 * @since 0.1.0
 * @category constants
 */
export const LEDGER_FILES: Readonly<Record<PersistentStore, string>> = {
  sqlite: SqliteRuntimeEventStore.FILE_NAME,
  jsonl: JsonlRuntimeEventStore.FILE_NAME
}

/**
 * How to open a workspace: read-only (inspect, verify, export) or for writing (import, repair).
 *
 * @since 0.1.0
 * @category models
 */
export interface WorkspaceOptions {
  readonly workspace: string
  /** The store to open; by default, the one ledger the folder holds. */
  readonly store?: PersistentStore
  readonly readOnly: boolean
}

/**
 * Any error opening a workspace's store can fail with.
 *
 * @since 0.1.0
 * @category models
 */
export type OpenError = WorkspaceNotFound | WorkspaceAmbiguous | WorkspaceLocked | LedgerCorruption | StoreReadFailed

const readFailed = (path: string, cause: unknown) =>
  new StoreReadFailed({ path, cause: String(cause), message: `could not look at ${path}: ${String(cause)}` })

// Which ledger files the folder holds. A missing folder is `WorkspaceNotFound`, or holds nothing for a writer
// (the store layers create it).
const ledgersIn = (workspace: string, missingFolder: "fail" | "empty") =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    // A workspace that is a link is refused before anything looks inside it (or creates anything through it).
    yield* refuseSymlinks(fs, workspace, [])
    const info = yield* fs.stat(workspace).pipe(
      Effect.map((info) => info.type),
      Effect.catchIf(
        (error) => error._tag === "SystemError" && error.reason === "NotFound",
        () =>
          missingFolder === "empty"
            ? Effect.succeed("Missing" as const)
            : Effect.flatMap(stoppedImport(workspace), (stopped) =>
              Effect.fail(new WorkspaceNotFound({ workspace, message: `the workspace folder ${workspace} does not exist${stopped}` })))
      ),
      Effect.mapError((error) => error._tag === "WorkspaceNotFound" ? error : readFailed(workspace, error))
    )
    if (info === "Missing") return { sqlite: false, jsonl: false }
    if (info !== "Directory") {
      return yield* new WorkspaceNotFound({ workspace, message: `the workspace ${workspace} is not a folder` })
    }
    const holds = (store: PersistentStore) => {
      const path = join(workspace, LEDGER_FILES[store])
      return fs.exists(path).pipe(Effect.mapError((error) => readFailed(path, error)))
    }
    return { sqlite: yield* holds("sqlite"), jsonl: yield* holds("jsonl") }
  })

// A missing folder beside which a one-pass SQLite import left its draft (docs/stores.md "SQLite"): that import is
// running or was stopped, and the same import run again completes. Without a draft: the path may be mistyped, or a host
// or an import makes it. Only advice: an unreadable parent gives the plain advice.
const stoppedImport = (workspace: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const parent = dirname(resolve(workspace))
    const pattern = draftPattern(basename(resolve(workspace)))
    const names = yield* fs.readDirectory(parent).pipe(Effect.orElseSucceed((): ReadonlyArray<string> => []))
    const drafts = names.filter((name) => pattern.test(name)).sort()
    if (drafts.length === 0) {
      return ": check the path; a host creates the folder and its ledger on its first start, or import an exported file: " +
        `runtime-resume import ${shellWord(workspace)} FILE`
    }
    return `; an import into it is running or was stopped before it finished (it left ${drafts.join(", ")} beside it, ` +
      "which no store reads: nothing of that file was imported). When no import is running, import the file again (the " +
      `import removes what a stopped one left): runtime-resume import ${shellWord(workspace)} FILE`
  })

// What to do about a folder that holds no ledger (docs/cli.md "What the CLI prints"): a one-pass JSONL import's partial
// file (docs/stores.md "JSONL") says an import into it was stopped, or is running; otherwise a host's first start or an
// import makes one. Only advice: a folder that cannot be listed gets the plain advice.
const noLedgerAdvice = (workspace: string, store: PersistentStore | undefined) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const names = yield* fs.readDirectory(workspace).pipe(Effect.orElseSucceed((): ReadonlyArray<string> => []))
    const drafts = names.filter((name) => DRAFT_PATTERN.test(name)).sort()
    const flag = store !== undefined ? ` --store ${store}` : ""
    const folder = shellWord(workspace)
    if (drafts.length > 0) {
      return `; an import into it is running or was stopped before it finished (it left ${drafts.join(", ")}, which ` +
        "no store reads: nothing of that file was imported). When no import is running, import the file again (the " +
        `import removes what a stopped one left): runtime-resume import${flag} ${folder} FILE`
    }
    return `: a host creates it on its first start, or import an exported file: runtime-resume import${flag} ${folder} FILE`
  })

const ambiguous = (workspace: string) =>
  new WorkspaceAmbiguous({
    workspace,
    message: `the workspace ${workspace} holds both ${LEDGER_FILES.sqlite} and ${LEDGER_FILES.jsonl}: ` +
      "name the one to use with --store sqlite or --store jsonl"
  })

const secondLedger = (workspace: string, store: PersistentStore, other: PersistentStore) =>
  new WorkspaceAmbiguous({
    workspace,
    message: `the workspace ${workspace} holds a ${other} ledger (${LEDGER_FILES[other]}); creating a ${store} ledger ` +
      `beside it would leave two ledgers in one folder, so nothing was written: use --store ${other} (or no --store), ` +
      "or name another folder"
  })

/**
 * Which ledger the workspace holds: the named store when its file exists, else the only one present.
 * Both without `store`: `WorkspaceAmbiguous`; none, or the named one missing: `WorkspaceNotFound`. Creates nothing.
 *
 * @since 0.1.0
 * @category layers
 */
export const detectStore = (
  workspace: string,
  store?: PersistentStore
): Effect.Effect<PersistentStore, WorkspaceNotFound | WorkspaceAmbiguous | StoreReadFailed, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const present = yield* ledgersIn(workspace, "fail")
    if (store !== undefined) {
      if (present[store]) return store
      return yield* new WorkspaceNotFound({
        workspace,
        message: `the workspace ${workspace} holds no ${store} ledger (${LEDGER_FILES[store]})` +
          (yield* noLedgerAdvice(workspace, store))
      })
    }
    if (present.sqlite && present.jsonl) return yield* ambiguous(workspace)
    if (present.sqlite) return "sqlite" as const
    if (present.jsonl) return "jsonl" as const
    return yield* new WorkspaceNotFound({
      workspace,
      message: `the workspace ${workspace} holds no ledger (neither ${LEDGER_FILES.sqlite} nor ${LEDGER_FILES.jsonl})` +
        (yield* noLedgerAdvice(workspace, undefined))
    })
  })

/**
 * The store to open: for a reader, `detectStore`; for a writer, the named store, else the one ledger present,
 * else `sqlite` (the embedded default). A writer's store layer creates a missing workspace folder. A writer naming a
 * store whose ledger is absent while the other store's is present is `WorkspaceAmbiguous`: it never creates a second
 * ledger.
 *
 * @since 0.1.0
 * @category layers
 */
export const resolveStore = (
  options: WorkspaceOptions
): Effect.Effect<PersistentStore, WorkspaceNotFound | WorkspaceAmbiguous | StoreReadFailed, FileSystem.FileSystem> =>
  options.readOnly ? detectStore(options.workspace, options.store) : Effect.gen(function*() {
    const present = yield* ledgersIn(options.workspace, "empty")
    if (options.store !== undefined) {
      // A writer never creates a second ledger beside the other store's: every verb would then be ambiguous.
      const other: PersistentStore = options.store === "sqlite" ? "jsonl" : "sqlite"
      if (present[other] && !present[options.store]) return yield* secondLedger(options.workspace, options.store, other)
      return options.store
    }
    if (present.sqlite && present.jsonl) return yield* ambiguous(options.workspace)
    return present.jsonl ? "jsonl" as const : "sqlite" as const
  })

/**
 * The layer of one persistent store over a workspace, with no detection. `importing`: the writer is `import`, which
 * on JSONL completes an interrupted import (see `JsonlStoreOptions.completeInterruptedImport`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerStore = (
  store: PersistentStore,
  options: {
    readonly workspace: string
    readonly readOnly: boolean
    readonly importing?: boolean
    /** JSONL: how long a writer waits for the writer lock (default 0: a second writer fails at once). */
    readonly lockTimeoutMs?: number
    /** JSONL: a writer sharing the ledger with a running host (a person's decision; `JsonlStoreOptions.shared`). */
    readonly shared?: boolean
  }
): Layer.Layer<RuntimeEventStore, OpenError, FileSystem.FileSystem | WorkspaceLock> =>
  store === "sqlite"
    ? SqliteRuntimeEventStore.layer({ workspace: options.workspace, readOnly: options.readOnly })
    : JsonlRuntimeEventStore.layer({
      workspace: options.workspace,
      readOnly: options.readOnly,
      ...(options.importing === true ? { completeInterruptedImport: true } : {}),
      ...(options.lockTimeoutMs !== undefined ? { lockTimeoutMs: options.lockTimeoutMs } : {}),
      ...(options.shared === true ? { shared: true } : {})
    })

/**
 * The store of a workspace folder, chosen by `resolveStore`; read-only openings create nothing of ours.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWorkspace = (
  options: WorkspaceOptions
): Layer.Layer<RuntimeEventStore, OpenError, FileSystem.FileSystem | WorkspaceLock> =>
  Layer.unwrapEffect(Effect.map(resolveStore(options), (store) => layerStore(store, options)))
