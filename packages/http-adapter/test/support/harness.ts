import type { DisclosureEvent } from "@clinical-api/domain"
import { Clock, ConfigProvider, Context, Effect, Exit, Layer, Scope } from "effect"
import { HttpServer } from "effect/http"
import { makeRequestLogCollector, makeService, type ServiceOverrides } from "../../src/index.js"
import type { FixtureDocument } from "./fixture-data-set.js"

/**
 * What the contract suite needs of a running service: the suite is black-box and runs over
 * any implementation of this (in memory here; PostgreSQL in the storage adapter's suite).
 */
export interface HarnessOptions {
  readonly environment?: "sandbox" | "production"
  readonly apiKeysEnabled?: boolean
  /** False: no API-key digest key is configured (503 `digest_key_unavailable`). */
  readonly digestKeyConfigured?: boolean
}

export type Fault = "none" | "store" | "audioStorage"

export interface StartedServer {
  /** `http://127.0.0.1:<port>`, no trailing slash. */
  readonly baseUrl: string
  /** Every disclosure event committed so far. */
  readonly disclosures: () => Promise<ReadonlyArray<DisclosureEvent>>
  /** Switches a store fault on or off; absent when the implementation cannot inject faults. */
  readonly injectFault?: (fault: Fault) => Promise<void>
  /** Every request-log line written so far, exactly as written. */
  readonly logLines: () => ReadonlyArray<string>
  /** Closes the server (draining requests in flight) and everything below it. */
  readonly close: () => Promise<void>
}

export interface ContractHarness {
  readonly name: string
  readonly start: (fixture: FixtureDocument, options?: HarnessOptions) => Promise<StartedServer>
}

export interface RunningService {
  /** `http://127.0.0.1:<port>`, no trailing slash. */
  readonly baseUrl: string
  /** What the service's layer built: the configured storage's services are in it (its pool, its audio storage). */
  readonly context: Context.Context<never>
  /** Every request-log line written so far, exactly as written. */
  readonly logLines: () => ReadonlyArray<string>
  /** Closes the server (draining requests in flight) and everything below it. */
  readonly close: () => Promise<void>
}

export interface StartServiceOptions {
  /** Parts in place of production ones (the request log is the harness's own collector). */
  readonly overrides?: Omit<ServiceOverrides, "requestLog"> | undefined
  /** The service's clock, in place of the real one. */
  readonly clock?: Clock.Clock | undefined
}

/**
 * The service as `pnpm start` builds it (`makeService`, the layer of `ServiceLive`), configured
 * by `env` alone through a `ConfigProvider` (this process's environment is not read), on an
 * ephemeral loopback port.
 */
export const startService = async (
  env: Readonly<Record<string, string>>,
  options: StartServiceOptions = {}
): Promise<RunningService> => {
  const log = makeRequestLogCollector()
  const provider = ConfigProvider.fromEnv({ env: { PORT: "0", HOST: "127.0.0.1", ...env } })
  const service = makeService({ ...options.overrides, requestLog: log.layer }).pipe(
    Layer.provide(ConfigProvider.layer(provider)),
    Layer.provide(options.clock === undefined ? Layer.empty : Layer.succeed(Clock.Clock, options.clock))
  )
  const scope = Effect.runSync(Scope.make())
  const context = await Effect.runPromise(Layer.buildWithScope(service, scope)).catch(async (error: unknown) => {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    throw error
  })
  const address = Context.get(context, HttpServer.HttpServer).address
  if (address._tag === "UnixPathAddress") throw new Error("expected a TCP address")
  return {
    baseUrl: `http://127.0.0.1:${address.port}`,
    context: context as Context.Context<never>,
    logLines: log.lines,
    close: () => Effect.runPromise(Scope.close(scope, Exit.void))
  }
}
