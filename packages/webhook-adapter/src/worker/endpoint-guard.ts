import { lookup as dnsLookup } from "node:dns"
import type { LookupFunction } from "node:net"
import { checkEndpointUrl, type EndpointUrlCheck, type EndpointUrlProblem, type WebhookEnvironment } from "@clinical-api/domain"
import { Effect } from "effect"

/**
 * The endpoint rules of docs/webhooks.md applied by the adapter, which does the DNS the domain
 * cannot: in production https only and no loopback, private, link-local or metadata address
 * after resolution; the sandbox also allows http and loopback.
 */

/** The error code of a connection refused by the guard (it never reaches the network). */
export const ADDRESS_REFUSED_CODE = "ERR_WEBHOOK_ADDRESS_REFUSED"

/** Every address `url`'s host resolves to (an IP literal resolves to itself); empty when it does not resolve. */
export const resolveEndpointAddresses = (url: string): Effect.Effect<ReadonlyArray<string>> =>
  Effect.callback<ReadonlyArray<string>>((resume) => {
    let hostname: string
    try {
      hostname = new URL(url).hostname
    } catch {
      resume(Effect.succeed([]))
      return
    }
    const host = hostname.startsWith("[") ? hostname.slice(1, -1) : hostname
    dnsLookup(host, { all: true }, (error, addresses) => {
      resume(Effect.succeed(error === null ? addresses.map((entry) => entry.address) : []))
    })
  })

/** `checkEndpointUrl` after resolving the host now (subscription creation). */
export const checkEndpointWithDns = (url: string, environment: WebhookEnvironment): Effect.Effect<EndpointUrlCheck> =>
  Effect.map(resolveEndpointAddresses(url), (resolvedAddresses) => checkEndpointUrl({ url, resolvedAddresses, environment }))

/**
 * The checks that need no DNS: scheme, credentials, and an IP-literal host (Node connects to
 * a literal without calling `lookup`, so the guarded lookup would never see it).
 */
export const checkEndpointBeforeLookup = (
  url: string,
  environment: WebhookEnvironment
): ReadonlyArray<EndpointUrlProblem> => {
  const check = checkEndpointUrl({ url, resolvedAddresses: [], environment })
  return check._tag === "Allowed" ? [] : check.problems.filter((problem) => problem !== "no_resolved_addresses")
}

/**
 * A `lookup` for `deliverWebhook` that resolves the host and refuses the connection (error
 * `ERR_WEBHOOK_ADDRESS_REFUSED`, before any byte is sent) when any address it resolves to is
 * forbidden in `environment`. The connection then goes only to addresses that were checked.
 */
export const guardedLookup = (
  url: string,
  environment: WebhookEnvironment,
  onRefused: (problems: ReadonlyArray<EndpointUrlProblem>) => void = () => undefined
): LookupFunction =>
  (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error !== null) {
        callback(error, "")
        return
      }
      const check = checkEndpointUrl({ url, resolvedAddresses: addresses.map((entry) => entry.address), environment })
      if (check._tag === "Refused") {
        onRefused(check.problems)
        const refused: NodeJS.ErrnoException = new Error(`endpoint address refused: ${check.problems.join(", ")}`)
        refused.code = ADDRESS_REFUSED_CODE
        callback(refused, "")
        return
      }
      const first = addresses[0]
      if (options.all === true) callback(null, addresses)
      else if (first === undefined) callback(Object.assign(new Error("no address"), { code: "ENOTFOUND" }), "")
      else callback(null, first.address, first.family)
    })
  }
