// `--edit-file -`: the whole of stdin as text, whatever it is (a pipe, a file, a terminal ended with Ctrl-D). The
// ledger FileSystem never opens a FIFO (it could block for ever), so stdin is read from the process's own stream.
import * as Effect from "effect/Effect"

/**
 * The most stdin may hold (a result is far smaller: the event limits of docs/wire-format.md refuse it later).
 *
 * @since 0.1.0
 * @category constants
 */
export const STDIN_LIMIT_BYTES = 64 * 1024 * 1024

/**
 * Reads stdin to its end as UTF-8; fails with a message (what went wrong) on a read error or past the limit.
 *
 * @since 0.1.0
 * @category cli
 */
export const readStdin: Effect.Effect<string, string> = Effect.async<string, string>((resume) => {
  const stdin = process.stdin
  const chunks: Array<Buffer> = []
  let size = 0
  const cleanup = () => {
    stdin.off("data", onData)
    stdin.off("end", onEnd)
    stdin.off("error", onError)
    stdin.pause()
  }
  const onData = (chunk: Buffer | string) => {
    const bytes = typeof chunk === "string" ? Buffer.from(chunk) : chunk
    size += bytes.length
    if (size > STDIN_LIMIT_BYTES) {
      cleanup()
      resume(Effect.fail(`stdin holds more than ${STDIN_LIMIT_BYTES} bytes`))
    } else chunks.push(bytes)
  }
  const onEnd = () => {
    cleanup()
    resume(Effect.succeed(Buffer.concat(chunks).toString("utf8")))
  }
  const onError = (error: Error) => {
    cleanup()
    resume(Effect.fail(error.message))
  }
  stdin.on("data", onData)
  stdin.once("end", onEnd)
  stdin.once("error", onError)
  stdin.resume()
  return Effect.sync(cleanup)
})
