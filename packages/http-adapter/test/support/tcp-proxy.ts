import { connect, createServer, type Socket } from "node:net"

/**
 * A loopback TCP proxy the test controls, put between the service and PostgreSQL: `cut()`
 * closes every open connection and refuses new ones at once (as a stopping server does: it
 * closes its sessions, then accepts nothing), `restore()` forwards again on the same port.
 * The machine's shared PostgreSQL itself is never touched.
 */
export interface TcpProxy {
  readonly port: number
  /** Connections accepted (and forwarded) so far. */
  readonly connectionsAccepted: () => number
  readonly cut: () => void
  readonly restore: () => void
  readonly close: () => Promise<void>
}

export const startTcpProxy = async (targetHost: string, targetPort: number): Promise<TcpProxy> => {
  const open = new Set<Socket>()
  let down = false
  let accepted = 0
  const server = createServer((client) => {
    if (down) {
      client.resetAndDestroy()
      return
    }
    accepted++
    const upstream = connect(targetPort, targetHost)
    open.add(client)
    open.add(upstream)
    const closeBoth = () => {
      client.destroy()
      upstream.destroy()
      open.delete(client)
      open.delete(upstream)
    }
    client.on("error", closeBoth).on("close", closeBoth)
    upstream.on("error", closeBoth).on("close", closeBoth)
    client.pipe(upstream)
    upstream.pipe(client)
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  if (address === null || typeof address === "string") throw new Error("the proxy has no TCP address")
  return {
    port: address.port,
    connectionsAccepted: () => accepted,
    cut: () => {
      down = true
      for (const socket of open) socket.destroy()
      open.clear()
    },
    restore: () => void (down = false),
    close: () =>
      new Promise((resolve) => {
        for (const socket of open) socket.destroy()
        server.close(() => resolve())
      })
  }
}
