// The Operator service on Node: the OS user name of this process, or `uid:<n>` when the uid has no name (a container
// user without a passwd entry), as `resolve --actor` defaults to (docs/spec/05-reconciliation.md).
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as NodeOs from "node:os"
import { Operator } from "../Services/Operator.js"

/**
 * The name of the process's user: `os.userInfo().username`, else `uid:<n>`, else `unknown`.
 *
 * @since 0.1.0
 * @category layers
 */
export const currentName = (): string => {
  try {
    const name = NodeOs.userInfo().username
    if (name.length > 0) return name
  } catch {
    // No passwd entry for this uid.
  }
  return typeof process.getuid === "function" ? `uid:${process.getuid()}` : "unknown"
}

/**
 * The Operator of this process.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Operator> = Layer.succeed(Operator, { name: Effect.sync(currentName) })

/**
 * An Operator with a fixed name (tests).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFixed = (name: string): Layer.Layer<Operator> => Layer.succeed(Operator, { name: Effect.succeed(name) })
