/**
 * The operators' commands of `factline`, against any deployment's HTTP API: queue health, dead letters
 * (list, show, replay one or all matching, skip, escalate), batch jobs (list, show, cancel; import, export,
 * reconcile, rebuild with a progress bar), projections (their catch-up, and the check now), tenants (where each lives, place one, move one and follow the move, reshard one's ledger and follow it), runs (every
 * message attempt, followed live; retry now), workflow instances (list, show, terminate, retry). Every call goes through the client derived from the API's
 * description (`Api` of @factline/client, typed by @factline/core/api's endpoints; a query's parameter names
 * are read from its endpoint), and an import's upload and an export's download through `Files` (streamed, with
 * no time limit): this module knows the commands, their options and their output — tables, `--json` for the
 * API's answer as JSON, the error to print — not the routes.
 *
 * `run(argv)` resolves with the exit code: 0 done, 1 the API refused or could not be reached (its status,
 * code and message are printed; a value the endpoint's schemas refuse is named, and nothing is sent), 2 a usage
 * error. The local commands (init, tokens, deploy) are not here.
 */
import { createReadStream, createWriteStream } from "node:fs"
import { stat } from "node:fs/promises"
import { basename } from "node:path"
import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"
import type * as Schema from "effect/Schema"
import * as SchemaAST from "effect/SchemaAST"
import type * as HttpApiEndpoint from "effect/http-api/HttpApiEndpoint"
import { Api, Conflict, Files, Forbidden, InvalidQuery, InvalidRequest, NotFound, type RequestError, Unauthorized, Unavailable, UnexpectedResponse } from "@factline/client"
import { Batches, DeadLetters, Projections, Queues, Recovery, Runs, Tenants, Workflows } from "@factline/core/api"
import * as Args from "./Args.js"
import * as Stacks from "./Stacks.js"

export class UsageError extends Error {}
/** What the API answered with, or that it could not be reached: printed, exit 1. */
const answers = [Conflict, Forbidden, InvalidQuery, InvalidRequest, NotFound, Unauthorized, Unavailable, UnexpectedResponse]

// Output: data from the API may hold anything; control characters never reach the terminal.
const clean = (value: unknown): string => String(value ?? "").replace(/[\u0000-\u001f\u007f-\u009f]/g, " ")
const colors = process.stdout.isTTY && !process.env.NO_COLOR
const paint = (code: number, text: string): string => (colors ? `\u001b[${code}m${text}\u001b[0m` : text)
const statusColor: Record<string, number> = { ok: 32, replayed: 32, completed: 32, succeeded: 32, queued: 90, cancelled: 90, warning: 33, replaying: 33, running: 33, critical: 31, open: 31, failed: 31, skipped: 90, escalated: 35 }
const colored = (status: string): string => paint(statusColor[status] ?? 0, status)
const dim = (text: string): string => paint(90, text)

const truncate = (text: string, max: number): string => (text.length > max ? `${text.slice(0, max - 1)}…` : text)
/** A column of a plain text table. */
interface Column<R> {
  readonly title: string
  readonly get: (row: R) => unknown
  readonly align?: "right"
  readonly max?: number
  readonly color?: (padded: string, raw: string) => string
}

/** A plain text table. */
const table = <R>(columns: ReadonlyArray<Column<R>>, rows: ReadonlyArray<R>): string => {
  const cells = rows.map((row) => columns.map((c) => truncate(clean(c.get(row)), c.max ?? 60)))
  const widths = columns.map((c, i) => Math.max(c.title.length, ...cells.map((r) => r[i]!.length)))
  const pad = (text: string, i: number) => (columns[i]!.align === "right" ? text.padStart(widths[i]!) : text.padEnd(widths[i]!))
  const lines = [columns.map((c, i) => dim(pad(c.title, i))).join("  ").trimEnd()]
  for (const r of cells) lines.push(r.map((text, i) => { const color = columns[i]!.color; return color ? color(pad(text, i), text) : pad(text, i) }).join("  ").trimEnd())
  return lines.join("\n")
}

const num = (v: unknown): string => (v === null || v === undefined ? "—" : Number(v).toLocaleString("en-US"))
const ms = (v: number | null | undefined): string => (v === null || v === undefined ? "—" : v < 1_000 ? `≤${v}ms` : v < 60_000 ? `≤${v / 1_000}s` : `≤${v / 60_000}min`)
const ago = (iso: string | null | undefined): string => {
  if (!iso) return "—"
  const s = (Date.now() - Date.parse(iso)) / 1_000
  if (!Number.isFinite(s)) return clean(iso)
  return s < 60 ? `${Math.max(0, Math.round(s))}s ago` : s < 3_600 ? `${Math.round(s / 60)}m ago` : s < 86_400 ? `${Math.round(s / 3_600)}h ago` : `${Math.round(s / 86_400)}d ago`
}

/**
 * The query of a call of `endpoint`: the flags named like its query parameters (read from the endpoint's query
 * schema). Their values are what the operator typed: the derived client checks them against the schema before
 * sending (a value it refuses is an InvalidQuery naming it, printed like the API's own refusal).
 */
const query = <E extends HttpApiEndpoint.ConstraintRequest & { readonly query: Schema.Top | undefined }>(flags: Flags, endpoint: E) => {
  const ast = endpoint.query?.ast
  const names = ast !== undefined && SchemaAST.isObjects(ast) ? ast.propertySignatures.map((p) => String(p.name)) : []
  // As typed: a value the schema refuses is the client's refusal, not a type error here.
  return Object.fromEntries(names.filter((name) => typeof flags[name] === "string").map((name) => [name, flags[name]])) as QueryOf<E>
}
type QueryOf<E extends HttpApiEndpoint.ConstraintRequest> = Api.Input<E> extends { readonly query: infer Q } ? Q : never

const needId = (positional: ReadonlyArray<string>, command: string): string => {
  const id = positional[2]
  if (!id) throw new UsageError(`dlq ${command} needs a dead-letter ID`)
  if (positional.length > 3) throw new UsageError(`unexpected argument ${positional[3]}`)
  return id
}

