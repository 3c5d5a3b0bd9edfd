// The Operator service: who is at the terminal, for a person's decision recorded by `resolve` (docs/spec/05-reconciliation.md, `--actor`).
// The Tag and its interface; the Node layer (the OS user name, or `uid:<n>`) is in Layers/NodeOperator.ts.
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"

/**
 * The operations of the Operator service.
 *
 * @since 0.1.0
 * @category models
 */
export interface OperatorService {
  /** The name a decision records when no actor is given: the OS user name, or `uid:<n>` when the uid has no name. */
  readonly name: Effect.Effect<string>
}

/**
 * Who is at the terminal.
 *
 * @since 0.1.0
 * @category tags
 */
export class Operator extends Context.Tag("runtime-resume/Operator")<Operator, OperatorService>() {}
