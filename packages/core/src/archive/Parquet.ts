/**
 * The facts archive's file format: rows of the D1 `facts` copy as one Parquet
 * file (SNAPPY, statistics on), sorted by (stream, sequence), with the
 * table's columns — `data` is the fact's JSON as text, as the copy stores it
 * in `body`; `created_at` stays the ISO text every `*_at` column holds, so an
 * archived row compares equal to the ledger's fact.
 *
 * Written by ParquetWriter.ts and read by ParquetReader.ts, on the leaf modules
 * of `hyparquet-writer` / `hyparquet`: plain JavaScript, no wasm, no Node APIs.
 * The files are what hyparquet-writer's general writer made of these columns
 * before, and files of either read back; any Parquet reader (DuckDB, hyparquet)
 * reads them (Archive.test.ts, Parquet.test.ts). Encoding is deterministic: the
 * same rows give the same bytes.
 *
 * It does not know where files are stored (the archive job does).
 */
import { BYTE_ARRAY, type Column, INT32, INT64, type Source, type Value } from "./ParquetFormat.js"
import { notFacts, readColumns } from "./ParquetReader.js"
import { write } from "./ParquetWriter.js"

export type { Source } from "./ParquetFormat.js"

/** A row of the `facts` copy, as D1 returns it. */
export interface FactRow {
  readonly tenant_id: string
  readonly fact_id: string
  readonly stream: string
  readonly sequence: number
  readonly type: string
  readonly body: string
  readonly causation_id: string
  readonly correlation_id: string
  readonly caused_by: string
  readonly created_at: string
  readonly traceparent: string | null
  /** The version of its type's schema `body` is at (absent on rows read before the copy had the column: 1). */
  readonly schema_version?: number | null
}

/** The columns of an archive file, in order. */
export const columns = ["tenant_id", "fact_id", "stream", "sequence", "type", "causation_id", "correlation_id", "caused_by", "created_at", "traceparent", "schema_version", "data"] as const
type Name = (typeof columns)[number]

/** Each column's physical type; only `traceparent` may be null. */
const described: ReadonlyArray<Column> = columns.map((name) => ({
  name,
  type: name === "sequence" ? INT64 : name === "schema_version" ? INT32 : BYTE_ARRAY,
  optional: name === "traceparent"
}))

const valueOf = (row: FactRow, name: Name): Value =>
  name === "data" ? row.body : name === "schema_version" ? row.schema_version ?? 1 : name === "traceparent" ? row.traceparent : row[name]

const bySubject = (a: FactRow, b: FactRow) =>
  a.stream < b.stream ? -1 : a.stream > b.stream ? 1 : a.sequence - b.sequence || (a.fact_id < b.fact_id ? -1 : a.fact_id > b.fact_id ? 1 : 0)

/** One Parquet file of `rows`, sorted by (stream, sequence). */
export const encode = (rows: ReadonlyArray<FactRow>): Uint8Array => {
  const sorted = [...rows].sort(bySubject)
  return write(described, columns.map((name) => sorted.map((row) => valueOf(row, name))), sorted.length, "factline archive")
}

/** The fact ids a file holds; throws when the bytes are not a Parquet file of facts. */
export const factIds = async (source: Source): Promise<ReadonlyArray<string>> => {
  const [ids] = await readColumns(source, ["fact_id"])
  if (ids!.some((id) => typeof id !== "string")) throw notFacts("fact_id is not text")
  return ids as ReadonlyArray<string>
}

/**
 * Every row of a file, in file order, as written (`body` the fact's data text); throws when the bytes are not a
 * Parquet file of facts. The ledger's cold segments (ledger/ColdHistory.ts) are read back whole this way.
 */
export const rows = async (source: Source): Promise<ReadonlyArray<FactRow>> => {
  const read = await readColumns(source, columns)
  const column = (name: Name) => read[columns.indexOf(name)]!
  const text = (name: Name, i: number) => {
    const value = column(name)[i]
    if (typeof value !== "string") throw notFacts(`${name} is not text`)
    return value
  }
  return column("fact_id").map((_, i) => {
    const traceparent = column("traceparent")[i]
    return {
      tenant_id: text("tenant_id", i),
      fact_id: text("fact_id", i),
      stream: text("stream", i),
      sequence: Number(column("sequence")[i]),
      type: text("type", i),
      body: text("data", i),
      causation_id: text("causation_id", i),
      correlation_id: text("correlation_id", i),
      caused_by: text("caused_by", i),
      created_at: text("created_at", i),
      traceparent: typeof traceparent === "string" ? traceparent : null,
      schema_version: Number(column("schema_version")[i] ?? 1)
    }
  })
}