const showRecord = (r: Api.Output<typeof DeadLetters.getDeadLetter> & { readonly reconciliation_fact_id?: string }): string => {
  const rows = [
    ["id", r.id], ["status", r.status], ["queue", r.queue], ["reason", r.reason], ["last error", r.last_error], ["attempts", r.attempts],
    ["tenant", r.tenant_id], ["message type", r.message_type], ["idempotency key", r.idempotency_key], ["subject", r.subject],
    ["first attempted", r.first_attempted_at], ["last attempted", r.last_attempted_at], ["received", r.received_at],
    ["resolved by", r.resolved_by], ["resolved at", r.resolved_at], ["replay operation", r.replay_operation_id],
    ["reconciliation fact", r.reconciliation_fact_id]
  ].filter(([, v]) => v !== null && v !== undefined && v !== "") as Array<[string, unknown]>
  const width = Math.max(...rows.map(([k]) => k.length))
  const lines = rows.map(([k, v]) => `${dim(k.padEnd(width))}  ${k === "status" ? colored(clean(v)) : clean(v)}`)
  if (r.history !== undefined) {
    lines.push("", dim("history"))
    if (r.history.length === 0) lines.push("  (no actions yet)")
    for (const e of r.history) lines.push(`  ${clean(e.at)}  ${clean(e.action)} by ${clean(e.by)}${e.note ? ` — ${clean(e.note)}` : ""}${e.operation_id ? ` (${clean(e.operation_id)})` : ""}`)
  }
  if (typeof r.stack === "string" && r.stack !== "") {
    // A defect's stack, one frame a line (each line cleaned of control characters, as every other value); frames
    // in a local `wrangler dev` bundle name the team's source (Stacks.mapStack) when its source map is here.
    lines.push("", dim("stack"), ...Stacks.mapStack(r.stack).split("\n").map((line) => `  ${clean(line.trim())}`))
  }
  if (r.original_message !== undefined) {
    lines.push("", dim("original message"))
    // JSON.stringify escapes control characters in strings; keys and values print as JSON.
    lines.push(JSON.stringify(r.original_message, null, 2))
  }
  return lines.join("\n")
}

/** The options every operator's command reads (`Args.parse` below). */
type Flags = Readonly<Record<string, string | boolean | undefined>>
interface Invocation {
  readonly flags: Flags
  readonly positional: ReadonlyArray<string>
}
/** The deployment a command calls: the derived client, and its settings for the file routes (`Files`). */
interface Deployment {
  readonly api: Api.Api
  readonly config: Api.Config
}
/** A command's output: text to print, an answer to print as JSON, or "" (it printed already). */
type Command = (deployment: Deployment, invocation: Invocation) => Promise<unknown>

/** A batch job as the API answers it: an import, export or reconcile (`params`), or a rebuild (`projection`). */
type Batch = Api.Output<typeof Batches.getBatch>
/** What a job works on: a rebuild's projection; the projection or uploaded file another job was started with. */
const jobSubject = (b: Batch): string => (b.operation === "rebuild" ? b.projection : clean(b.params.projection ?? b.params.manifest ?? ""))
/** A check's threshold from the health answer's `thresholds` (`{ <check>: { warning, critical } }`). */
const threshold = (thresholds: Readonly<Record<string, unknown>>, check: string, level: "warning" | "critical"): unknown => {
  const of = thresholds[check]
  return typeof of === "object" && of !== null ? (of as Record<string, unknown>)[level] : undefined
}

