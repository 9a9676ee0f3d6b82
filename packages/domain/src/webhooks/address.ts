/**
 * Address rules for webhook endpoints (docs/webhooks.md): in production an endpoint
 * must not resolve to loopback, private, link-local or metadata addresses. The domain does no
 * DNS: the adapter resolves the host and hands the addresses here. Small hand-written parsers,
 * because the domain depends on effect alone.
 */

export type AddressClass =
  | "public"
  | "loopback"
  | "private"
  | "link_local"
  | "metadata"
  | "unspecified"
  | "reserved"
  | "invalid"

/** Dotted-quad IPv4, four decimal octets without leading zeros; `undefined` otherwise. */
export const parseIpv4 = (text: string): readonly [number, number, number, number] | undefined => {
  const match = /^(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})$/.exec(text)
  if (match === null) return undefined
  const octets = [Number(match[1]), Number(match[2]), Number(match[3]), Number(match[4])] as const
  return octets.every((octet) => octet <= 255) ? octets : undefined
}

const parseGroups = (text: string): Array<number> | undefined => {
  if (text === "") return []
  const groups: Array<number> = []
  for (const group of text.split(":")) {
    if (!/^[0-9a-f]{1,4}$/.test(group)) return undefined
    groups.push(parseInt(group, 16))
  }
  return groups
}

/**
 * IPv6 text (RFC 4291: `::` compression, a dotted IPv4 tail, a `%zone` suffix, which is
 * dropped) as its eight 16-bit groups; `undefined` when it is not one.
 */
export const parseIpv6 = (input: string): ReadonlyArray<number> | undefined => {
  let text = input.toLowerCase()
  const zone = text.indexOf("%")
  if (zone !== -1) text = text.slice(0, zone)
  const lastColon = text.lastIndexOf(":")
  if (lastColon === -1) return undefined
  const tail = text.slice(lastColon + 1)
  if (tail.includes(".")) {
    const ipv4 = parseIpv4(tail)
    if (ipv4 === undefined) return undefined
    const prefix = text.slice(0, lastColon + 1)
    const hex = `${((ipv4[0] << 8) | ipv4[1]).toString(16)}:${((ipv4[2] << 8) | ipv4[3]).toString(16)}`
    text = `${prefix}${hex}`
  }
  const halves = text.split("::")
  if (halves.length > 2) return undefined
  if (halves.length === 1) {
    const groups = parseGroups(text)
    return groups !== undefined && groups.length === 8 ? groups : undefined
  }
  const head = parseGroups(halves[0] ?? "")
  const rest = parseGroups(halves[1] ?? "")
  if (head === undefined || rest === undefined || head.length + rest.length > 7) return undefined
  return [...head, ...Array<number>(8 - head.length - rest.length).fill(0), ...rest]
}

const inIpv4Range = (address: readonly [number, number, number, number], base: string, bits: number): boolean => {
  const network = parseIpv4(base)
  if (network === undefined) return false
  const toNumber = (octets: readonly [number, number, number, number]) =>
    ((octets[0] << 24) >>> 0) + (octets[1] << 16) + (octets[2] << 8) + octets[3]
  const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0
  return ((toNumber(address) & mask) >>> 0) === ((toNumber(network) & mask) >>> 0)
}

/** Cloud instance-metadata services: AWS, GCP, Azure, Oracle (169.254.169.254), ECS/EKS, Alibaba. */
const IPV4_METADATA = ["169.254.169.254", "169.254.170.2", "169.254.170.23", "100.100.100.200"]
const IPV6_METADATA = ["fd00:ec2::254", "fd00:ec2::23"]

