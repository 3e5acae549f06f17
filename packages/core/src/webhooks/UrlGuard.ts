/**
 * The SSRF guard for endpoint URLs: a webhook is a request the platform makes
 * on a tenant's behalf, so its target must be a public HTTPS address on port
 * 443. Refused, with the rule named:
 *
 * - other schemes, credentials in the URL, and any port but 443;
 * - IP literals in private (10/8, 172.16/12, 192.168/16, fc00::/7), loopback
 *   (127/8, ::1), link-local (169.254/16, fe80::/10 — the cloud metadata
 *   address 169.254.169.254 among them), CGNAT (100.64/10), unspecified,
 *   multicast and reserved ranges (192.0.0/24, the documentation and
 *   benchmarking nets, the 6to4 relay anycast 192.88.99/24, 240/4);
 * - IPv6 outside global unicast (2000::/3), so every form that embeds an IPv4
 *   address — mapped, translated, compatible, NAT64, discard-only 100::/64 —
 *   and, inside it, Teredo and the rest of 2001::/23, documentation prefixes,
 *   and 6to4 (2002::/16) or ISATAP addresses embedding a refused IPv4;
 * - names: trailing dots (any number) are dropped and an empty label refused;
 *   `localhost`, `*.localhost`, `.internal`, `.local` and metadata names; the
 *   public names known to resolve to loopback (`localtest.me`, `lvh.me`…);
 *   and names that spell a refused IPv4 address — four numeric labels in a
 *   row (`10.0.0.1.example.com`), and on the wildcard-DNS services that answer
 *   with the address in the name (`nip.io`, `sslip.io`, `traefik.me`,
 *   `rbndr.us`, `1u.ms`…) also the dashed and hex forms (`10-0-0-1.nip.io`,
 *   `0a000001.nip.io`).
 *
 * With `localDevelopment` (set by `npm run dev` and the tests, never in
 * production) plain `http`, port 80 and loopback are allowed, loopback on any
 * port, for a receiver on the developer's machine.
 *
 * A name is only checked as written here: what it resolves to is checked at
 * delivery (`Resolver`, `addressRule`). Redirects are never followed at
 * delivery, so a public URL cannot bounce to a private one.
 */
export interface Options {
  readonly localDevelopment: boolean
}

export type Checked = { readonly ok: true; readonly url: URL } | { readonly ok: false; readonly rule: string }

const parseV4 = (host: string): Array<number> | undefined => {
  const parts = host.split(".")
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p))) return undefined
  const n = parts.map(Number)
  return n.every((x) => x <= 255) ? n : undefined
}

const v4Rule = ([a, b, c]: ReadonlyArray<number>, local: boolean): string | undefined => {
  if (a === 127) return local ? undefined : "loopback addresses (127.0.0.0/8) are not allowed"
  if (a === 10 || (a === 172 && b! >= 16 && b! <= 31) || (a === 192 && b === 168)) return "private addresses (10/8, 172.16/12, 192.168/16) are not allowed"
  if (a === 169 && b === 254) return "link-local and cloud metadata addresses (169.254.0.0/16) are not allowed"
  if (a === 100 && b! >= 64 && b! <= 127) return "carrier-grade NAT addresses (100.64.0.0/10) are not allowed"
  if (a === 0) return "unspecified addresses (0.0.0.0/8) are not allowed"
  if (a! >= 224) return "multicast and reserved addresses (224.0.0.0 and above) are not allowed"
  if (a === 192 && b === 0 && (c === 0 || c === 2)) return "reserved addresses (192.0.0.0/24, 192.0.2.0/24) are not allowed"
  if (a === 192 && b === 88 && c === 99) return "the 6to4 relay anycast addresses (192.88.99.0/24) are reserved and not allowed"
  if ((a === 198 && b === 51 && c === 100) || (a === 203 && b === 0 && c === 113)) return "documentation addresses (198.51.100.0/24, 203.0.113.0/24) are not allowed"
  if (a === 198 && (b === 18 || b === 19)) return "benchmarking addresses (198.18.0.0/15) are not allowed"
  return undefined
}

/** Expands an IPv6 literal to 8 groups (handles `::` and an embedded IPv4 tail), or undefined. */
const parseV6 = (host: string): Array<number> | undefined => {
  let text = host
  const embedded = text.match(/^(.*:)(\d+\.\d+\.\d+\.\d+)$/)
  if (embedded) {
    const v4 = parseV4(embedded[2]!)
    if (!v4) return undefined
    text = `${embedded[1]}${((v4[0]! << 8) | v4[1]!).toString(16)}:${((v4[2]! << 8) | v4[3]!).toString(16)}`
  }
  const halves = text.split("::")
  if (halves.length > 2) return undefined
  const group = (s: string) => (s === "" ? [] : s.split(":").map((g) => (/^[0-9a-f]{1,4}$/i.test(g) ? parseInt(g, 16) : NaN)))
  const head = group(halves[0]!)
  const rest = halves.length === 2 ? group(halves[1]!) : []
  const missing = 8 - head.length - rest.length
  if (missing < 0 || (halves.length === 1 && missing !== 0)) return undefined
  const groups = [...head, ...Array<number>(missing).fill(0), ...rest]
  return groups.every((g) => Number.isFinite(g)) ? groups : undefined
}