const commands: Record<string, Command> = {
  async health({ api }, { flags, positional }) {
    if (positional.length > 1) throw new UsageError(`unexpected argument ${positional[1]}`)
    const h = await api.queues.queueHealth({ query: query(flags, Queues.health) })
    if (flags.json) return h
    const lines = [
      `${dim("window")} ${clean(h.window)} ${dim("since")} ${clean(h.since)}   ${dim("overall")} ${colored(clean(h.status))}   ${dim("ledger shards with relay pending")} ${num(h.ledger?.relay_pending_shards)}`,
      "",
      table([
        { title: "QUEUE", get: (q) => q.queue, max: 40 },
        { title: "STATUS", get: (q) => q.status, color: (padded, raw) => colored(raw) + padded.slice(raw.length) },
        { title: "RECEIVED", get: (q) => num(q.received), align: "right" },
        { title: "ACKED", get: (q) => num(q.acked), align: "right" },
        { title: "RETRIED", get: (q) => num(q.retried), align: "right" },
        { title: "DLQ'D", get: (q) => num(q.dead_lettered), align: "right" },
        { title: "RETRY%", get: (q) => `${Math.round(q.retry_rate * 1_000) / 10}%`, align: "right" },
        { title: "DLQ OPEN", get: (q) => num(q.dlq_open), align: "right" },
        { title: "DEPTH", get: (q) => (q.depth === null ? "n/a" : num(q.depth)), align: "right" },
        { title: "LAG P50", get: (q) => ms(q.lag_p50_ms), align: "right" },
        { title: "LAG P99", get: (q) => ms(q.lag_p99_ms), align: "right" },
        { title: "PROC P99", get: (q) => ms(q.processing_p99_ms), align: "right" }
      ], h.queues)
    ]
    const failing = h.queues.flatMap((q) => Object.entries(q.checks).filter(([, level]) => level !== "ok").map(([check, level]) => `  ${clean(q.queue)}: ${check} ${colored(level)} (${num(q[check])}; warning above ${num(threshold(h.thresholds, check, "warning"))}, critical above ${num(threshold(h.thresholds, check, "critical"))})`))
    if (failing.length > 0) lines.push("", dim("checks not ok"), ...failing)
    if ((h.spilled_dead_letters ?? 0) > 0) lines.push("", `${colored("warning")} ${num(h.spilled_dead_letters)} dead letter(s) spilled to R2 during a D1 outage; the cron moves them into the dead-letter list`)
    return lines.join("\n")
  },

  async dlq({ api }, { flags, positional }) {
    const sub = positional[1]
    switch (sub) {
      case "list": {
        if (positional.length > 2) throw new UsageError(`unexpected argument ${positional[2]}`)
        const page = await api.deadLetters.listDeadLetters({ query: query(flags, DeadLetters.listDeadLetters) })
        if (flags.json) return page
        if (page.data.length === 0) return dim("no dead letters match")
        const out = [table([
          { title: "ID", get: (r) => r.id, max: 40 },
          { title: "RECEIVED", get: (r) => ago(r.received_at) },
          { title: "QUEUE", get: (r) => r.queue },
          { title: "STATUS", get: (r) => r.status, color: (padded, raw) => colored(raw) + padded.slice(raw.length) },
          { title: "TENANT", get: (r) => r.tenant_id ?? "—", max: 24 },
          { title: "TYPE", get: (r) => r.message_type ?? "—", max: 32 },
          { title: "SUBJECT", get: (r) => r.subject ?? "—", max: 32 },
          { title: "REASON", get: (r) => r.reason },
          { title: "ATT", get: (r) => r.attempts, align: "right" },
          { title: "LAST ERROR", get: (r) => r.last_error, max: 60 }
        ], page.data)]
        out.push("", dim(`${page.data.length} shown${page.next_cursor ? `; more with --cursor ${page.next_cursor}` : ""}`))
        return out.join("\n")
      }
      case "show": {
        const record = await api.deadLetters.getDeadLetter({ params: { id: needId(positional, "show") } })
        return flags.json ? record : showRecord(record)
      }
      case "replay": {
        if (flags["all-matching"]) {
          if (positional.length > 2) throw new UsageError("give either an ID or --all-matching, not both")
          if (flags.status !== undefined) throw new UsageError("--all-matching replays open dead letters only; drop --status")
          const result = await api.deadLetters.replayDeadLetters({ query: query(flags, DeadLetters.replayMatching) })
          if (flags.json) return result
          return result.count === 0
            ? "no open dead letters match; nothing replayed"
            : `replaying ${num(result.count)} dead letter(s) in ${num(result.waves)} wave(s) of up to ${num(result.wave_size)}, ${result.wave_delay_seconds} s apart — operation ${clean(result.operation_id)}`
        }
        const record = await api.deadLetters.replayDeadLetter({ params: { id: needId(positional, "replay") } })
        if (flags.json) return record
        return `replayed ${clean(record.id)} to ${clean(record.queue)} (operation ${clean(record.replay_operation_id)}); status ${colored(record.status)}`
      }
      case "skip": {
        const id = needId(positional, "skip")
        if (typeof flags.reason !== "string" || flags.reason.trim() === "") throw new UsageError('dlq skip needs --reason "why this work is given up"')
        const record = await api.deadLetters.skipDeadLetter({ params: { id }, payload: { reason: flags.reason } })
        if (flags.json) return record
        return `skipped ${clean(record.id)}; reconciliation fact ${clean(record.reconciliation_fact_id)} appended to stream ${clean(record.subject ?? `dead-letters/${record.id}`)}`
      }
      case "escalate": {
        const id = needId(positional, "escalate")
        const record = await api.deadLetters.escalateDeadLetter({ params: { id }, payload: typeof flags.note === "string" ? { note: flags.note } : {} })
        return flags.json ? record : `escalated ${clean(record.id)}`
      }
      default:
        throw new UsageError(sub === undefined ? "dlq needs a subcommand: list, show, replay, skip or escalate" : `unknown dlq subcommand ${sub}`)
    }
  },

  async projections({ api }, { flags, positional }) {
    const sub = positional[1]
    if (sub !== undefined && sub !== "catch-up") throw new UsageError(`unknown projections subcommand ${sub} (catch-up, or none to list)`)
    if (positional.length > 2) throw new UsageError(`unexpected argument ${positional[2]}`)
    const answer: Api.Output<typeof Projections.listProjections> & Partial<Api.Output<typeof Projections.catchUpProjections>> =
      sub === "catch-up" ? await api.projections.catchUpProjections({}) : await api.projections.listProjections({})
    if (flags.json) return answer
    const lines = [table([
      { title: "PROJECTION", get: (p) => p.projection, max: 40 },
      { title: "VERSION", get: (p) => (p.recorded_version === null || p.recorded_version === p.version ? `v${p.version}` : `v${p.recorded_version} → v${p.version}`) },
      { title: "STATUS", get: (p) => p.status, color: (padded, raw) => paint(({ current: 32, catching_up: 33, not_migrated: 31, unchecked: 90 } as Record<string, number>)[raw] ?? 0, raw) + padded.slice(raw.length) },
      { title: "REPLAY", get: (p) => (p.rebuild === null ? "—" : `${p.rebuild.batch_id} ${p.rebuild.status}`), max: 40 },
      { title: "PROGRESS", get: (p) => (p.rebuild === null ? "—" : `${p.rebuild.shards_done}/${p.rebuild.shards_total} shards`), align: "right" },
      { title: "FACTS", get: (p) => (p.rebuild === null ? "—" : num(p.rebuild.facts_replayed)), align: "right" },
      { title: "UPDATED", get: (p) => ago(p.updated_at) },
      { title: "DETAIL", get: (p) => p.detail ?? "", max: 80 }
    ], answer.data)]
    if (sub === "catch-up") {
      const moved = (answer.steps ?? []).filter((s) => !["current", "running"].includes(s.action))
      lines.push("", moved.length === 0 ? dim("nothing to start: every projection is current or already catching up") : moved.map((s) => `${clean(s.projection)}: ${clean(s.action)}${s.batch_id ? ` ${clean(s.batch_id)}` : ""}`).join("\n"))
    }
    return lines.join("\n")
  },

  async batches({ api }, { flags, positional }) {
    if (positional.length > 1) throw new UsageError(`unexpected argument ${positional[1]}`)
    const page = await api.batches.listBatches({ query: query(flags, Batches.listBatches) })
    if (flags.json) return page
    if (page.data.length === 0) return dim("no batch jobs")
    return table([
      { title: "BATCH", get: (b) => b.batch_id, max: 40 },
      // A rebuild the system started (`cu_…`) is a projection catching up.
      { title: "OPERATION", get: (b) => `${b.operation === "rebuild" && b.batch_id.startsWith("cu_") ? "catch-up" : b.operation} ${jobSubject(b)}`.trim() },
      { title: "STATUS", get: (b) => b.status, color: (padded, raw) => colored(raw) + padded.slice(raw.length) },
      { title: "PROGRESS", get: (b) => `${b.offset}/${b.total ?? "?"}${b.operation === "rebuild" ? " shards" : ""}`, align: "right" },
      { title: "DONE", get: (b) => num(b.succeeded), align: "right" },
      { title: "FAILED", get: (b) => num(b.failed), align: "right" },
      { title: "STARTED", get: (b) => ago(b.started_at ?? b.created_at) },
      { title: "FINISHED", get: (b) => (b.finished_at ? ago(b.finished_at) : "—") },
      { title: "ERROR", get: (b) => b.error ?? "" }
    ], page.data)
  }
}

/**
 * Polls a batch job every second, drawing a progress line on stderr, until it is finished; returns the job.
 * `expectedTotal` stands in for the total until the job knows it (an import's line count).
 */
const follow = async (api: Api.Api, id: string, expectedTotal?: number): Promise<Batch> => {
  const tty = process.stderr.isTTY
  for (;;) {
    const job = await api.batches.getBatch({ params: { id } })
    const total = job.total ?? expectedTotal
    const fraction = total ? Math.min(1, job.offset / total) : ["succeeded", "completed"].includes(job.status) ? 1 : 0
    const width = 30
    const bar = "█".repeat(Math.round(fraction * width)) + "░".repeat(width - Math.round(fraction * width))
    const line = `${bar} ${num(job.offset)}/${total ? num(total) : "?"}  ${clean(job.status)}  done ${num(job.succeeded)}  failed ${num(job.failed)}`
    process.stderr.write(tty ? `\r${line}\u001b[K` : `${line}\n`)
    if (["succeeded", "completed", "failed", "cancelled"].includes(job.status)) {
      if (tty) process.stderr.write("\n")
      return job
    }
    await new Promise((resolve) => setTimeout(resolve, 1_000))
  }
}

