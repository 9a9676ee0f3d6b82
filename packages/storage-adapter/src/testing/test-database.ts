import { randomBytes } from "node:crypto"
import { Effect, type Scope } from "effect"
import postgres from "postgres"
import { EMBEDDED_MAX_CONNECTIONS, type PgClientOptions, startEmbeddedPostgres } from "../index.js"

/** A database the contract suite runs on, with the client options that suit it. */
export interface TestDatabase {
  readonly url: string
  readonly clientOptions: Omit<PgClientOptions, "url">
  /** Whether several pools may connect at once (a server: yes; PGlite's single session: no). */
  readonly separateClients: boolean
}

export interface TestDatabaseFactory {
  readonly label: string
  /** A new, empty database, dropped (or closed) when the scope closes. */
  readonly fresh: Effect.Effect<TestDatabase, unknown, Scope.Scope>
}

/**
 * Fresh databases on a real server: each gets a random name and is dropped afterwards. The
 * database's default collation is ICU `en-US` when the server has ICU, so that only the
 * schema's `COLLATE "C"` can make the ordering bytewise.
 */
export const serverDatabases = (adminUrl: string): TestDatabaseFactory => ({
  label: "PostgreSQL server (DATABASE_URL)",
  fresh: Effect.gen(function* () {
    const name = `clinical_api_test_${randomBytes(6).toString("hex")}`
    const admin = postgres(adminUrl, { max: 1, onnotice: () => {} })
    yield* Effect.acquireRelease(
      Effect.tryPromise(async () => {
        try {
          await admin.unsafe(
            `CREATE DATABASE ${name} TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C.UTF-8' LOCALE_PROVIDER icu ICU_LOCALE 'en-US'`
          )
        } catch {
          await admin.unsafe(`CREATE DATABASE ${name}`)
        }
      }),
      () =>
        Effect.promise(async () => {
          await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined)
          await admin.end({ timeout: 5 })
        })
    )
    const url = new URL(adminUrl)
    url.pathname = `/${name}`
    return { url: url.toString(), clientOptions: { maxConnections: 4 }, separateClients: true }
  })
})

export const embeddedDatabases: TestDatabaseFactory = {
  label: "embedded PGlite",
  fresh: Effect.map(startEmbeddedPostgres(), (embedded) => ({
    url: embedded.url,
    clientOptions: { maxConnections: EMBEDDED_MAX_CONNECTIONS, prepare: false },
    separateClients: false
  }))
}

/** Whether a Docker engine answers (testcontainers' own probe); false quickly where there is none. */
const dockerEngineReachable = async (): Promise<boolean> => {
  const { existsSync } = await import("node:fs")
  if (process.env["DOCKER_HOST"] === undefined && !existsSync("/var/run/docker.sock")) return false
  try {
    const { getContainerRuntimeClient } = await import("testcontainers")
    await Promise.race([
      getContainerRuntimeClient(),
      new Promise((_, reject) => setTimeout(() => reject(new Error("no answer from Docker")), 10_000))
    ])
    return true
  } catch {
    return false
  }
}

let container: Promise<{ readonly getConnectionUri: () => string }> | undefined

/** One PostgreSQL 15 container per test process, started on first use; Ryuk removes it afterwards. */
const containerDatabases: TestDatabaseFactory = {
  label: "PostgreSQL in a container (testcontainers)",
  fresh: Effect.flatMap(
    Effect.tryPromise(() => {
      container ??= import("@testcontainers/postgresql").then(({ PostgreSqlContainer }) =>
        new PostgreSqlContainer("postgres:15-alpine").withUsername("postgres").start()
      )
      return container
    }),
    (started) => serverDatabases(started.getConnectionUri()).fresh
  )
}

/**
 * The real PostgreSQL the suites run on: the server named by DATABASE_URL; where none is named
 * and a Docker engine answers, a container started with testcontainers; otherwise none (the
 * caller runs on PGlite and says so).
 */
export const realServerDatabases = async (): Promise<TestDatabaseFactory | undefined> => {
  const databaseUrl = process.env["DATABASE_URL"]?.trim()
  if (databaseUrl !== undefined && databaseUrl !== "") return serverDatabases(databaseUrl)
  return (await dockerEngineReachable()) ? containerDatabases : undefined
}
