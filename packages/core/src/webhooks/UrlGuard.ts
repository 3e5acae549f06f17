/**
 * The SSRF guard for endpoint URLs: a webhook is a request the platform makes
 * on a tenant's behalf, so its target must be a public HTTPS address. Refused,
 * with the rule named: other schemes, credentials in the URL, IP literals and
 * names in private (10/8, 172.16/12, 192.168/16, fc00::/7), loopback
 * (127/8, ::1, localhost), link-local (169.254/16, fe80::/10 — the cloud
 * metadata address 169.254.169.254 among them), CGNAT (100.64/10),
 * unspecified, multicast and reserved ranges, IPv4-mapped IPv6 of any of
 * those, and internal metadata names. With `localDevelopment` (set by
 * `npm run dev` and the tests, never in production) plain `http` and loopback
 * are allowed, for a receiver on the developer's machine. Redirects are never
 * followed at delivery, so a public URL cannot bounce to a private one.
 */
export interface Options {
  readonly localDevelopment: boolean
}

const parseV4 = (host: string): Array<number> | undefined => {
  const parts = host.split(".")
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p))) return undefined
  const n = parts.map(Number)
  return n.every((x) => x <= 255) ? n : undefined
}

const v4Rule = ([a, b]: Array<number>, local: boolean): string | undefined => {
  if (a === 127) return local ? undefined : "loopback addresses (127.0.0.0/8) are not allowed"
  if (a === 10 || (a === 172 && b! >= 16 && b! <= 31) || (a === 192 && b === 168)) return "private addresses (10/8, 172.16/12, 192.168/16) are not allowed"
  if (a === 169 && b === 254) return "link-local and cloud metadata addresses (169.254.0.0/16) are not allowed"
  if (a === 100 && b! >= 64 && b! <= 127) return "carrier-grade NAT addresses (100.64.0.0/10) are not allowed"
  if (a === 0) return "unspecified addresses (0.0.0.0/8) are not allowed"
  if (a! >= 224) return "multicast and reserved addresses (224.0.0.0 and above) are not allowed"
  if (a === 192 && b === 0) return "reserved addresses (192.0.0.0/24, 192.0.2.0/24) are not allowed"
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

const v6Rule = (g: Array<number>, local: boolean): string | undefined => {
  if (g.every((x) => x === 0)) return "the unspecified address (::) is not allowed"
  if (g.slice(0, 7).every((x) => x === 0) && g[7] === 1) return local ? undefined : "loopback addresses (::1) are not allowed"
  if (g.slice(0, 5).every((x) => x === 0) && (g[5] === 0xffff || g[5] === 0)) {
    return v4Rule([g[6]! >> 8, g[6]! & 255, g[7]! >> 8, g[7]! & 255], local)
  }
  if ((g[0]! & 0xfe00) === 0xfc00) return "unique-local addresses (fc00::/7, fd00::/8) are not allowed"
  if ((g[0]! & 0xffc0) === 0xfe80) return "link-local addresses (fe80::/10) are not allowed"
  if ((g[0]! & 0xff00) === 0xff00) return "multicast addresses (ff00::/8) are not allowed"
  if (g[0] === 0x2001 && g[1] === 0x0db8) return "documentation addresses (2001:db8::/32) are not allowed"
  if (g[0] === 0x64 && g[1] === 0xff9b) return "NAT64 addresses (64:ff9b::/96) are not allowed"
  return undefined
}

const blockedNames = [/^localhost$/, /\.localhost$/, /^metadata\.google\.internal$/, /\.internal$/, /\.local$/, /^metadata$/, /^instance-data$/]

/** The URL if it is an acceptable endpoint, else the rule it breaks. */
export const check = (raw: string, options: Options): { readonly ok: true; readonly url: URL } | { readonly ok: false; readonly rule: string } => {
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
  const host = url.hostname.toLowerCase().replace(/\.$/, "")
  if (host === "") return { ok: false, rule: "must have a host" }
  if (host.startsWith("[")) {
    const groups = parseV6(host.slice(1, -1))
    if (!groups) return { ok: false, rule: "has an invalid IPv6 address" }
    const rule = v6Rule(groups, local)
    return rule ? { ok: false, rule } : { ok: true, url }
  }
  const v4 = parseV4(host)
  if (v4) {
    const rule = v4Rule(v4, local)
    return rule ? { ok: false, rule } : { ok: true, url }
  }
  if (/^[\d.]+$/.test(host) || /^0x/i.test(host)) return { ok: false, rule: "IP addresses must be written in dotted decimal" }
  if (host === "localhost" || host.endsWith(".localhost")) {
    return local ? { ok: true, url } : { ok: false, rule: "loopback names (localhost) are not allowed" }
  }
  if (blockedNames.some((r) => r.test(host))) return { ok: false, rule: "internal and metadata host names are not allowed" }
  if (!host.includes(".")) return { ok: false, rule: "must be a public host name (with a dot)" }
  return { ok: true, url }
}
