// A small SQLite workspace with every kind of run `inspect` and `verify` report (docs/benchmarks.md: their output must stay
// byte-identical through speed work): a sealed run, prefixes of the harness run (one blocked by a dangling call), a
// tool-boundary run with dispatched calls, one settled by T2, one parked by a person (manual_abandon) and one completed
// by the reconciler (recovery bundles), hidden events and awkward strings, and a run whose call index was damaged
// (derived_mismatch). Deterministic: fixed ids and timestamps, so the documents can be compared with stored ones.
import Sqlite from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as NodePath from "node:path"
import { RunId } from "../../src/Domain/Ids.js"
import * as LedgerRules from "../../src/Domain/Rules/LedgerRules.js"
import * as NodeLedgerFileSystem from "../../src/Layers/NodeLedgerFileSystem.js"
import { layerStore } from "../../src/Layers/NodeRuntimeEventStore.js"
import * as NodeWorkspaceLock from "../../src/Layers/NodeWorkspaceLock.js"
import * as EventBuilder from "../../src/Domain/Rules/EventBuilder.js"
import * as HarnessLedger from "../../src/Testing/HarnessLedger.js"
import * as RecoveryBundle from "../../src/Domain/Rules/RecoveryBundle.js"
import { RuntimeEventStore } from "../../src/Services/RuntimeEventStore.js"

const EVIDENCE = { deployment: "d-1", expect: ["ok"] }

/** Fills `workspace` (an empty folder) with the runs; the last one's call index is then damaged in the file. */
export const fillGoldenWorkspace = (workspace: string) =>
  Effect.gen(function*() {
    const store = yield* RuntimeEventStore
    const append = (runId: string, events: Parameters<typeof store.append>[1]) => store.append(RunId.make(runId), events)
    yield* append("a-sealed", HarnessLedger.fixedLedger("a-sealed"))
    yield* append("b-dangling", HarnessLedger.prefixEvents("after_function_call", "b-dangling"))
    yield* append("c-answered", HarnessLedger.prefixEvents("after_function_response", "c-answered"))

    const t = EventBuilder.make("d-tools")
    yield* append("d-tools", [t.opened("t1_after_preflight_v1"), t.user("go \u2028 \"quoted\"\n")])
    const c1 = t.call("c1", "write", { path: "a", body: "x\ny" })
    yield* store.appendDispatch(t.runId, { call: c1, dispatch: t.dispatched("c1", "write", { path: "a", body: "x\ny" }, "idempotent") })
    yield* store.appendDispatch(t.runId, { call: t.call("c2", "read", { path: "b" }), dispatch: t.dispatched("c2", "read", { path: "b" }, "read_only") })
    yield* store.appendOutcome(t.runId, t.response("c2", "read", { text: "hello" }, { operationBound: true }))
    const c3 = t.call("c3", "deploy", { env: "prod" })
    yield* store.appendDispatch(t.runId, { call: c3, dispatch: t.dispatched("c3", "deploy", { env: "prod" }, "reconcilable", { evidence: EVIDENCE }) })
    yield* append("d-tools", [t.call("c4", "hidden-tool", [1, 2, 3], { hidden: true }), t.model("\u00e9t\u00e9 \ud83d\ude00")])
    yield* append("d-tools", [t.terminated("failed", "tool_crash")])
    yield* store.appendRecovery(t.runId, RecoveryBundle.manualAbort(c1, { ts: 0, actor: "alice" }))
    yield* store.appendRecovery(t.runId, RecoveryBundle.reconcileCompleted(c3, { ts: 0, evidenceDigest: Either.getOrThrow(LedgerRules.evidenceDigest(EVIDENCE)), result: { deployed: true } }))

    const e = EventBuilder.make("e-abandoned")
    yield* append("e-abandoned", [e.opened("t1_after_preflight_v1"), e.user("u")])
    const e1 = e.call("e1", "write", { n: 1 })
    yield* store.appendDispatch(e.runId, { call: e1, dispatch: e.dispatched("e1", "write", { n: 1 }, "never_auto_retry") })
    yield* append("e-abandoned", [e.terminated("cancelled")])
    yield* store.appendRecovery(e.runId, RecoveryBundle.manualAbort(e1, { ts: 0, actor: "bob" }))

    const f = EventBuilder.make("f-damaged")
    const events = [f.opened("none"), f.user("damaged below")]
    for (let i = 0; i < 30; i++) {
      events.push(f.call(`k${i}`, "Read", { i }))
      if (i % 3 !== 0) events.push(f.response(`k${i}`, "Read", { ok: i }))
    }
    yield* append("f-damaged", events)
    return NodePath.join(workspace, "runtime.sqlite")
  }).pipe(
    Effect.provide(Layer.provide(layerStore("sqlite", { workspace, readOnly: false }), Layer.mergeAll(NodeLedgerFileSystem.layer, NodeWorkspaceLock.layerNode))),
    Effect.scoped,
    Effect.map((file) => {
      const db = new Sqlite(file)
      db.exec(`UPDATE calls SET args_hash = 'sha256:${"0".repeat(64)}' WHERE run_id = 'f-damaged' AND call_id = 'k17'`)
      db.close()
    })
  )