const summary = (job: Batch): string => {
  // A rebuild has neither per-line errors nor an output file.
  const errors = job.operation === "rebuild" ? [] : job.errors
  const output = job.operation === "rebuild" ? null : job.output
  return [
    `batch ${clean(job.batch_id)}  ${clean(job.operation)}  ${clean(job.status)}  offset ${num(job.offset)}/${job.total === null ? "?" : num(job.total)}  succeeded ${num(job.succeeded)}  failed ${num(job.failed)}`,
    ...(job.error ? [`error: ${clean(job.error)}`] : []),
    ...errors.slice(0, 20).map((e) => `  line ${e.line}: ${clean(e.error)}`),
    ...(errors.length > 20 ? [`  … ${errors.length - 20} more (factline batch show ${clean(job.batch_id)} --json)`] : []),
    ...(output ? [`output: ${clean(output)}`] : [])
  ].join("\n")
}

const startAndFollow = async (api: Api.Api, flags: Flags, payload: Api.Input<typeof Batches.startBatch>["payload"], expectedTotal?: number): Promise<unknown> => {
  const started = await api.batches.startBatch({ payload })
  if (flags["no-wait"]) return flags.json ? started : `started batch ${clean(started.batch_id)}`
  const job = await follow(api, started.batch_id, expectedTotal)
  return flags.json ? job : summary(job)
}

/** A string option's value (Args gives strings for the `values` options, `true` for the switches). */
const text = (flags: Flags, name: string): string | undefined => (typeof flags[name] === "string" ? flags[name] : undefined)

Object.assign(commands, {
  async import({ api, config }, { flags, positional }) {
    const file = positional[1]
    if (!file || positional.length > 2) throw new UsageError("import needs one NDJSON file")
    const size = (await stat(file)).size
    // Lines, counted while streaming (never loaded whole): the progress bar's total.
    let lines = 0
    let last = 10
    for await (const chunk of createReadStream(file) as AsyncIterable<Buffer>) {
      for (const byte of chunk) if (byte === 10) lines++
      last = chunk.at(-1) ?? last
    }
    if (size > 0 && last !== 10) lines++
    const name = text(flags, "name") ?? `${basename(file).replace(/[^A-Za-z0-9._-]/g, "_").replace(/^[^A-Za-z0-9]+/, "") || "upload"}`
    process.stderr.write(`uploading ${clean(file)} (${num(size)} bytes, ${num(lines)} lines) as ${clean(name)}\n`)
    // Streamed (a raw route: the derived client would hold the whole file in memory), with no time limit. Node's
    // web streams are the global ones at run time; the Workers typings (see tsconfig) only spell them differently.
    const stream = Readable.toWeb(createReadStream(file)) as unknown as ReadableStream<Uint8Array>
    await Files.upload(config, { params: { name }, file: { stream, length: size } })
    return startAndFollow(api, flags, { operation: "import", manifest: name }, lines)
  },

  async export({ api, config }, { flags, positional }) {
    if (positional.length > 1) throw new UsageError(`unexpected argument ${positional[1]}`)
    const projection = text(flags, "projection")
    const format = text(flags, "format")
    // The format as typed: a value the endpoint does not take is the client's refusal naming `format`.
    const started = await api.batches.startBatch({ payload: { operation: "export", ...(projection ? { projection } : {}), ...(format ? { format: format as "ndjson" } : {}) } })
    const job = await follow(api, started.batch_id)
    if (job.status !== "succeeded") return flags.json ? job : summary(job)
    // Streamed to the file (or stdout) as it arrives, with no time limit.
    const output = Readable.fromWeb(await Files.download(config, { params: { id: job.batch_id } }) as unknown as Parameters<typeof Readable.fromWeb>[0])
    const out = text(flags, "out")
    if (!out) {
      await pipeline(output, process.stdout)
      return ""
    }
    await pipeline(output, createWriteStream(out))
    return flags.json ? job : `${summary(job)}\nwritten to ${clean(out)}`
  },

  async reconcile({ api }, { flags, positional }) {
    const projection = positional[1]
    if (!projection || positional.length > 2) throw new UsageError("reconcile needs one projection name")
    return startAndFollow(api, flags, { operation: "reconcile", projection, ...(flags.repair ? { repair: true } : {}) })
  },

  async rebuild({ api }, { flags, positional }) {
    const projection = positional[1]
    if (!projection || positional.length > 2) throw new UsageError("rebuild needs one projection name")
    return startAndFollow(api, flags, { operation: "rebuild", projection })
  },

  async batch({ api }, { flags, positional }) {
    const [, sub, id] = positional
    if (!id || positional.length > 3) throw new UsageError("batch show|cancel needs a batch ID")
    if (sub === "show") {
      const job = await api.batches.getBatch({ params: { id } })
      return flags.json ? job : summary(job)
    }
    if (sub === "cancel") {
      const job = await api.batches.cancelBatch({ params: { id } })
      return flags.json ? job : summary(job)
    }
    throw new UsageError(`unknown batch subcommand ${sub}`)
  }
} satisfies Record<string, Command>)

const moveLine = (m: Api.Output<typeof Tenants.getMove>): string => `move ${clean(m.move_id)}  ${clean(m.tenant_id)}${m.projection === null ? "" : ` projection ${clean(m.projection)}`}: read database ${m.from_database} → ${m.parts ? `parts on ${m.parts.join(", ")}` : m.to_database}  ${colored(clean(m.phase))}` +
  `  round ${m.copy_round}  copied ${num(Object.values(m.copied).reduce((a, b) => a + b, 0))} rows${m.error ? `\nerror: ${clean(m.error)}` : ""}`

/** A deletion in one line: its phase, what it removed in all, and (once re-counted) what is left. */
const deletionLine = (d: Api.Output<typeof Tenants.getDeletion>): string => {
  const removed = Object.values(d.removed).flatMap((counts) => Object.values(counts)).reduce((a, b) => a + b, 0)
  const left = d.remaining === null ? "" : `  left ${num(Object.values(d.remaining).flatMap((counts) => Object.values(counts)).reduce((a, b) => a + b, 0))}`
  return `deletion ${clean(d.deletion_id)}  ${clean(d.tenant_id)}: ${colored(clean(d.phase))}  round ${d.round}  removed ${num(removed)}${left}${d.error ? `\nerror: ${clean(d.error)}` : ""}`
}