const v4Of = (high: number, low: number) => [high >> 8, high & 255, low >> 8, low & 255]
const zero = (g: ReadonlyArray<number>, from: number, to: number) => g.slice(from, to).every((x) => x === 0)

/** The rule of an IPv4 address embedded in an IPv6 one, naming the form; "" when the embedded address is public. */
const embeddedRule = (v4: ReadonlyArray<number>, form: string, local: boolean): string => {
  const rule = v4Rule(v4, local)
  return rule === undefined ? "" : `embeds ${v4.join(".")} (${form}): ${rule}`
}

const v6Rule = (g: ReadonlyArray<number>, local: boolean): string | undefined => {
  if (g.every((x) => x === 0)) return "the unspecified address (::) is not allowed"
  if (zero(g, 0, 7) && g[7] === 1) return local ? undefined : "loopback addresses (::1) are not allowed"
  // Forms carrying an IPv4 address: refused whatever it is (write the IPv4 address itself), naming its rule if it has one.
  const carried = (form: string, v4: ReadonlyArray<number>) =>
    embeddedRule(v4, form, local) || `${form} addresses are not allowed: use the IPv4 address ${v4.join(".")} itself`
  if (zero(g, 0, 5) && g[5] === 0xffff) return carried("IPv4-mapped ::ffff:0:0/96", v4Of(g[6]!, g[7]!))
  if (zero(g, 0, 4) && g[4] === 0xffff && g[5] === 0) return carried("IPv4-translated ::ffff:0:0:0/96", v4Of(g[6]!, g[7]!))
  if (zero(g, 0, 6)) return carried("IPv4-compatible ::/96", v4Of(g[6]!, g[7]!))
  if (g[0] === 0x64 && g[1] === 0xff9b && zero(g, 2, 6)) return carried("NAT64 64:ff9b::/96", v4Of(g[6]!, g[7]!))
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return "local-use NAT64 addresses (64:ff9b:1::/48) are not allowed"
  if (g[0] === 0x100 && zero(g, 1, 4)) return "discard-only addresses (100::/64) are not allowed"
  if ((g[0]! & 0xfe00) === 0xfc00) return "unique-local addresses (fc00::/7, fd00::/8) are not allowed"
  if ((g[0]! & 0xffc0) === 0xfe80) return "link-local addresses (fe80::/10) are not allowed"
  if ((g[0]! & 0xffc0) === 0xfec0) return "site-local addresses (fec0::/10) are not allowed"
  if ((g[0]! & 0xff00) === 0xff00) return "multicast addresses (ff00::/8) are not allowed"
  if ((g[0]! & 0xe000) !== 0x2000) return "only global unicast IPv6 addresses (2000::/3) are allowed"
  if (g[0] === 0x2001 && g[1] === 0) return "Teredo addresses (2001::/32) are not allowed"
  if (g[0] === 0x2001 && g[1]! < 0x200) return "IETF protocol assignments (2001::/23) are not allowed"
  if ((g[0] === 0x2001 && g[1] === 0x0db8) || (g[0]! & 0xfff0) === 0x3ff0) return "documentation addresses (2001:db8::/32, 3fff::/20) are not allowed"
  if (g[0] === 0x2002) return embeddedRule(v4Of(g[1]!, g[2]!), "6to4 2002::/16", local) || undefined
  // ISATAP interface identifiers (::0:5efe:a.b.c.d, ::200:5efe:a.b.c.d) carry an IPv4 address in any prefix.
  if ((g[4]! & 0xfdff) === 0 && g[5] === 0x5efe) return embeddedRule(v4Of(g[6]!, g[7]!), "ISATAP", local) || undefined
  return undefined
}

/** Public names that resolve to loopback for everyone (used by developers as a "localhost with subdomains"). */
const loopbackAliases = ["localtest.me", "lvh.me", "vcap.me", "fuf.me", "lacolhost.com", "localhost.direct", "smackaho.st"]
/** Wildcard-DNS services that answer with the address written in the name (dotted, dashed or hex). */
const addressInNameServices = ["nip.io", "sslip.io", "xip.io", "traefik.me", "rbndr.us", "1u.ms", "nip.direct", "backname.io"]

const within = (host: string, domain: string) => host === domain || host.endsWith(`.${domain}`)

/** Every IPv4 address a name spells as four numeric labels in a row (`…10.0.0.1.example.com`). */
const dottedAddresses = (labels: ReadonlyArray<string>) => {
  const found: Array<Array<number>> = []
  for (let i = 0; i + 4 <= labels.length; i++) {
    const v4 = parseV4(labels.slice(i, i + 4).join("."))
    if (v4) found.push(v4)
  }
  return found
}

