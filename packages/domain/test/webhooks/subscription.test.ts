import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import {
  type AddressClass,
  checkActivation,
  checkEndpointUrl,
  classifyAddress,
  INITIAL_WEBHOOK_READINESS,
  parseIpv6,
  WEBHOOK_READINESS_ITEMS,
  type WebhookReadiness
} from "../../src/webhooks/index.js"
import { prop } from "../support/prop.js"

describe("activation readiness (contract 6.4, docs/webhooks.md)", () => {
  const allConfirmed: WebhookReadiness = {
    approved_routes: "confirmed",
    least_privilege_scopes: "confirmed",
    signing_setup: "confirmed",
    receiver_correlation: "confirmed",
    network_allowlisting: "confirmed",
    delivery_and_audit_readiness: "confirmed"
  }

  it("lists the six items in contract order", () => {
    expect(WEBHOOK_READINESS_ITEMS).toEqual([
      "approved_routes",
      "least_privilege_scopes",
      "signing_setup",
      "receiver_correlation",
      "network_allowlisting",
      "delivery_and_audit_readiness"
    ])
  })

  it("a new subscription is blocked by every item; receiver correlation starts not_confirmed_runtime_blocked", () => {
    expect(INITIAL_WEBHOOK_READINESS.receiver_correlation).toBe("not_confirmed_runtime_blocked")
    expect(checkActivation(INITIAL_WEBHOOK_READINESS)).toEqual(WEBHOOK_READINESS_ITEMS)
  })

  it("activation needs every item confirmed", () => {
    expect(checkActivation(allConfirmed)).toEqual([])
    for (const item of WEBHOOK_READINESS_ITEMS) {
      expect(checkActivation({ ...allConfirmed, [item]: "not_confirmed" })).toEqual([item])
    }
  })

  it("receiver correlation not_confirmed_runtime_blocked blocks activation alone", () => {
    expect(checkActivation({ ...allConfirmed, receiver_correlation: "not_confirmed_runtime_blocked" })).toEqual([
      "receiver_correlation"
    ])
  })

  it("network allowlisting may be not_applicable; no other item may", () => {
    expect(checkActivation({ ...allConfirmed, network_allowlisting: "not_applicable" })).toEqual([])
    for (const item of WEBHOOK_READINESS_ITEMS.filter((i) => i !== "network_allowlisting")) {
      expect(checkActivation({ ...allConfirmed, [item]: "not_applicable" })).toEqual([item])
    }
  })

  it("an absent item counts as missing", () => {
    const { signing_setup: _omitted, ...rest } = allConfirmed
    expect(checkActivation(rest)).toEqual(["signing_setup"])
  })
})