/** A reshard in one line: the counts, its phase, the old shard and stage it is at, what it copied and moved. */
const reshardLine = (r: Api.Output<typeof Tenants.getReshard>): string =>
  `reshard ${clean(r.reshard_id)}  ${clean(r.tenant_id)}: ${r.from_shards} → ${r.to_shards} shards  ${colored(clean(r.phase))}` +
  `${r.phase === "done" ? "" : `  shard ${r.shard}/${r.from_shards} ${clean(r.stage)}`}  switched ${r.shards_done}/${r.from_shards}` +
  `  copied ${num(r.facts_copied)} facts  moved ${num(r.streams_moved)} streams  carried ${num(r.rows_carried)} rows${r.error ? `\nerror: ${clean(r.error)}` : ""}`

/**
 * `tenants reshard TENANT --shards N [--follow]`: starts raising the tenant's ledger shard count (or answers the
 * reshard to N already running; resumes a failed one); without `--shards`, the tenant's latest reshard. `--follow`
 * polls it every second until it is done or failed (a failed one's line carries its error; asking again for N resumes it).
 */
const reshard = async (api: Api.Api, tenant: string, flags: Flags): Promise<unknown> => {
  const shards = flags.shards === undefined ? undefined : Number(flags.shards)
  if (shards !== undefined && (!Number.isInteger(shards) || shards < 1)) throw new UsageError(`--shards ${clean(flags.shards)} is not a whole number of shards`)
  let view = shards === undefined
    ? await api.tenants.getTenantReshard({ params: { tenant } })
    : await api.tenants.reshardTenant({ params: { tenant }, payload: { shards } })
  const tty = process.stderr.isTTY
  while (flags.follow && view.phase === "running") {
    process.stderr.write(tty ? `\r${reshardLine(view)}\u001b[K` : `${reshardLine(view)}\n`)
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    view = await api.tenants.getTenantReshard({ params: { tenant } })
  }
  if (tty && flags.follow) process.stderr.write("\n")
  return flags.json ? view : reshardLine(view)
}

Object.assign(commands, {
  /** Where tenants live (`tenants`, `tenants me`), placing one (`tenants place <tenant> --to N`), removing a placement that holds no data (`tenants remove <tenant>`), moving one (`tenants move <tenant> --to N [--projection P]`, or splitting a projection: `--projection P --parts 0,1`), deleting one's whole data (`tenants delete <tenant>`), raising its ledger's shard count (`tenants reshard <tenant> --shards N [--follow]`, or its progress without --shards). */
  async tenants({ api }, { flags, positional }) {
    const [, sub = "list", tenant] = positional
    if (sub === "me") {
      const p = await api.tenants.tenantPlacement({})
      return flags.json ? p : `${clean(p.tenant_id)}: read database ${p.read_database} (binding ${clean(p.binding)})${p.writes_held_since ? `, writes held since ${clean(p.writes_held_since)} (being moved)` : ""}`
    }
    if (sub === "list") {
      const all = await api.tenants.listPlacements({})
      if (flags.json) return all
      return [
        table([{ title: "READ DB", get: (d) => d.read_database, align: "right" }, { title: "BINDING", get: (d) => d.binding }, { title: "TENANTS", get: (d) => num(d.tenants), align: "right" }], all.databases),
        "",
        table([{ title: "TENANT", get: (p) => p.tenant_id, max: 40 }, { title: "READ DB", get: (p) => p.read_database, align: "right" }, { title: "PLACED", get: (p) => ago(p.placed_at) }, { title: "HELD", get: (p) => (p.writes_held_since ? ago(p.writes_held_since) : "") }], all.data)
      ].join("\n")
    }
    if (sub === "remove") {
      if (!tenant || positional.length > 3) throw new UsageError("tenants remove needs a tenant")
      const removed = await api.tenants.removePlacement({ params: { tenant } })
      return flags.json ? removed : `${clean(removed.tenant_id)}: placement on read database ${removed.read_database} ${removed.outcome}`
    }
    if (sub === "delete") {
      if (!tenant || positional.length > 3) throw new UsageError("tenants delete needs a tenant")
      let deletion = await api.tenants.deleteTenant({ params: { tenant } })
      const tty = process.stderr.isTTY
      while (!flags["no-wait"] && !["deleted", "failed"].includes(deletion.phase)) {
        process.stderr.write(tty ? `\r${deletionLine(deletion)}\u001b[K` : `${deletionLine(deletion)}\n`)
        await new Promise((resolve) => setTimeout(resolve, 1_000))
        deletion = await api.tenants.getTenantDeletion({ params: { tenant } })
      }
      if (tty && !flags["no-wait"]) process.stderr.write("\n")
      return flags.json ? deletion : deletionLine(deletion)
    }
    if (sub === "reshard") {
      if (!tenant || positional.length > 3) throw new UsageError("tenants reshard needs a tenant (and --shards <count> to start one)")
      return reshard(api, tenant, flags)
    }
    if (sub !== "place" && sub !== "move") throw new UsageError(`unknown tenants subcommand ${sub}`)
    const to = Number(flags.to)
    // `--parts 0,1`: split `--projection P` into parts on these read databases (a projection larger than one database).
    const parts = sub === "move" && typeof flags.parts === "string" ? flags.parts.split(",").map((d) => Number(d.trim())) : undefined
    if (parts !== undefined && (flags.to !== undefined || typeof flags.projection !== "string" || !parts.every(Number.isInteger))) {
      throw new UsageError("tenants move --parts needs --projection P and read database indexes (--parts 0,1), without --to")
    }
    if (!tenant || positional.length > 3 || (parts === undefined && (flags.to === undefined || !Number.isInteger(to)))) throw new UsageError(`tenants ${sub} needs a tenant and --to <read database index>`)
    if (sub === "place") {
      const p = await api.tenants.placeTenant({ params: { tenant }, payload: { read_database: to } })
      return flags.json ? p : `${clean(p.tenant_id)}: read database ${p.read_database} (binding ${clean(p.binding)})`
    }
    // `--projection P`: only the tenant's rows of projection P move (a tenant larger than one database).
    const projection = typeof flags.projection === "string" ? flags.projection : undefined
    let move = await api.tenants.moveTenant({ params: { tenant }, payload: parts !== undefined ? { projection: projection!, parts } : { to_database: to, ...(projection === undefined ? {} : { projection }) } })
    if (flags["no-wait"]) return flags.json ? move : moveLine(move)
    const tty = process.stderr.isTTY
    while (!["dropped", "failed"].includes(move.phase)) {
      process.stderr.write(tty ? `\r${moveLine(move)}\u001b[K` : `${moveLine(move)}\n`)
      await new Promise((resolve) => setTimeout(resolve, 1_000))
      move = await api.tenants.getTenantMove({ params: { tenant, move_id: move.move_id } })
    }
    if (tty) process.stderr.write("\n")
    return flags.json ? move : moveLine(move)
  }
} satisfies Record<string, Command>)