/** On an address-in-name service, also the dashed (`10-0-0-1`, `a-10.0.0.1-b`) and hex (`0a000001`) forms. */
const spelledAddresses = (host: string) => {
  const found: Array<Array<number>> = []
  for (const m of host.matchAll(/(?<![\d])(\d{1,3})[.-](\d{1,3})[.-](\d{1,3})[.-](\d{1,3})(?![\d])/g)) {
    const v4 = parseV4(`${m[1]}.${m[2]}.${m[3]}.${m[4]}`)
    if (v4) found.push(v4)
  }
  for (const label of host.split(/[.-]/)) {
    if (/^[0-9a-f]{8}$/.test(label)) found.push(v4Of(parseInt(label.slice(0, 4), 16), parseInt(label.slice(4), 16)))
  }
  return found
}

const nameRule = (host: string, local: boolean): string | undefined => {
  if (host === "localhost" || host.endsWith(".localhost")) return local ? undefined : "loopback names (localhost) are not allowed"
  if (/(^|\.)(internal|local)$/.test(host) || /^(metadata|instance-data)$/.test(host)) return "internal and metadata host names are not allowed"
  if (!host.includes(".")) return "must be a public host name (with a dot)"
  if (loopbackAliases.some((d) => within(host, d))) return local ? undefined : `loopback names are not allowed (${host} resolves to 127.0.0.1)`
  const labels = host.split(".")
  const service = addressInNameServices.some((d) => within(host, d))
  for (const v4 of service ? spelledAddresses(host) : dottedAddresses(labels)) {
    const rule = v4Rule(v4, local)
    if (rule) return `names that spell ${v4.join(".")} are not allowed: ${rule}`
  }
  if (service) {
    // sslip.io's IPv6 form: the address with dashes for colons (`--1.sslip.io` is ::1).
    for (const label of labels) {
      const groups = label.includes("-") ? parseV6(label.replace(/-/g, ":")) : undefined
      const rule = groups && v6Rule(groups, local)
      if (rule) return `names that spell ${label.replace(/-/g, ":")} are not allowed: ${rule}`
    }
  }
  return undefined
}

/** The host of a URL without brackets, lower-cased, with every trailing dot dropped. */
export const hostOf = (url: URL) => url.hostname.toLowerCase().replace(/^\[(.*)\]$/, "$1").replace(/\.+$/, "")

/** Whether a host (as `hostOf` gives it) is an IP literal — nothing to resolve. */
export const isAddress = (host: string) => parseV4(host) !== undefined || host.includes(":")

const isLoopback = (host: string) => {
  const v4 = parseV4(host)
  if (v4) return v4[0] === 127
  const g = host.includes(":") ? parseV6(host) : undefined
  if (g) return zero(g, 0, 7) && g[7] === 1
  return host === "localhost" || host.endsWith(".localhost")
}

/**
 * The rule an address a name resolved to breaks, or undefined when it is public: IPv4 dotted decimal or IPv6
 * text as DNS answers carry them. Anything unparseable is refused (never sent unchecked).
 */
export const addressRule = (address: string, options: Options): string | undefined => {
  const v4 = parseV4(address)
  if (v4) return v4Rule(v4, options.localDevelopment)
  const g = address.includes(":") ? parseV6(address.toLowerCase()) : undefined
  if (g) return v6Rule(g, options.localDevelopment)
  return `${JSON.stringify(address.slice(0, 60))} is not an IP address`
}

/** The URL if it is an acceptable endpoint, else the rule it breaks. */
export const check = (raw: string, options: Options): Checked => {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return { ok: false, rule: "must be an absolute URL, e.g. https://example.com/webhooks" }
  }
  if (raw.length > 2_048) return { ok: false, rule: "must be at most 2,048 characters" }
  const local = options.localDevelopment
  if (url.protocol !== "https:" && !(local && url.protocol === "http:")) {
    return { ok: false, rule: local ? "must use https (or http in local development)" : "must use https" }
  }
  if (url.username !== "" || url.password !== "") return { ok: false, rule: "must not contain credentials" }
  const host = hostOf(url)
  if (host === "") return { ok: false, rule: "must have a host" }
  const rule = hostRule(url, host, local) ?? portRule(url, host, local)
  return rule === undefined ? { ok: true, url } : { ok: false, rule }
}

const hostRule = (url: URL, host: string, local: boolean): string | undefined => {
  if (url.hostname.startsWith("[")) {
    const groups = parseV6(host)
    return groups ? v6Rule(groups, local) : "has an invalid IPv6 address"
  }
  if (host.split(".").some((label) => label === "")) return "must not have an empty label (two dots in a row, or a leading dot)"
  const v4 = parseV4(host)
  if (v4) return v4Rule(v4, local)
  if (/^[\d.]+$/.test(host) || /^0x/i.test(host)) return "IP addresses must be written in dotted decimal"
  return nameRule(host, local)
}

/** 443 only; in local development also 80, and any port on loopback (a receiver on the developer's machine). */
const portRule = (url: URL, host: string, local: boolean): string | undefined => {
  const port = url.port === "" ? (url.protocol === "https:" ? 443 : 80) : Number(url.port)
  if (port === 443 || (local && (port === 80 || isLoopback(host)))) return undefined
  return local ? `port ${port} is not allowed: use 443 or 80 (any port on loopback in local development)` : `port ${port} is not allowed: use 443`
}
