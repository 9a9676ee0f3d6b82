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
  readonly timeToLive: Duration.Input
  /** Entries kept (least recently used are dropped beyond it). */
  readonly capacity: number
}

/**
 * Only a record that was found is kept: a digest nobody holds is asked again every time, so
 * random tokens cannot fill the cache, a key issued a moment ago is found at once, and a store
 * failure is retried by the next request. (A zero time to live would still serve the entry for
 * the rest of its millisecond, so those entries are dropped explicitly.)
 *
 * A hit is answered from a plain map in front of Effect's `Cache`, which is asked only on a miss
 * (it loads, and makes concurrent lookups of one key share one store call): a `Cache.get` with
 * its bookkeeping is about a dozen Effect operations, twice per request. An entry of the map
 * answers up to and including the time its lookup started plus the time to live, and not after,
 * so the bound holds to its last millisecond.
 */
const cachedFound = <K, A, E>(
  lookup: (key: K) => Effect.Effect<Option.Option<A>, E>,
  options: { readonly capacity: number; readonly timeToLive: Duration.Duration }
) => {
  const timeToLiveMillis = Duration.toMillis(options.timeToLive)
  const timedLookup = (key: K) =>
    Effect.clockWith((clock) => {
      const startedAt = clock.currentTimeMillisUnsafe()
      return Effect.map(lookup(key), (found) => ({ found, startedAt }))
    })
  return Effect.map(
    Cache.make({ capacity: options.capacity, timeToLive: options.timeToLive, lookup: timedLookup }),
    (cache) => {
      const recent = new Map<K, { readonly found: Option.Some<A>; readonly expiresAt: number }>()
      const remember = (key: K, found: Option.Some<A>, expiresAt: number) => {
        recent.delete(key)
        recent.set(key, { found, expiresAt })
        if (recent.size > options.capacity) {
          const oldest = recent.keys().next()
          if (oldest.done !== true) recent.delete(oldest.value)
        }
      }
      // `Cache` counts its time to live from when a lookup answered: an entry it still holds may
      // have been read more than the time to live ago (a slow lookup), and is then read again.
      const fresh = (key: K) =>
        Effect.flatMap(Cache.get(cache, key), (entry) =>
          Effect.clockWith((clock) =>
            clock.currentTimeMillisUnsafe() <= entry.startedAt + timeToLiveMillis
              ? Effect.succeed(entry)
              : Effect.andThen(Cache.invalidate(cache, key), Cache.get(cache, key))
          ))
      const load = (key: K): Effect.Effect<Option.Option<A>, E> =>
        fresh(key).pipe(
          Effect.onExit((exit) => {
            if (Exit.isSuccess(exit) && Option.isSome(exit.value.found)) {
              remember(key, exit.value.found, exit.value.startedAt + timeToLiveMillis)
              return Effect.void
            }
            return Cache.invalidate(cache, key)
          }),
          Effect.map((entry) => entry.found)
        )
      return (key: K): Effect.Effect<Option.Option<A>, E> =>
        Effect.clockWith((clock) => {
          const hit = recent.get(key)
          if (hit === undefined) return load(key)
          if (clock.currentTimeMillisUnsafe() <= hit.expiresAt) return Effect.succeed(hit.found)
          recent.delete(key)
          return load(key)
        })
    }
  )
}

/**
 * Decorates the `ApiKeyStore` and `OrganizationStore` in context with a short-lived cache
 * (Effect's `Cache` behind a map of the records found: concurrent lookups of one digest share
 * one store call). A time to live of zero leaves the stores as they are.
 */
export const AccessCacheLayer = (
  options: AccessCacheOptions
): Layer.Layer<ApiKeyStore | OrganizationStore, never, ApiKeyStore | OrganizationStore> => {
  const timeToLive = Duration.fromInputUnsafe(options.timeToLive)
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
