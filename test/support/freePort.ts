// A free TCP port on the loopback interface, for the embedded PostgreSQL servers of the tests and the benchmarks.
import { createServer } from "node:net"

/** A port on 127.0.0.1 that nothing listened on a moment ago (the OS's choice for port 0). */
export const freePort = (): Promise<number> =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })
