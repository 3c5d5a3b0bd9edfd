// A Tracer that writes one line per ended span and per span event (name, attributes, exit): for tests that must see
// everything observability emits, such as the canary checks that no prompt, argument, result or reply leaks into spans.
import * as Cause from "effect/Cause"
import * as Exit from "effect/Exit"
import * as Tracer from "effect/Tracer"

/**
 * A Tracer that reports each span's name as it starts (`started`) and writes `span <name> <attributes> <exit>` when it
 * ends and `span-event <name> <event> <attributes>` for each event (`write`). Spans are always sampled; nothing is exported.
 *
 * @since 0.1.0
 * @category testing
 */
export const make = (write: (line: string) => void, started: (name: string) => void = () => {}): Tracer.Tracer => {
  let count = 0
  return Tracer.make({
    span: (name, parent, context, links, startTime, kind) => {
      const attributes = new Map<string, unknown>()
      let status: Tracer.SpanStatus = { _tag: "Started", startTime }
      started(name)
      return {
        _tag: "Span",
        name,
        spanId: `span-${++count}`,
        traceId: "capturing",
        parent,
        context,
        get status() {
          return status
        },
        attributes,
        links: [...links],
        sampled: true,
        kind,
        end: (endTime, exit) => {
          status = { _tag: "Ended", startTime, endTime, exit }
          write(`span ${name} ${JSON.stringify([...attributes])} ${Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "ok"}`)
        },
        attribute: (key, value) => {
          attributes.set(key, value)
        },
        event: (eventName, _time, eventAttributes) => {
          write(`span-event ${name} ${eventName} ${JSON.stringify(eventAttributes ?? {})}`)
        },
        addLinks: () => {}
      }
    },
    context: (f) => f()
  })
}
