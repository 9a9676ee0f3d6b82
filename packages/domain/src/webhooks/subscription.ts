import { Schema } from "effect"
import { type AddressClass, classifyAddress, parseIpv4, parseIpv6 } from "./address.js"

/** Clinical subscriptions start `disabled`; activation writes a new `active` revision (docs/webhooks.md). */
export const WebhookSubscriptionStatus = Schema.Literals(["disabled", "active"])
export type WebhookSubscriptionStatus = typeof WebhookSubscriptionStatus.Type

/** Contract 6.4: what activation confirms, in the contract's order. */
export const WebhookReadinessItem = Schema.Literals([
  "approved_routes",
  "least_privilege_scopes",
  "signing_setup",
  "receiver_correlation",
  "network_allowlisting",
  "delivery_and_audit_readiness"
])
export type WebhookReadinessItem = typeof WebhookReadinessItem.Type
export const WEBHOOK_READINESS_ITEMS: ReadonlyArray<WebhookReadinessItem> = WebhookReadinessItem.literals

/**
 * - `confirmed`: an operator confirmed the item.
 * - `not_confirmed`: not yet.
 * - `not_applicable`: only for network allowlisting ("when applicable"); counts as satisfied.
 * - `not_confirmed_runtime_blocked`: receiver correlation's initial status (contract 6.4): it
 *   blocks activation until an operator confirms it.
 */
export const WebhookReadinessStatus = Schema.Literals(["confirmed", "not_confirmed", "not_applicable", "not_confirmed_runtime_blocked"])
export type WebhookReadinessStatus = typeof WebhookReadinessStatus.Type

export type WebhookReadiness = { readonly [Item in WebhookReadinessItem]: WebhookReadinessStatus }

/** The readiness of a new subscription: nothing confirmed, receiver correlation runtime-blocked. */
export const INITIAL_WEBHOOK_READINESS: WebhookReadiness = {
  approved_routes: "not_confirmed",
  least_privilege_scopes: "not_confirmed",
  signing_setup: "not_confirmed",
  receiver_correlation: "not_confirmed_runtime_blocked",
  network_allowlisting: "not_confirmed",
  delivery_and_audit_readiness: "not_confirmed"
}

const isSatisfied = (item: WebhookReadinessItem, status: WebhookReadinessStatus | undefined): boolean =>
  status === "confirmed" || (item === "network_allowlisting" && status === "not_applicable")

/**
 * The readiness items that still block activation, in contract order; empty means the
 * subscription may be activated. An item that is absent counts as not confirmed.
 */
export const checkActivation = (readiness: Partial<WebhookReadiness>): ReadonlyArray<WebhookReadinessItem> =>
  WEBHOOK_READINESS_ITEMS.filter((item) => !isSatisfied(item, readiness[item]))

export type WebhookEnvironment = "sandbox" | "production"

export type EndpointUrlProblem =
  | "invalid_url"
  | "scheme_not_allowed"
  | "credentials_in_url"
  | "no_resolved_addresses"
  | "invalid_address"
  | "loopback_address"
  | "private_address"
  | "link_local_address"
  | "metadata_address"
  | "unspecified_address"
  | "reserved_address"

export type EndpointUrlCheck =
  | { readonly _tag: "Allowed" }
  | { readonly _tag: "Refused"; readonly problems: ReadonlyArray<EndpointUrlProblem> }

const problemOf: { readonly [C in AddressClass]: EndpointUrlProblem | undefined } = {
  public: undefined,
  loopback: "loopback_address",
  private: "private_address",
  link_local: "link_local_address",
  metadata: "metadata_address",
  unspecified: "unspecified_address",
  reserved: "reserved_address",
  invalid: "invalid_address"
}

/**
 * docs/webhooks.md: in production an endpoint URL is https and none of the addresses its host
 * resolves to is loopback, private (including carrier-grade NAT 100.64/10 and unique-local
 * fc00::/7), link-local, metadata, unspecified or otherwise reserved; IPv4-mapped and other
 * IPv4-embedding IPv6 forms are judged by their IPv4 address. The sandbox also allows http and
 * loopback addresses, nothing else. A URL with user name or password is refused (a credential
 * would be stored and logged with the URL). Every address must pass, since any may be used.
 *
 * `resolvedAddresses` are the host's addresses as the adapter resolved them; an IP-literal host
 * is checked itself as well. The adapter should connect only to the addresses checked here.
 */
export const checkEndpointUrl = (input: {
  readonly url: string
  readonly resolvedAddresses: ReadonlyArray<string>
  readonly environment: WebhookEnvironment
}): EndpointUrlCheck => {
  let url: URL
  try {
    url = new URL(input.url)
  } catch {
    return { _tag: "Refused", problems: ["invalid_url"] }
  }
  const problems = new Set<EndpointUrlProblem>()
  const allowedSchemes = input.environment === "production" ? ["https:"] : ["https:", "http:"]
  if (!allowedSchemes.includes(url.protocol)) problems.add("scheme_not_allowed")
  if (url.username !== "" || url.password !== "") problems.add("credentials_in_url")

  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname
  const literal = parseIpv4(host) !== undefined || parseIpv6(host) !== undefined ? [host] : []
  const addresses = [...literal, ...input.resolvedAddresses]
  if (addresses.length === 0) problems.add("no_resolved_addresses")
  for (const address of addresses) {
    const addressClass = classifyAddress(address)
    if (input.environment === "sandbox" && addressClass === "loopback") continue
    const problem = problemOf[addressClass]
    if (problem !== undefined) problems.add(problem)
  }
  return problems.size === 0 ? { _tag: "Allowed" } : { _tag: "Refused", problems: [...problems] }
}
