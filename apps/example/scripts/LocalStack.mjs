/**
 * The real local stack, started from a script: applies the D1 migrations and runs
 * `wrangler dev` (local Queues, D1, Durable Objects, R2) on a given state directory
 * and port, then waits until it serves. Used by the smoke run and the benchmark.
 */
import { execFileSync, spawn } from "node:child_process"
import { createServer } from "node:net"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

export const wrangler = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "node_modules", "wrangler", "bin", "wrangler.js")
/**
 * Non-interactive (no migration prompt), no telemetry; @factline/* bundled from their TypeScript sources
 * (the exports maps' `@factline/source` condition: the workspace has no dist/ to build first).
 */
export const env = { ...process.env, CI: "true", WRANGLER_SEND_METRICS: "false", WRANGLER_BUILD_CONDITIONS: "@factline/source,workerd,worker,browser" }

export const freePort = () =>
  new Promise((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })

/** Starts the stack; resolves to `{ base, stop, output }` once wrangler reports it is ready. */
export const start = async ({ cwd, state, port, config }) => {
  const configArgs = config ? ["--config", config] : []
  execFileSync(process.execPath, [wrangler, "d1", "migrations", "apply", "factline", "--local", ...configArgs, "--persist-to", state], { cwd, env, stdio: "ignore" })
  const dev = spawn(process.execPath, [wrangler, "dev", ...configArgs, "--persist-to", state, "--port", String(port), "--ip", "127.0.0.1"], {
    cwd, env, stdio: ["ignore", "pipe", "pipe"], detached: true
  })
  let output = ""
  dev.stdout.on("data", (d) => (output += d))
  dev.stderr.on("data", (d) => (output += d))
  const stop = () => {
    try {
      process.kill(-dev.pid, "SIGTERM")
    } catch {}
  }
  for (let i = 0; !output.includes("Ready on"); i++) {
    if (i > 900 || dev.exitCode !== null) {
      stop()
      throw new Error(`wrangler dev did not start:\n${output}`)
    }
    await new Promise((r) => setTimeout(r, 100))
  }
  return { base: `http://127.0.0.1:${port}`, stop, output: () => output }
}