describe("classifyAddress", () => {
  const cases: ReadonlyArray<readonly [string, AddressClass]> = [
    ["93.184.216.34", "public"],
    ["8.8.8.8", "public"],
    ["2606:4700:4700::1111", "public"],
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["::1", "loopback"],
    ["0:0:0:0:0:0:0:1", "loopback"],
    ["10.0.0.1", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["172.32.0.1", "public"],
    ["172.15.255.255", "public"],
    ["192.168.1.1", "private"],
    ["100.64.0.1", "private"],
    ["100.127.255.255", "private"],
    ["100.128.0.0", "public"],
    ["100.63.255.255", "public"],
    ["fc00::1", "private"],
    ["fd12:3456:789a::1", "private"],
    ["fec0::1", "private"],
    ["169.254.1.1", "link_local"],
    ["fe80::1", "link_local"],
    ["fe80::1%eth0", "link_local"],
    ["febf::1", "link_local"],
    ["169.254.169.254", "metadata"],
    ["169.254.170.2", "metadata"],
    ["100.100.100.200", "metadata"],
    ["fd00:ec2::254", "metadata"],
    ["FD00:EC2:0:0:0:0:0:254", "metadata"],
    ["0.0.0.0", "unspecified"],
    ["::", "unspecified"],
    ["224.0.0.1", "reserved"],
    ["255.255.255.255", "reserved"],
    ["192.0.2.10", "reserved"],
    ["ff02::1", "reserved"],
    ["2001:db8::1", "reserved"],
    // IPv4 embedded in IPv6 is judged by the IPv4 address.
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:7f00:1", "loopback"],
    ["::ffff:10.1.2.3", "private"],
    ["::ffff:169.254.169.254", "metadata"],
    ["::ffff:a9fe:a9fe", "metadata"],
    ["::ffff:8.8.8.8", "public"],
    ["0:0:0:0:0:ffff:c0a8:0101", "private"],
    ["::ffff:0:127.0.0.1", "loopback"],
    ["::127.0.0.1", "loopback"],
    ["64:ff9b::169.254.169.254", "metadata"],
    ["64:ff9b::8.8.8.8", "public"],
    ["2002:c0a8:0101::1", "private"],
    ["[::1]", "loopback"],
    ["", "invalid"],
    ["localhost", "invalid"],
    ["256.0.0.1", "invalid"],
    ["010.0.0.1", "invalid"],
    ["1.2.3", "invalid"],
    ["1::2::3", "invalid"],
    ["1:2:3:4:5:6:7:8:9", "invalid"],
    ["1:2:3:4:5:6:7", "invalid"],
    ["12345::1", "invalid"],
    ["::ffff:1.2.3.256", "invalid"],
    ["g::1", "invalid"]
  ]

  it.each(cases)("%s is %s", (address, expected) => {
    expect(classifyAddress(address)).toBe(expected)
  })

  it("parseIpv6 expands :: and a dotted tail", () => {
    expect(parseIpv6("fd00:ec2::254")).toEqual([0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254])
    expect(parseIpv6("::ffff:1.2.3.4")).toEqual([0, 0, 0, 0, 0, 0xffff, 0x0102, 0x0304])
    expect(parseIpv6("1::")).toEqual([1, 0, 0, 0, 0, 0, 0, 0])
  })

  prop("every IPv4 address in 10/8, 172.16/12, 192.168/16, 100.64/10 is private, also when IPv4-mapped", [
    fc.oneof(
      fc.tuple(fc.constant(10), fc.nat(255), fc.nat(255), fc.nat(255)),
      fc.tuple(fc.constant(172), fc.integer({ min: 16, max: 31 }), fc.nat(255), fc.nat(255)),
      fc.tuple(fc.constant(192), fc.constant(168), fc.nat(255), fc.nat(255)),
      fc.tuple(fc.constant(100), fc.integer({ min: 64, max: 127 }), fc.nat(255), fc.nat(255))
    )
  ], ([octets]) => {
    fc.pre(octets.join(".") !== "100.100.100.200")
    expect(classifyAddress(octets.join("."))).toBe("private")
    expect(classifyAddress(`::ffff:${octets.join(".")}`)).toBe("private")
  })

  prop("never throws on arbitrary text", [fc.string({ unit: "binary" })], ([text]) => {
    expect(() => classifyAddress(text)).not.toThrow()
  })
})

describe("checkEndpointUrl (docs/webhooks.md: https, no loopback/private/link-local/metadata in production)", () => {
  const production = (url: string, resolvedAddresses: ReadonlyArray<string>) =>
    checkEndpointUrl({ url, resolvedAddresses, environment: "production" })
  const sandbox = (url: string, resolvedAddresses: ReadonlyArray<string>) =>
    checkEndpointUrl({ url, resolvedAddresses, environment: "sandbox" })

  it("production allows an https URL resolving to public addresses only", () => {
    expect(production("https://hooks.example.com/receive", ["93.184.216.34", "2606:4700:4700::1111"])).toEqual({ _tag: "Allowed" })
  })

  it("production refuses http", () => {
    expect(production("http://hooks.example.com/receive", ["93.184.216.34"])).toEqual({
      _tag: "Refused",
      problems: ["scheme_not_allowed"]
    })
  })

  it("production refuses each forbidden address class, even next to a public one", () => {
    const refused = (address: string) => production("https://hooks.example.com/", ["93.184.216.34", address])
    expect(refused("127.0.0.1")).toEqual({ _tag: "Refused", problems: ["loopback_address"] })
    expect(refused("::1")).toEqual({ _tag: "Refused", problems: ["loopback_address"] })
    expect(refused("10.0.0.5")).toEqual({ _tag: "Refused", problems: ["private_address"] })
    expect(refused("100.64.1.1")).toEqual({ _tag: "Refused", problems: ["private_address"] })
    expect(refused("fd00::5")).toEqual({ _tag: "Refused", problems: ["private_address"] })
    expect(refused("169.254.10.10")).toEqual({ _tag: "Refused", problems: ["link_local_address"] })
    expect(refused("fe80::5")).toEqual({ _tag: "Refused", problems: ["link_local_address"] })
    expect(refused("169.254.169.254")).toEqual({ _tag: "Refused", problems: ["metadata_address"] })
    expect(refused("fd00:ec2::254")).toEqual({ _tag: "Refused", problems: ["metadata_address"] })
    expect(refused("::ffff:169.254.169.254")).toEqual({ _tag: "Refused", problems: ["metadata_address"] })
    expect(refused("0.0.0.0")).toEqual({ _tag: "Refused", problems: ["unspecified_address"] })
    expect(refused("not-an-ip")).toEqual({ _tag: "Refused", problems: ["invalid_address"] })
  })

  it("checks an IP-literal host itself", () => {
    expect(production("https://127.0.0.1/", [])).toEqual({ _tag: "Refused", problems: ["loopback_address"] })
    expect(production("https://[::ffff:a9fe:a9fe]/", [])).toEqual({ _tag: "Refused", problems: ["metadata_address"] })
    expect(production("https://0x7f.1/", [])).toEqual({ _tag: "Refused", problems: ["loopback_address"] })
    expect(production("https://93.184.216.34/", [])).toEqual({ _tag: "Allowed" })
  })

  it("refuses a URL that does not parse, has no addresses, or carries credentials", () => {
    expect(production("hooks.example.com", ["93.184.216.34"])).toEqual({ _tag: "Refused", problems: ["invalid_url"] })
    expect(production("https://hooks.example.com/", [])).toEqual({ _tag: "Refused", problems: ["no_resolved_addresses"] })
    expect(production("https://user:pass@hooks.example.com/", ["93.184.216.34"])).toEqual({
      _tag: "Refused",
      problems: ["credentials_in_url"]
    })
    expect(sandbox("ftp://hooks.example.com/", ["93.184.216.34"])).toEqual({ _tag: "Refused", problems: ["scheme_not_allowed"] })
  })

  it("reports every problem at once", () => {
    expect(production("http://hooks.example.com/", ["127.0.0.1", "10.0.0.1"])).toEqual({
      _tag: "Refused",
      problems: ["scheme_not_allowed", "loopback_address", "private_address"]
    })
  })

  it("the sandbox allows http and loopback, nothing else", () => {
    expect(sandbox("http://localhost:4000/hooks", ["127.0.0.1", "::1"])).toEqual({ _tag: "Allowed" })
    expect(sandbox("http://[::1]:4000/hooks", [])).toEqual({ _tag: "Allowed" })
    expect(sandbox("https://hooks.example.com/", ["93.184.216.34"])).toEqual({ _tag: "Allowed" })
    expect(sandbox("http://hooks.internal/", ["10.0.0.1"])).toEqual({ _tag: "Refused", problems: ["private_address"] })
    expect(sandbox("http://metadata/", ["169.254.169.254"])).toEqual({ _tag: "Refused", problems: ["metadata_address"] })
  })
})
