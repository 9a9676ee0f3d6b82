import {
  AccessPolicyLive,
  MemoryStore,
  MemoryStoreLayer,
  PublicApi,
  PublicApiConfig,
  PublicApiLive
} from "@clinical-api/domain"
import { HttpServer } from "@effect/platform"
import { Context, Effect, Exit, Layer, Option, Redacted, Ref, Scope } from "effect"
import { HttpApiRoutesLive, makeHttpServerLayer, makeRequestLogCollector } from "../../src/index.js"
import { dataSetFromFixture } from "./fixture-data-set.js"
import type { ContractHarness, HarnessOptions, StartedServer } from "./harness.js"

const DIGEST_KEY = Redacted.make("contract-suite-digest-key")

const addressOf = (server: HttpServer.HttpServer) => {
  if (server.address._tag !== "TcpAddress") throw new Error("expected a TCP address")
  return `http://127.0.0.1:${server.address.port}`
}

/**
 * Starts the real HTTP server on an ephemeral loopback port over the domain's in-memory
 * adapters. `wrapPublicApi` lets a test put something around the use cases (a delay, a defect).
 */
export const startMemoryServer = async (
  fixture: Parameters<ContractHarness["start"]>[0],
  options: HarnessOptions = {},
  wrapPublicApi?: (api: Context.Tag.Service<PublicApi>) => Context.Tag.Service<PublicApi>
): Promise<StartedServer> => {
  const config = Layer.succeed(PublicApiConfig, {
    environment: options.environment ?? "sandbox",
    apiKeysEnabled: options.apiKeysEnabled ?? true,
    apiKeyDigestKey: options.digestKeyConfigured === false ? Option.none() : Option.some(DIGEST_KEY),
    audioUrlTtlSeconds: 300
  })
  const store = MemoryStoreLayer(dataSetFromFixture(fixture, DIGEST_KEY))
  const publicApi = PublicApiLive.pipe(Layer.provide(AccessPolicyLive), Layer.provide(config))
  const wrapped = wrapPublicApi === undefined
    ? publicApi
    : Layer.effect(PublicApi, Effect.map(PublicApi, wrapPublicApi)).pipe(Layer.provide(publicApi))
  const log = makeRequestLogCollector()
  const layer = makeHttpServerLayer({ port: 0, host: "127.0.0.1" }).pipe(
    Layer.provide(HttpApiRoutesLive),
    Layer.provide(log.layer),
    Layer.provide(wrapped),
    Layer.provideMerge(store)
  )
  const scope = Effect.runSync(Scope.make())
  const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
  const handle = Context.get(context, MemoryStore)
  return {
    baseUrl: addressOf(Context.get(context, HttpServer.HttpServer)),
    disclosures: () => Effect.runPromise(Ref.get(handle.disclosures)),
    injectFault: (fault) =>
      Effect.runPromise(
        Ref.set(handle.faults, { store: fault === "store", audioStorage: fault === "audioStorage", disclosures: false })
      ),
    logLines: log.lines,
    close: () => Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

export const memoryHarness: ContractHarness = {
  name: "in-memory store",
  start: (fixture, options) => startMemoryServer(fixture, options)
}
