import { MemoryStore, MemoryStoreLayer, type PublicApi } from "@clinical-api/domain"
import { Context, Effect, Exit, Layer, Option, Redacted, Ref, Scope } from "effect"
import { dataSetFromFixture } from "./fixture-data-set.js"
import type { ContractHarness, HarnessOptions, StartedServer } from "./harness.js"
import { startService } from "./harness.js"

const DIGEST_KEY = Redacted.make("contract-suite-digest-key-of-at-least-32-characters")

/**
 * The service (`makeService`, as `pnpm start` builds it, configured through a test
 * `ConfigProvider`) over the domain's in-memory store in place of PostgreSQL, on an ephemeral
 * loopback port. `wrapPublicApi` lets a test put something around the use cases (a delay, a defect).
 */
export const startMemoryServer = async (
  fixture: Parameters<ContractHarness["start"]>[0],
  options: HarnessOptions = {},
  wrapPublicApi?: (api: PublicApi["Service"]) => PublicApi["Service"]
): Promise<StartedServer> => {
  const storeScope = Effect.runSync(Scope.make())
  const store = await Effect.runPromise(Layer.buildWithScope(MemoryStoreLayer(dataSetFromFixture(fixture, DIGEST_KEY)), storeScope))
  const service = await startService(
    {
      PUBLIC_API_ENVIRONMENT: options.environment ?? "sandbox",
      API_KEYS_ENABLED: String(options.apiKeysEnabled ?? true),
      API_KEY_DIGEST_KEY: Redacted.value(DIGEST_KEY)
    },
    {
      overrides: {
        storage: Layer.succeedContext(store),
        settings: options.digestKeyConfigured === false
          ? (settings) => ({ ...settings, apiKeyDigestKey: Option.none() })
          : undefined,
        publicApi: wrapPublicApi
      }
    }
  )
  const handle = Context.get(store, MemoryStore)
  return {
    baseUrl: service.baseUrl,
    disclosures: () => Effect.runPromise(Ref.get(handle.disclosures)),
    injectFault: (fault) =>
      Effect.runPromise(
        Ref.set(handle.faults, { store: fault === "store", audioStorage: fault === "audioStorage", disclosures: false })
      ),
    logLines: service.logLines,
    close: async () => {
      await service.close()
      await Effect.runPromise(Scope.close(storeScope, Exit.void))
    }
  }
}

export const memoryHarness: ContractHarness = {
  name: "in-memory store",
  start: (fixture, options) => startMemoryServer(fixture, options)
}
