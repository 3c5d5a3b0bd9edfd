// `COPY … FROM STDIN (FORMAT binary)` over a raw `pg` client, without a stream library: rows laid out in PostgreSQL's
// binary copy format (text as UTF-8, integers big-endian, bytea as its bytes), sent as one copy-in of a few MiB.
import type pg from "pg"

// The binary copy format's header: signature, flags, no header extension.
const HEADER = Buffer.concat([Buffer.from("PGCOPY\n\xff\r\n\0", "latin1"), Buffer.alloc(8)])

/**
 * A column's type in the binary copy format: `text` (UTF-8, also for a `Uint8Array` given as is, e.g. bytea), `int4`,
 * `int2`.
 *
 * @since 0.1.0
 * @category models
 */
export type CopyColumn = "text" | "int4" | "int2"

/**
 * Rows laid out in PostgreSQL's binary copy format, in one growing buffer: `row` per row, then `finish`; `reset`
 * starts the next copy's rows in the same buffer (once the last one's data was sent).
 *
 * @since 0.1.0
 * @category models
 */
export class CopyRows {
  private buf: Buffer = Buffer.allocUnsafe(1 << 20)
  private at = 0
  /** How many rows were added. */
  rows = 0

  constructor() {
    this.put(HEADER)
  }

  /** The bytes laid out so far. */
  get size(): number {
    return this.at
  }

  /** Drops the rows: the next ones go in the same buffer, after a new header. */
  reset(): void {
    this.at = 0
    this.rows = 0
    this.put(HEADER)
  }

  private room(n: number): void {
    if (this.at + n <= this.buf.length) return
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.at + n))
    this.buf.copy(next, 0, 0, this.at)
    this.buf = next
  }

  private put(bytes: Uint8Array): void {
    this.room(bytes.length)
    this.buf.set(bytes, this.at)
    this.at += bytes.length
  }

  /** Starts a row of `fields` fields. */
  begin(fields: number): void {
    this.room(2)
    this.buf.writeInt16BE(fields, this.at)
    this.at += 2
    this.rows++
  }

  /** A text field (UTF-8), or bytes as they are. */
  text(value: string | Uint8Array): void {
    if (typeof value !== "string") {
      this.room(4)
      this.buf.writeInt32BE(value.length, this.at)
      this.at += 4
      this.put(value)
      return
    }
    this.room(4 + value.length * 3)
    const n = this.buf.write(value, this.at + 4, "utf8")
    this.buf.writeInt32BE(n, this.at)
    this.at += 4 + n
  }

  /** A text field known to be ASCII (a digest): written one byte per character. */
  ascii(value: string): void {
    this.room(4 + value.length)
    const n = this.buf.write(value, this.at + 4, "latin1")
    this.buf.writeInt32BE(n, this.at)
    this.at += 4 + n
  }

  /** A 4-byte integer field. */
  int4(value: number): void {
    this.room(8)
    this.buf.writeInt32BE(4, this.at)
    this.buf.writeInt32BE(value, this.at + 4)
    this.at += 8
  }

  /** A 2-byte integer field. */
  int2(value: number): void {
    this.room(6)
    this.buf.writeInt32BE(2, this.at)
    this.buf.writeInt16BE(value, this.at + 4)
    this.at += 6
  }

  /** A NULL field. */
  nil(): void {
    this.room(4)
    this.buf.writeInt32BE(-1, this.at)
    this.at += 4
  }

  /** A row of `columns`' types from `values` (`null` is NULL). */
  row(columns: ReadonlyArray<CopyColumn>, values: ReadonlyArray<string | number | Uint8Array | null>): void {
    this.begin(columns.length)
    for (let i = 0; i < columns.length; i++) {
      const value = values[i]
      if (value === null || value === undefined) this.nil()
      else if (typeof value === "number") columns[i] === "int2" ? this.int2(value) : this.int4(value)
      else this.text(value)
    }
  }

  /** The whole copy data, the trailer appended (valid until `reset`). */
  finish(): Buffer {
    this.room(2)
    this.buf.writeInt16BE(-1, this.at)
    this.at += 2
    return this.buf.subarray(0, this.at)
  }
}

// Bytes per CopyData message.
const MESSAGE = 1 << 20
// The frontend's CopyData ('d') and CopyDone ('c') messages, written to the connection's socket as pg-copy-streams does.
const COPY_DONE = Buffer.from([0x63, 0, 0, 0, 4])
const copyData = (chunk: Buffer): Buffer => {
  const head = Buffer.allocUnsafe(5)
  head[0] = 0x64
  head.writeUInt32BE(chunk.length + 4, 1)
  return head
}

/**
 * Runs `COPY <target> FROM STDIN (FORMAT binary)` on `client` with `data` (`CopyRows.finish`): resolves once the
 * server took every row (its `COPY n` count), rejects with the server's error (the transaction is then aborted) or
 * the connection's.
 *
 * @since 0.1.0
 * @category layers
 */
export const copyIn = (client: pg.ClientBase, target: string, data: Buffer): Promise<number> =>
  new Promise<number>((resolve, reject) => {
    let settled = false
    let count = 0
    let failure: Error | undefined
    const settle = () => {
      if (settled) return
      settled = true
      if (failure !== undefined) reject(failure)
      else resolve(count)
    }
    const text = `COPY ${target} FROM STDIN (FORMAT binary)`
    // The protocol of `Client.query(submittable)`: `pg` calls the handlers below as the server answers.
    const submittable: pg.Submittable & Record<string, unknown> = {
      submit(connection: pg.Connection) {
        connection.query(text)
      },
      // `pg` replaces this with its timeout hook when `query_timeout` is set.
      callback() {},
      handleCopyInResponse(connection: pg.Connection) {
        for (let at = 0; at < data.length; at += MESSAGE) {
          const chunk = data.subarray(at, Math.min(data.length, at + MESSAGE))
          connection.stream.write(copyData(chunk))
          connection.stream.write(chunk)
        }
        connection.stream.write(COPY_DONE)
      },
      handleCommandComplete(message: { readonly text?: string } | undefined) {
        const match = /COPY (\d+)/.exec(message?.text ?? "")
        if (match !== null) count = Number(match[1])
      },
      // A server error is followed by ReadyForQuery; a lost connection is not: either settles it.
      handleError(error: Error) {
        failure ??= error
        settle()
      },
      handleReadyForQuery() {
        settle()
      }
    }
    client.query(submittable)
  })