const erasureLine = (e: { erasure_id: string; subject: string; phase: string; removed: Record<string, Record<string, number>>; error: string | null; clean_after: string | null }) => {
  const removed = Object.entries(e.removed).map(([store, counts]) => `${store} ${Object.entries(counts).map(([k, n]) => `${k} ${num(n)}`).join(" ")}`).join(", ")
  const waits = e.phase === "waiting" && e.clean_after ? `  cleaning from ${clean(e.clean_after)}` : ""
  return `erasure ${clean(e.erasure_id)}  ${clean(e.subject)}: ${colored(clean(e.phase))}${waits}${removed ? `  ${clean(removed)}` : ""}${e.error ? `\nerror: ${clean(e.error)}` : ""}`
}

Object.assign(commands, {
  /** Erasing a data subject's personal data (`erase <subject> [--follow]`, scope admin): the erasure, followed to its end with --follow. */
  async erase({ api }, { flags, positional }) {
    const [, subject] = positional
    if (!subject || positional.length > 2) throw new UsageError("erase needs a data subject id")
    let erasure = await api.subjects.eraseSubject({ params: { subject } })
    const tty = process.stderr.isTTY
    while (flags.follow && !["erased", "failed"].includes(erasure.phase)) {
      process.stderr.write(tty ? `\r${erasureLine(erasure)}\u001b[K` : `${erasureLine(erasure)}\n`)
      await new Promise((resolve) => setTimeout(resolve, 1_000))
      erasure = await api.subjects.getSubjectErasure({ params: { subject } })
    }
    if (tty && flags.follow) process.stderr.write("\n")
    return flags.json ? erasure : erasureLine(erasure)
  },
  /** A data subject's data (`subjects export <subject>`, JSON) and its erasure (`subjects erasure <subject>`), scope admin. */
  async subjects({ api }, { flags, positional }) {
    const [, sub, subject] = positional
    if ((sub !== "export" && sub !== "erasure") || !subject || positional.length > 3) throw new UsageError("subjects export|erasure needs a data subject id")
    if (sub === "erasure") {
      const erasure = await api.subjects.getSubjectErasure({ params: { subject } })
      return flags.json ? erasure : erasureLine(erasure)
    }
    return await api.subjects.exportSubject({ params: { subject } })
  }
} satisfies Record<string, Command>)

// `recover --since 10m [--dry-run]`: after a restart of the local queues (or any loss of queued messages) — the
// facts appended since then are relayed again, and kept accepted events with no fact yet are sent again
// (POST /v1/recover, scope platform). The API walks the ledger a bounded amount per call; this repeats the call
// with its cursor, summing what each call did, until it is done.
/** `10m`, `90s`, `2h`, `1d`, or an ISO 8601 time → the ISO time it means. */
const sinceOf = (raw: unknown): string => {
  const match = /^(\d+)(s|m|h|d)$/.exec(String(raw ?? "").trim())
  const unit: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }
  if (match) return new Date(Date.now() - Number(match[1]) * unit[match[2]!]!).toISOString()
  if (typeof raw === "string" && /^\d{4}-\d{2}-\d{2}T/.test(raw) && !Number.isNaN(Date.parse(raw))) return new Date(raw).toISOString()
  throw new UsageError("recover needs --since: a duration back from now (10m, 2h, 1d) or an ISO 8601 time")
}

type Recovered = Api.Output<typeof Recovery.recover>
/** The counters summed over the calls of one recovery. */
const counters = ["facts", "relayed", "sends", "handed_over", "shards"] as const

Object.assign(commands, {
  async recover({ api }, { flags, positional }) {
    if (positional.length > 1) throw new UsageError(`unexpected argument ${positional[1]}`)
    const since = sinceOf(flags.since)
    const dryRun = flags["dry-run"] === true
    const total: { since: string; dry_run: boolean; events: Recovered["events"]; calls: number } & Record<(typeof counters)[number], number> =
      { since, dry_run: dryRun, facts: 0, relayed: 0, sends: 0, handed_over: 0, shards: 0, events: null, calls: 0 }
    let cursor: string | undefined
    do {
      const r: Recovered = await api.recovery.recover({ payload: { since, ...(dryRun ? { dry_run: true } : {}), ...(cursor ? { cursor } : {}) } })
      for (const k of counters) total[k] += r[k]
      if (r.events) total.events = r.events
      total.calls++
      cursor = r.next_cursor ?? undefined
      if (cursor && process.stderr.isTTY) process.stderr.write(`\r${num(total.shards)} shards walked, ${num(total.facts)} facts since ${since}\u001b[K`)
    } while (cursor)
    if (process.stderr.isTTY && total.calls > 1) process.stderr.write("\n")
    if (flags.json) return total
    const would = dryRun ? "would be " : ""
    const lines = [
      `${num(total.facts)} fact(s) appended since ${clean(since)} in ${num(total.shards)} ledger shard(s): ${num(total.relayed)} (fact, queue) pair(s) ${would}relayed again${dryRun ? "" : ` in ${num(total.sends)} send(s)`}${total.handed_over > 0 ? `, ${num(total.handed_over)} handed to their shard's outbox (a send failed)` : ""}`,
      total.events === null
        ? dim("accepted events are not kept here (FACTLINE_KEEP_ACCEPTED is off): an event lost from the events queue before it was decided cannot be re-sent")
        : `${num(total.events.kept)} accepted event(s) kept since then: ${num(total.events.decided)} already decided${total.events.dead_lettered > 0 ? ` (${num(total.events.dead_lettered)} dead-lettered: replay those from the DLQ)` : ""}, ${num(total.events.resent)} ${would}sent again`
    ]
    if (dryRun) lines.push(dim("dry run: nothing was sent; run without --dry-run to recover"))
    return lines.join("\n")
  }
} satisfies Record<string, Command>)

// ------------------------------------------------------------------ runs (GET /v1/runs, POST /v1/runs/:id/retry)

