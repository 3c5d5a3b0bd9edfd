// The Operator service: who is at the terminal, for a person's decision recorded by `resolve` (spec 05, `--actor`).
// The Tag and its interface; the Node layer (the OS user name, or `uid:<n>`) is in Layers/NodeOperator.ts.
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"

/** The operations of the Operator service. */
export interface OperatorService {
  /** The name a decision records when no actor is given: the OS user name, or `uid:<n>` when the uid has no name. */
  readonly name: Effect.Effect<string>
}

/** Who is at the terminal. */
export class Operator extends Context.Tag("runtime-resume/Operator")<Operator, OperatorService>() {}
