import { once } from "node:events"
import { type AddressInfo, createServer } from "node:net"

/** A loopback port nothing listens on right now (the OS's pick for port 0, released at once). */
export const freePort = async (): Promise<number> => {
  const server = createServer().listen(0, "127.0.0.1")
  await once(server, "listening")
  const { port } = server.address() as AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}