type Run = Api.Output<typeof Runs.retryRun>
/** HH:MM:SS of an ISO time, local. */
const clock = (iso: string | null): string => (iso ? new Date(iso).toTimeString().slice(0, 8) : "—")
const runColumns: ReadonlyArray<Column<Run>> = [
  { title: "UPDATED", get: (r) => clock(r.updated_at) },
  { title: "ID", get: (r) => r.id, max: 40 },
  { title: "QUEUE", get: (r) => r.queue.replace(/^factline-/, "") },
  { title: "TYPE", get: (r) => r.message_type ?? "—", max: 32 },
  { title: "SUBJECT", get: (r) => r.subject ?? "—", max: 28 },
  { title: "TENANT", get: (r) => r.tenant_id ?? "—", max: 20 },
  { title: "ATT", get: (r) => r.attempts, align: "right" },
  { title: "OUTCOME", get: (r) => r.outcome, color: (padded, raw) => colored(raw) + padded.slice(raw.length) },
  { title: "NEXT RETRY", get: (r) => (r.next_retry_at ? `in ${Math.max(0, Math.round((Date.parse(r.next_retry_at) - Date.now()) / 1_000))}s` : "") },
  { title: "ERROR", get: (r) => r.error ?? "", max: 60 },
  { title: "TRACE", get: (r) => r.trace_id ?? "", max: 32 }
]
Object.assign(statusColor, { retry: 33, park: 33, rerun: 36, dead: 31 })
const runLine = (r: Run): string => [
  dim(clock(r.updated_at)), clean(r.queue.replace(/^factline-/, "")), clean(r.message_type ?? "—"), clean(r.subject ?? "—"), clean(r.tenant_id ?? "—"),
  `#${r.attempts}`, colored(clean(r.outcome)), r.next_retry_at ? dim(`retry ${clock(r.next_retry_at)}`) : "", clean(r.error ?? ""), r.trace_id ? dim(`trace ${clean(r.trace_id)}`) : "", dim(clean(r.id))
].filter((part) => part !== "").join("  ")

Object.assign(commands, {
  /**
   * `runs [filters]`: each message's latest attempt, newest first; `--follow` polls every second and prints a
   * line per new or changed run until interrupted; `runs retry ID`: retry now.
   */
  async runs({ api }, { flags, positional }) {
    const [, sub, id] = positional
    if (sub === "retry") {
      if (!id || positional.length > 3) throw new UsageError("runs retry needs a run ID")
      const r = await api.runs.retryRun({ params: { id } })
      return flags.json ? r : `retrying ${clean(r.id)} now: a copy is on ${clean(r.queue)} (its own delayed delivery will find the work done)`
    }
    if (sub !== undefined) throw new UsageError(`unknown runs subcommand ${sub} (runs [filters] [--follow], runs retry ID)`)
    const filters = query(flags, Runs.listRuns)
    const page = await api.runs.listRuns({ query: filters })
    if (!flags.follow) {
      if (flags.json) return page
      if (page.data.length === 0) return dim(`no runs match (recording: ${clean(page.recording)})`)
      return [table(runColumns, page.data), "", dim(`${page.data.length} shown${page.next_cursor ? `; more with --cursor ${page.next_cursor}` : ""}; recording: ${clean(page.recording)}`)].join("\n")
    }
    // Follow: what changed since the newest update seen (the same instant again, so nothing is missed; a run
    // already printed in the same state is not printed twice), every second, until interrupted.
    const seen = new Map<string, string>()
    const print = (r: Run) => {
      const state = `${r.updated_at}|${r.attempts}|${r.outcome}`
      if (seen.get(r.id) === state) return
      seen.set(r.id, state)
      console.log(flags.json ? JSON.stringify(r) : runLine(r))
    }
    if (!flags.json) console.error(dim(`following runs (recording: ${page.recording}); ctrl-c to stop`))
    for (const r of [...page.data].reverse()) print(r)
    let since = page.data[0]?.updated_at ?? new Date(Date.now() - 1_000).toISOString()
    const stopAfter = flags["follow-for"] === undefined ? Infinity : Date.now() + Number(flags["follow-for"]) * 1_000
    const { cursor: _first, ...unpaged } = filters
    while (Date.now() < stopAfter) {
      await new Promise((resolve) => setTimeout(resolve, 1_000))
      const changed = await api.runs.listRuns({ query: { ...unpaged, since, limit: "200" } })
      for (const r of [...changed.data].reverse()) print(r)
      if (changed.data[0] !== undefined && changed.data[0].updated_at > since) since = changed.data[0].updated_at
    }
    return ""
  }
} satisfies Record<string, Command>)

// ------------------------------------------------------------------ workflows (GET /v1/workflows[/:id], POST …/terminate|retry)

type WorkflowInstance = Api.Output<typeof Workflows.listWorkflows>["data"][number]
type WorkflowDetail = Api.Output<typeof Workflows.getWorkflow>
Object.assign(statusColor, { complete: 32, sleeping: 36, waiting: 36, compensating: 33, terminated: 90, errored: 31 })
const statusCell = (padded: string, raw: string) => colored(raw) + padded.slice(raw.length)
/** An error's first line (an instance's error may carry its stack on the lines after). */
const firstLine = (error: string | null | undefined): string => (error ?? "").split("\n", 1)[0]!
/** What an instance waits for and until when, or its sleep's end. */
const waitOf = (w: WorkflowInstance): string =>
  w.waiting_for !== null ? `${w.waiting_for}${w.wait_until ? ` until ${clock(w.wait_until)}` : ""}` : w.wait_until ? `until ${clock(w.wait_until)}` : ""
const workflowColumns: ReadonlyArray<Column<WorkflowInstance>> = [
  { title: "UPDATED", get: (w) => clock(w.updated_at) },
  { title: "ID", get: (w) => w.instance_id, max: 48 },
  { title: "WORKFLOW", get: (w) => w.workflow, max: 24 },
  { title: "SUBJECT", get: (w) => w.subject, max: 32 },
  { title: "TENANT", get: (w) => w.tenant_id, max: 20 },
  { title: "STATUS", get: (w) => w.status, color: statusCell },
  { title: "STEP", get: (w) => w.step ?? "—", max: 28 },
  { title: "ATT", get: (w) => w.attempts, align: "right" },
  { title: "WAITING", get: waitOf, max: 56 },
  { title: "FACTS", get: (w) => w.facts.length, align: "right" },
  { title: "ERROR", get: (w) => firstLine(w.error), max: 60 }
]
const showWorkflow = (w: WorkflowDetail): string => {
  const rows: Array<[string, unknown]> = [
    ["id", w.instance_id], ["workflow", w.workflow], ["tenant", w.tenant_id], ["subject", w.subject], ["status", w.status],
    ["cloudflare", w.cloudflare === null ? "unknown to Cloudflare (not created yet, or gone)" : w.cloudflare.status], ["step", w.step], ["attempts", w.attempts],
    ["waiting for", w.waiting_for], ["until", w.wait_until], ["error", firstLine(w.error)], ["cloudflare error", firstLine(w.cloudflare?.error)],
    ["start fact", w.start_fact_id], ["trace", w.traceparent], ["started", w.started_at], ["updated", w.updated_at]
  ]
  const shown = rows.filter(([, v]) => v !== null && v !== undefined && v !== "")
  const width = Math.max(...shown.map(([k]) => k.length))
  const lines = shown.map(([k, v]) => `${dim(k.padEnd(width))}  ${k === "status" || k === "cloudflare" ? colored(clean(v)) : clean(v)}`)
  lines.push("", dim(`facts appended (${w.facts.length})`))
  if (w.facts.length === 0) lines.push("  (none)")
  for (const f of w.appended) lines.push(`  ${clean(f.fact_id)}  ${clean(f.type)}  #${f.sequence}  ${clean(f.created_at)}  ${clean(JSON.stringify(f.data))}`)
  if (w.appended.length < w.facts.length) lines.push(dim(`  … ${w.facts.length - w.appended.length} more (ids with --json)`))
  if (w.cloudflare?.output !== undefined) lines.push("", dim("output"), JSON.stringify(w.cloudflare.output, null, 2))
  // The error's stack, one frame a line (a local dev bundle's frames mapped to the source, as dlq show does).
  const stack = (w.error ?? w.cloudflare?.error ?? "").split("\n").slice(1).filter((line) => line.trim() !== "")
  if (stack.length > 0) lines.push("", dim("stack"), ...Stacks.mapStack(stack.join("\n")).split("\n").map((line) => `  ${clean(line.trim())}`))
  return lines.join("\n")
}