const IPV4_RANGES: ReadonlyArray<readonly [string, number, AddressClass]> = [
  ["0.0.0.0", 8, "unspecified"],
  ["127.0.0.0", 8, "loopback"],
  ["169.254.0.0", 16, "link_local"],
  ["10.0.0.0", 8, "private"],
  ["172.16.0.0", 12, "private"],
  ["192.168.0.0", 16, "private"],
  // Carrier-grade NAT: not reachable from the internet, so treated as private.
  ["100.64.0.0", 10, "private"],
  ["192.0.0.0", 24, "reserved"],
  ["192.0.2.0", 24, "reserved"],
  ["198.18.0.0", 15, "reserved"],
  ["198.51.100.0", 24, "reserved"],
  ["203.0.113.0", 24, "reserved"],
  ["224.0.0.0", 4, "reserved"],
  ["240.0.0.0", 4, "reserved"]
]

const classifyIpv4 = (address: readonly [number, number, number, number]): AddressClass => {
  const text = address.join(".")
  if (IPV4_METADATA.includes(text)) return "metadata"
  for (const [base, bits, addressClass] of IPV4_RANGES) {
    if (inIpv4Range(address, base, bits)) return addressClass
  }
  return "public"
}

const embeddedIpv4 = (high: number, low: number): readonly [number, number, number, number] => [
  high >> 8,
  high & 0xff,
  low >> 8,
  low & 0xff
]

const groupsEqual = (a: ReadonlyArray<number>, b: ReadonlyArray<number>) => a.every((value, i) => value === b[i])

const classifyIpv6 = (groups: ReadonlyArray<number>): AddressClass => {
  const g = (i: number) => groups[i] ?? 0
  if (IPV6_METADATA.some((text) => groupsEqual(groups, parseIpv6(text) ?? []))) return "metadata"
  const firstSixZero = [0, 1, 2, 3, 4, 5].every((i) => g(i) === 0)
  if (firstSixZero && g(6) === 0 && g(7) === 0) return "unspecified"
  if (firstSixZero && g(6) === 0 && g(7) === 1) return "loopback"
  // IPv4-mapped ::ffff:a.b.c.d, IPv4-translated ::ffff:0:a.b.c.d, the deprecated IPv4-compatible
  // ::a.b.c.d and NAT64 64:ff9b::a.b.c.d all reach an IPv4 address: judge that address.
  const mapped = [0, 1, 2, 3].every((i) => g(i) === 0) && g(4) === 0 && g(5) === 0xffff
  const translated = [0, 1, 2, 3].every((i) => g(i) === 0) && g(4) === 0xffff && g(5) === 0
  const nat64 = g(0) === 0x64 && g(1) === 0xff9b && [2, 3, 4, 5].every((i) => g(i) === 0)
  if (mapped || translated || firstSixZero || nat64) return classifyIpv4(embeddedIpv4(g(6), g(7)))
  // 6to4 2002:aabb:ccdd::/48 embeds a.b.c.d in groups 1 and 2.
  if (g(0) === 0x2002) return classifyIpv4(embeddedIpv4(g(1), g(2)))
  if ((g(0) & 0xffc0) === 0xfe80) return "link_local"
  if ((g(0) & 0xfe00) === 0xfc00) return "private" // unique-local fc00::/7
  if ((g(0) & 0xffc0) === 0xfec0) return "private" // deprecated site-local fec0::/10
  if (g(0) === 0x64 && g(1) === 0xff9b && g(2) === 1) return "private" // local-use NAT64 64:ff9b:1::/48
  if ((g(0) & 0xff00) === 0xff00) return "reserved" // multicast
  if (g(0) === 0x2001 && g(1) === 0x0db8) return "reserved" // documentation
  if (g(0) === 0x2001 && g(1) < 0x0200) return "reserved" // IETF protocol assignments, Teredo
  if (g(0) === 0x0100 && g(1) === 0 && g(2) === 0 && g(3) === 0) return "reserved" // discard-only
  return "public"
}

/** The class of an IP address in text form (IPv4 or IPv6, optionally in brackets). */
export const classifyAddress = (address: string): AddressClass => {
  const text = address.startsWith("[") && address.endsWith("]") ? address.slice(1, -1) : address
  const ipv4 = parseIpv4(text)
  if (ipv4 !== undefined) return classifyIpv4(ipv4)
  const ipv6 = parseIpv6(text)
  return ipv6 === undefined ? "invalid" : classifyIpv6(ipv6)
}
