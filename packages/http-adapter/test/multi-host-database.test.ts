import { createServer, type Server, type Socket } from "node:net"
import { makePgClient, type PgClientService } from "@clinical-api/storage-adapter"
import { Duration, Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createDisposableCluster, type DisposableCluster, postgresBinDir } from "./support/disposable-cluster.js"

/**
 * A DATABASE_URL naming several hosts (`postgres://user@h1:p1,h2:p2/db?target_session_attrs=read-write`)
 * against clusters of the test's own: a primary and a hot standby (which a failover turns round),
 * a port nothing listens on and one that accepts connections and never answers.
 */
const binaries = postgresBinDir()
if (binaries === undefined) console.warn("multi-host-database.test.ts skipped: no PostgreSQL server binaries (initdb, pg_ctl)")

const listen = async (server: Server): Promise<number> => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  return typeof address === "object" && address !== null ? address.port : 0
}

const hostsUrl = (ports: ReadonlyArray<number>, targetSession = "read-write") =>
  `postgres://postgres@${ports.map((port) => `127.0.0.1:${port}`).join(",")}/postgres?target_session_attrs=${targetSession}`

interface Served {
  readonly port: number
  readonly standby: boolean
}

/** Where the statement ran, after a write there (refused by a standby). */
const writeAndLocate = (client: PgClientService) =>
  Effect.flatMap(
    client.run("test.write", (sql) => sql`CREATE TEMP TABLE IF NOT EXISTS written (id integer)`.execute()),
    () =>
      client.run("test.where", async (sql) => {
        const [row] = await sql<Array<{ port: number; standby: boolean }>>`
          SELECT inet_server_port() AS port, pg_is_in_recovery() AS standby`
        return { port: Number(row?.port), standby: row?.standby === true } satisfies Served
      })
  )

const withClient = <A, E>(url: string, use: (client: PgClientService) => Effect.Effect<A, E>, statementTimeoutMs = 5000) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(
    makePgClient({ url, maxConnections: 2, connectTimeoutSeconds: 2, statementTimeoutMs }),
    use
  )))

describe.skipIf(binaries === undefined)("PgClient on several hosts (target_session_attrs=read-write)", () => {
  let primary: DisposableCluster
  let standby: DisposableCluster
  let refusedPort = 0
  let silentPort = 0
  const silent = new Set<Socket>()
  const silentServer = createServer((socket) => {
    silent.add(socket)
    socket.on("error", () => {})
    socket.on("close", () => silent.delete(socket))
  })

  beforeAll(async () => {
    ;[primary, standby] = await Promise.all([createDisposableCluster(), createDisposableCluster({ standby: true })])
    const closed = createServer()
    refusedPort = await listen(closed)
    await new Promise((resolve) => closed.close(resolve))
    silentPort = await listen(silentServer)
  }, 120_000)

  afterAll(async () => {
    for (const socket of silent) socket.destroy()
    await new Promise((resolve) => silentServer.close(resolve))
    await Promise.all([primary?.remove(), standby?.remove()])
  }, 120_000)

  it("connects to the primary when the first host refuses connections", async () => {
    const served = await withClient(hostsUrl([refusedPort, primary.port]), writeAndLocate)
    expect(served).toEqual({ port: primary.port, standby: false })
  }, 60_000)

  it("connects to the primary when the first host accepts the connection and never answers", async () => {
    const served = await withClient(hostsUrl([silentPort, primary.port]), (client) =>
      writeAndLocate(client).pipe(Effect.timeout(Duration.seconds(20))))
    expect(served).toEqual({ port: primary.port, standby: false })
  }, 60_000)

  it("passes over a hot standby named first, for read-write and for primary", async () => {
    for (const targetSession of ["read-write", "primary"]) {
      const served = await withClient(hostsUrl([standby.port, primary.port], targetSession), writeAndLocate)
      expect(served).toEqual({ port: primary.port, standby: false })
    }
  }, 60_000)

  it("fails at once, with the store unavailable, when no host answers (no statement time-out needed)", async () => {
    const outcome = await withClient(hostsUrl([refusedPort, refusedPort]), (client) =>
      writeAndLocate(client).pipe(Effect.timeout(Duration.seconds(15)), Effect.flip), 0)
    expect(outcome._tag).toBe("StoreUnavailable")
  }, 60_000)

  it("after a failover (the primary back as a standby, the standby promoted) writes go to the new primary, with no restart", async () => {
    const url = hostsUrl([primary.port, standby.port])
    const outcome = await withClient(url, (client) =>
      Effect.gen(function* () {
        const before = yield* writeAndLocate(client)
        yield* Effect.promise(async () => {
          await primary.restartAsStandby()
          await standby.promote()
        })
        // The first statements after the switch may fail (the contract's 503); the client finds the new primary by itself.
        const deadline = Date.now() + 30_000
        let failures = 0
        for (;;) {
          const attempt = yield* Effect.result(writeAndLocate(client))
          if (attempt._tag === "Success" && attempt.success.port === standby.port) {
            return { before, after: attempt.success, failures }
          }
          if (attempt._tag === "Failure") failures++
          if (Date.now() > deadline) return { before, after: attempt, failures }
          yield* Effect.sleep(Duration.millis(100))
        }
      }))
    expect(outcome.before).toEqual({ port: primary.port, standby: false })
    expect(outcome.after).toEqual({ port: standby.port, standby: false })
  }, 120_000)
})
