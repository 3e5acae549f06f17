/**
 * What `npm run dev` says once the local stack serves (scripts/dev.mjs): the local queues keep nothing across
 * a restart (docs/reliability.md), so it asks `POST /v1/recover` in dry-run mode what the last `window` may
 * concern — facts appended that may not have reached their queues, and kept accepted events with no fact yet —
 * and prints the command that recovers them. It recovers nothing itself: a restart in the middle of a test run
 * is the developer's to judge (and `recover` is idempotent, so running it when nothing was lost is harmless).
 * Used by scripts/restart.mjs too, which checks its lines.
 */

/** How long `npm run dev` keeps accepted events (FACTLINE_KEEP_ACCEPTED). */
export const keepAccepted = "10m"

/** The dev token of the platform operator (.dev.vars): recovery walks every tenant's shards. */
export const platformToken = "dev-token-platform"
export const command = (window) => `npm run factline -- recover --since ${window} --token ${platformToken}`

/** The lines to print, from a dry run against `base` over the last `window` (`10m`); the recovery report is `report`. */
export const check = async (base, { window = "10m", minutes = 10 } = {}) => {
  const since = new Date(Date.now() - minutes * 60_000).toISOString()
  const response = await fetch(`${base}/v1/recover`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${platformToken}` },
    body: JSON.stringify({ since, dry_run: true })
  })
  if (!response.ok) return { report: undefined, lines: [`factline: could not check for work lost in a restart (${response.status} ${await response.text()})`] }
  // A dry run walks every shard in pages; the counts add up.
  let report = await response.json()
  const total = { facts: report.facts, events: report.events }
  while (report.next_cursor) {
    report = await (await fetch(`${base}/v1/recover`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${platformToken}` },
      body: JSON.stringify({ since, dry_run: true, cursor: report.next_cursor })
    })).json()
    total.facts += report.facts
  }
  const lines = []
  if (total.facts > 0) lines.push(`factline: ${total.facts} facts appended in the last ${minutes} min may not have reached their queues — run \`${command(window)}\``)
  if ((total.events?.resent ?? 0) > 0) lines.push(`factline: ${total.events.resent} accepted events of the last ${minutes} min have no fact yet (kept by FACTLINE_KEEP_ACCEPTED) — the same command sends them again`)
  if (lines.length === 0) lines.push(`factline: no facts appended in the last ${minutes} min: nothing a restart could have lost`)
  if (total.events === null) lines.push("factline: accepted events are not kept (FACTLINE_KEEP_ACCEPTED is off): an event on the events queue when the stack stops is lost, and nothing can re-send it")
  return { report: total, lines }
}

/**
 * `wrangler dev` never fires the cron, whose run starts the catch-up of projections new to the deployment or
 * re-versioned: `npm run dev` asks for that check once the stack serves (`POST /v1/projections/catch-up`, what
 * `factline projections catch-up` does) and says what it started or found.
 */
export const catchUp = async (base) => {
  const response = await fetch(`${base}/v1/projections/catch-up`, { method: "POST", headers: { authorization: `Bearer ${platformToken}` } })
  if (!response.ok) return [`factline: could not check the projections' catch-up (${response.status} ${await response.text()})`]
  const { steps } = await response.json()
  const said = steps.filter((s) => s.action !== "current")
  if (said.length === 0) return [`factline: every projection is current (${steps.length})`]
  return said.map((s) =>
    s.action === "not_migrated" ? `factline: projection ${s.projection} is not migrated — ${s.detail ?? "apply its migration"}`
      : `factline: projection ${s.projection}: catch-up ${s.action}${s.batch_id ? ` (${s.batch_id}; follow it with \`npm run factline -- projections --token ${platformToken}\`)` : ""}`)
}
