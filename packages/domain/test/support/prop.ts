import { it } from "@effect/vitest"
import fc from "fast-check"

type ValuesOf<As extends ReadonlyArray<fc.Arbitrary<unknown>>> = { [K in keyof As]: As[K] extends fc.Arbitrary<infer T> ? T : never }

/**
 * A property test over fast-check arbitraries: `@effect/vitest` 4's `it.prop` takes Effect's own
 * `Arbitrary` (or schemas), while these tests keep fast-check as their property library.
 */
export const prop = <const As extends ReadonlyArray<fc.Arbitrary<unknown>>>(
  name: string,
  arbitraries: As,
  property: (values: ValuesOf<As>) => boolean | void,
  options?: { readonly fastCheck?: fc.Parameters<[ValuesOf<As>]> }
): void => {
  it(name, () => {
    const values = fc.tuple(...arbitraries) as unknown as fc.Arbitrary<ValuesOf<As>>
    fc.assert(fc.property(values, property), options?.fastCheck)
  })
}
