/**
 * The `factline` command as a process: its exit codes (0 done, 1 the API refused or could not be reached,
 * 2 a usage error), its help, and that the operators' commands reach the API through the client derived from
 * its description (an unreachable deployment is named; a value the endpoint's schema refuses is named, unsent). The commands against a real deployment — health, dead letters,
 * batches, import, export — run against wrangler dev in apps/example/scripts/browser.mjs (`cli: N passed`).
 */
import { execFile } from "node:child_process"
import { createServer } from "node:net"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

const bin = fileURLToPath(new URL("./factline.ts", import.meta.url))
const sources = fileURLToPath(new URL("../../../scripts/NodeSources.mjs", import.meta.url))

const factline = (args, env = {}) =>
  new Promise((resolve) => {
    execFile(process.execPath, ["--import", sources, bin, ...args], { env: { ...process.env, NO_COLOR: "1", FACTLINE_URL: "", FACTLINE_TOKEN: "", ...env } }, (error, stdout, stderr) =>
      resolve({ code: error ? error.code : 0, stdout, stderr }))
  })

/** A port nothing listens on: taken from the OS, then released. */
const closedPort = () => new Promise((resolve) => {
  const server = createServer().listen(0, "127.0.0.1", () => {
    const { port } = server.address()
    server.close(() => resolve(port))
  })
})

describe("factline", () => {
  it("--help lists the local and the operators' commands (exit 0); no command prints it as a usage error (exit 2)", async () => {
    const help = await factline(["--help"])
    expect(help.code).toBe(0)
    for (const command of ["init <dir>", "tokens create|list|revoke", "deploy [--env NAME]", "health [--window", "dlq replay --all-matching", "import FILE", "batch show|cancel ID", "workflows [list] [filters]", "workflows show ID", "workflows terminate|retry ID"]) expect(help.stdout).toContain(command)
    expect((await factline([])).code).toBe(2)
  })

  it("a usage error exits 2 naming it: an unknown command or option, a missing token, a skip without its reason", async () => {
    const cases = [
      [["bogus"], "unknown command bogus"],
      [["dlq", "list", "--colour", "red", "--token", "t"], "Unknown option '--colour'"],
      [["health"], "no token: pass --token or set FACTLINE_TOKEN"],
      [["dlq", "skip", "dl_1", "--token", "t"], "dlq skip needs --reason"],
      [["dlq", "skip", "dl_1", "--token", "t", "--reason"], "Option '--reason <value>' argument missing"],
      [["health", "--url", "not a url", "--token", "t"], "--url not a url is not a URL"],
      [["workflows", "show", "--token", "t"], "workflows show needs an instance ID"],
      [["workflows", "terminate", "a", "b", "--token", "t"], "workflows terminate needs an instance ID"],
      [["workflows", "pause", "a", "--token", "t"], "unknown workflows subcommand pause (list, show ID, terminate ID, retry ID)"]
    ]
    for (const [args, message] of cases) {
      const run = await factline(args)
      expect(run.code, args.join(" ")).toBe(2)
      expect(run.stderr).toContain(message)
    }
  })

  it("a deployment that cannot be reached exits 1 naming the URL", async () => {
    const url = `http://127.0.0.1:${await closedPort()}`
    const run = await factline(["dlq", "list"], { FACTLINE_URL: url, FACTLINE_TOKEN: "t" })
    expect(run.code).toBe(1)
    expect(run.stderr).toBe(`factline: cannot reach ${url}: fetch failed (ECONNREFUSED)\n`)
  })

  it("a value the endpoint's schema refuses exits 1 naming the parameter, before anything is sent", async () => {
    // Nothing listens there: had anything been sent, the error would be that the deployment cannot be reached.
    const url = `http://127.0.0.1:${await closedPort()}`
    const env = { FACTLINE_URL: url, FACTLINE_TOKEN: "t" }
    const status = await factline(["dlq", "list", "--status", "bogus"], env)
    expect(status.code).toBe(1)
    expect(status.stderr).toBe("factline: invalid_query: status: must be one of open, replaying, replayed, skipped, escalated (checked before sending: nothing was sent)\n")
    const limit = await factline(["runs", "--limit", "many"], env)
    expect(limit.code).toBe(1)
    expect(limit.stderr).toContain("invalid_query: limit: must be a whole number from 1 to 200")
    const workflowStatus = await factline(["workflows", "--status", "sleepy"], env)
    expect(workflowStatus.code).toBe(1)
    expect(workflowStatus.stderr).toBe("factline: invalid_query: status: must be one of queued, running, sleeping, waiting, compensating, complete, failed, terminated (checked before sending: nothing was sent)\n")
    const name = await factline(["tenants", "remove", "x".repeat(10_001)], env)
    expect(name.code).toBe(1)
    expect(name.stderr).toMatch(/^factline: invalid_request: tenant: .+ \(checked before sending: nothing was sent\)\n$/)
  })

  it("--version prints the package's version", async () => {
    const run = await factline(["--version"])
    expect(run.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/)
  })
})
