import { Cache, Duration, Effect, Exit, Layer, Option } from "effect"
import type { OrganizationId } from "../ids.js"
import { ApiKeyStore, OrganizationStore } from "../ports.js"

export interface AccessCacheOptions {
  /**
   * How long a found key or organization is reused. It bounds how late a change takes effect:
   * a key disabled, revoked or given a new expiry, an organization unapproved or a route
   * disabled is enforced on every replica at most this long after it is stored. Expiry itself
   * is always evaluated against the clock at each request.
   */
  readonly timeToLive: Duration.DurationInput
  /** Entries kept (least recently used are dropped beyond it). */
  readonly capacity: number
}

/**
 * Only a record that was found is kept: a digest nobody holds is asked again every time, so
 * random tokens cannot fill the cache, a key issued a moment ago is found at once, and a store
 * failure is retried by the next request. (A zero time to live would still serve the entry for
 * the rest of its millisecond, so those entries are dropped explicitly.)
 */
const cachedFound = <K, A, E>(
  lookup: (key: K) => Effect.Effect<Option.Option<A>, E>,
  options: { readonly capacity: number; readonly timeToLive: Duration.Duration }
) =>
  Effect.map(
    Cache.make({ capacity: options.capacity, timeToLive: options.timeToLive, lookup }),
    (cache) => (key: K): Effect.Effect<Option.Option<A>, E> =>
      cache.get(key).pipe(
        Effect.onExit((exit) => Exit.isSuccess(exit) && Option.isSome(exit.value) ? Effect.void : cache.invalidate(key))
      )
  )

/**
 * Decorates the `ApiKeyStore` and `OrganizationStore` in context with a short-lived cache
 * (Effect's `Cache`: concurrent lookups of one digest share one store call). A time to live
 * of zero leaves the stores as they are.
 */
export const AccessCacheLayer = (
  options: AccessCacheOptions
): Layer.Layer<ApiKeyStore | OrganizationStore, never, ApiKeyStore | OrganizationStore> => {
  const timeToLive = Duration.decode(options.timeToLive)
  if (Duration.toMillis(timeToLive) <= 0) {
    return Layer.effectContext(Effect.context<ApiKeyStore | OrganizationStore>())
  }
  const settings = { capacity: options.capacity, timeToLive }
  const keys = Layer.effect(
    ApiKeyStore,
    // eslint-disable-next-line no-restricted-syntax -- made once, when the layer is built
    Effect.gen(function*() {
      const store = yield* ApiKeyStore
      return ApiKeyStore.of({ findByDigest: yield* cachedFound(store.findByDigest, settings) })
    })
  )
  const organizations = Layer.effect(
    OrganizationStore,
    // eslint-disable-next-line no-restricted-syntax -- made once, when the layer is built
    Effect.gen(function*() {
      const store = yield* OrganizationStore
      return OrganizationStore.of({
        findById: yield* cachedFound((organizationId: OrganizationId) => store.findById(organizationId), settings)
      })
    })
  )
  return Layer.merge(keys, organizations)
}