Object.assign(commands, {
  /** `workflows [list] [filters]`, `workflows show ID`, `workflows terminate ID`, `workflows retry ID`. */
  async workflows({ api }, { flags, positional }) {
    const [, sub = "list", id] = positional
    if (sub === "list") {
      if (positional.length > 2) throw new UsageError(`unexpected argument ${positional[2]}`)
      const page = await api.workflows.listWorkflows({ query: query(flags, Workflows.listWorkflows) })
      if (flags.json) return page
      if (page.data.length === 0) return dim("no workflow instances match")
      return [table(workflowColumns, page.data), "", dim(`${page.data.length} shown${page.next_cursor ? `; more with --cursor ${page.next_cursor}` : ""}`)].join("\n")
    }
    if (!["show", "terminate", "retry"].includes(sub)) throw new UsageError(`unknown workflows subcommand ${sub} (list, show ID, terminate ID, retry ID)`)
    if (!id || positional.length > 3) throw new UsageError(`workflows ${sub} needs an instance ID`)
    if (sub === "show") {
      const w = await api.workflows.getWorkflow({ params: { id } })
      return flags.json ? w : showWorkflow(w)
    }
    if (sub === "terminate") {
      const w = await api.workflows.terminateWorkflow({ params: { id } })
      return flags.json ? w : `terminated ${clean(w.instance_id)} at step ${clean(w.step ?? "—")}; Cloudflare: ${colored(clean(w.cloudflare?.status ?? "unknown"))} (workflows retry ${clean(w.instance_id)} runs it again)`
    }
    const w = await api.workflows.retryWorkflow({ params: { id } })
    return flags.json ? w : `retrying ${clean(w.instance_id)}: restarted at Cloudflare (${colored(clean(w.cloudflare?.status ?? "unknown"))}); every step runs again with its idempotency key, nothing done is done twice`
  }
} satisfies Record<string, Command>)

const record = (u: unknown): Readonly<Record<string, unknown>> | undefined => (typeof u === "object" && u !== null ? (u as Record<string, unknown>) : undefined)

/** The error an answer (or no answer) makes, for a person: the API's status, code and message, and each problem it names. */
const refusal = (error: RequestError, url: string): string => {
  if (error instanceof Unavailable && error.status === undefined) return `cannot reach ${url}: ${clean(error.last)}`
  // Refused by the endpoint's schemas before sending (status 0): the code the API gives such a request, and each problem.
  if ((error instanceof InvalidQuery || error instanceof InvalidRequest) && error.status === 0) {
    const code = error instanceof InvalidQuery ? "invalid_query" : "invalid_request"
    return `${code}: ${error.problems.map((p) => `${clean(p.path)}: ${clean(p.message)}`).join("; ")} (checked before sending: nothing was sent)`
  }
  const problem = record(record(error.body)?.error)
  const message = problem ? `${error.status} ${clean(problem.code)}: ${clean(problem.message)}` : clean(error.message)
  // Problems the message does not already spell out, one a line.
  const problems = Api.problemsOf(problem?.details).filter((p) => !message.includes(String(p.message))).map((p) => `  ${clean(p.path)}: ${clean(p.message)}`)
  return [message, ...problems].join("\n")
}

/** Runs an operator's command (`argv` starts with it); resolves with the exit code. */
export const run = async (argv: ReadonlyArray<string>): Promise<number> => {
  let flags: Flags = {}
  let url = ""
  try {
    const { options, positional } = Args.parse([...argv], {
      values: ["url", "token", "queue", "status", "type", "reason", "limit", "cursor", "window", "note", "name", "projection", "format", "out", "to", "outcome", "subject", "since", "follow-for", "workflow", "shards", "parts"],
      switches: ["json", "all-matching", "repair", "no-wait", "dry-run", "follow"]
    })
    const args: Invocation = { flags: (flags = options), positional }
    const name = args.positional[0]
    const command = name !== undefined && Object.hasOwn(commands, name) ? commands[name] : undefined
    if (!command) throw new UsageError(`unknown command ${name}`)
    url = text(flags, "url") ?? (process.env.FACTLINE_URL || "http://localhost:8787")
    if (!URL.canParse(url)) throw new UsageError(`--url ${url} is not a URL`)
    const token = text(flags, "token") ?? process.env.FACTLINE_TOKEN
    if (!token) throw new UsageError("no token: pass --token or set FACTLINE_TOKEN")
    // One attempt per call: an operator sees a refusal or an outage at once, and runs the command again.
    const config: Api.Config = { baseUrl: url, token, retry: { maxAttempts: 1 } }
    const out = await command({ api: Api.make(config), config }, args)
    if (out !== "") console.log(typeof out === "string" ? out : JSON.stringify(out, null, 2))
    return 0
  } catch (error) {
    if (error instanceof UsageError || error instanceof Args.ArgsError) {
      console.error(`factline: ${error.message}\n(factline --help for usage)`)
      return 2
    }
    if (answers.some((answer) => error instanceof answer)) {
      const refused = error as RequestError
      if (flags.json && refused.body) console.error(JSON.stringify(refused.body, null, 2))
      else console.error(`factline: ${refusal(refused, url)}`)
      return 1
    }
    console.error(`factline: ${error instanceof Error ? error.stack : String(error)}`)
    return 1
  }
}
