/**
 * The archive's Parquet codec: what it writes reads back row for row — here, with hyparquet's general reader and
 * with DuckDB (Archive.test.ts) — and what the archive wrote before it (hyparquet-writer's general writer, the
 * same columns) reads back as well, so parts and cold segments already in R2 stay readable.
 */
import { parquetMetadata, parquetReadObjects } from "hyparquet/src/index.js"
import { parquetWriteBuffer } from "hyparquet-writer/src/write.js"
import { describe, expect, it } from "vitest"
import * as Parquet from "./Parquet.js"

const row = (i: number): Parquet.FactRow => ({
  tenant_id: i % 5 === 0 ? "tenant-b" : "tenant-a",
  fact_id: `f_${String(i).padStart(6, "0")}`,
  stream: `s_${i % 7}`,
  sequence: Math.floor(i / 7) + 1,
  type: i % 3 === 0 ? "charge.refunded" : "charge.captured",
  body: JSON.stringify({ cents: i * 100, note: `über ${i} ✓ 𝄞` }),
  causation_id: `m_${i}`,
  correlation_id: `c_${i % 11}`,
  caused_by: "charges",
  created_at: new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString(),
  traceparent: i % 2 === 0 ? `00-${"a".repeat(32)}-${"b".repeat(16)}-01` : null,
  schema_version: i % 4 === 0 ? 2 : 1
})
const sorted = (rows: ReadonlyArray<Parquet.FactRow>) =>
  [...rows].sort((a, b) => a.stream < b.stream ? -1 : a.stream > b.stream ? 1 : a.sequence - b.sequence)
const whole = (bytes: Uint8Array): Parquet.Source => ({ byteLength: bytes.byteLength, slice: (start, end) => bytes.slice(start, end).buffer })

/** The archive's encoder before this codec: hyparquet-writer's parquetWriteBuffer over the same columns. */
const encodedBefore = (rows: ReadonlyArray<Parquet.FactRow>) => {
  const ordered = sorted(rows)
  const text = (name: string, pick: (row: Parquet.FactRow) => string) => ({ name, data: ordered.map(pick), type: "STRING" as const, nullable: false })
  return new Uint8Array(parquetWriteBuffer({
    columnData: [
      text("tenant_id", (r) => r.tenant_id), text("fact_id", (r) => r.fact_id), text("stream", (r) => r.stream),
      { name: "sequence", data: ordered.map((r) => BigInt(r.sequence)), type: "INT64", nullable: false },
      text("type", (r) => r.type), text("causation_id", (r) => r.causation_id), text("correlation_id", (r) => r.correlation_id),
      text("caused_by", (r) => r.caused_by), text("created_at", (r) => r.created_at),
      { name: "traceparent", data: ordered.map((r) => r.traceparent), type: "STRING", nullable: true },
      { name: "schema_version", data: ordered.map((r) => r.schema_version ?? 1), type: "INT32", nullable: false },
      text("data", (r) => r.body)
    ],
    createdBy: "factline archive"
  }))
}

describe("archive Parquet", () => {
  it("reads back every row it wrote, sorted by (stream, sequence), over several row groups", async () => {
    const rows = Array.from({ length: 2_345 }, (_, i) => row(i))
    const bytes = Parquet.encode(rows)
    expect(parquetMetadata(bytes.buffer as ArrayBuffer).row_groups.map((group) => Number(group.num_rows))).toEqual([1_000, 1_345])
    expect(await Parquet.rows(whole(bytes))).toEqual(sorted(rows))
    expect(await Parquet.factIds(whole(bytes))).toEqual(sorted(rows).map((r) => r.fact_id))
  })

  it("a general Parquet reader (hyparquet) reads the same rows, with dictionary-encoded and plain columns and statistics", async () => {
    const rows = Array.from({ length: 1_500 }, (_, i) => row(i))
    const bytes = Parquet.encode(rows)
    const read = await parquetReadObjects({ file: bytes.buffer as ArrayBuffer })
    expect(read.map((r) => ({ ...r, sequence: Number(r.sequence) }))).toEqual(sorted(rows).map(({ body, ...rest }) => ({ ...rest, data: body })))
    const chunks = parquetMetadata(bytes.buffer as ArrayBuffer).row_groups[0]!.columns.map((c) => c.meta_data!)
    const chunk = (name: string) => chunks.find((c) => c.path_in_schema[0] === name)!
    expect(chunk("tenant_id").encodings).toEqual(["PLAIN", "RLE_DICTIONARY"])
    expect(chunk("fact_id").encodings).toEqual(["PLAIN"])
    const group = sorted(rows).slice(0, 1_000)
    const ids = group.map((r) => r.fact_id).sort()
    const sequences = group.map((r) => r.sequence)
    expect(chunk("fact_id").statistics).toMatchObject({ min_value: ids[0], max_value: ids.at(-1), null_count: 0n })
    expect(chunk("sequence").statistics).toMatchObject({ min_value: BigInt(Math.min(...sequences)), max_value: BigInt(Math.max(...sequences)) })
    expect(chunk("traceparent").statistics?.null_count).toBe(BigInt(group.filter((r) => r.traceparent === null).length))
  })

  it("a column over a page's megabyte is split into pages and reads back whole", async () => {
    const rows = Array.from({ length: 300 }, (_, i) => ({ ...row(i), body: JSON.stringify({ i, pad: "x".repeat(8_000 + i) }) }))
    const bytes = Parquet.encode(rows)
    expect(await Parquet.rows(whole(bytes))).toEqual(sorted(rows))
    expect((await parquetReadObjects({ file: bytes.buffer as ArrayBuffer, columns: ["data"] })).map((r) => r.data)).toEqual(sorted(rows).map((r) => r.body))
  })

  it("reads what the archive wrote before (hyparquet-writer), row for row", async () => {
    const rows = Array.from({ length: 2_100 }, (_, i) => row(i))
    const before = encodedBefore(rows)
    expect(await Parquet.rows(whole(before))).toEqual(sorted(rows))
    expect(await Parquet.factIds(whole(before))).toEqual(sorted(rows).map((r) => r.fact_id))
  })

  it("reads what the archive wrote before with a column over a page's megabyte and a column of nulls", async () => {
    const rows = Array.from({ length: 1_400 }, (_, i) => ({ ...row(i), traceparent: null, body: JSON.stringify({ i, pad: "y".repeat(2_000 + i) }) }))
    const before = encodedBefore(rows)
    expect(parquetMetadata(before.buffer as ArrayBuffer).row_groups.length).toBe(2)
    expect(await Parquet.rows(whole(before))).toEqual(sorted(rows))
  })

  it("an empty file and a single row round-trip", async () => {
    expect(await Parquet.rows(whole(Parquet.encode([])))).toEqual([])
    expect(await Parquet.rows(whole(Parquet.encode([row(3)])))).toEqual([row(3)])
    expect(await Parquet.rows(whole(encodedBefore([row(4)])))).toEqual([row(4)])
    expect(await Parquet.rows(whole(encodedBefore([row(3)])))).toEqual([row(3)])
  })

  it("bytes that are not a Parquet file of facts are refused", async () => {
    await expect(Parquet.factIds(whole(new TextEncoder().encode("just some text, not parquet at all")))).rejects.toThrow(/not an archive of facts/)
    const other = new Uint8Array(parquetWriteBuffer({ columnData: [{ name: "x", data: [1, 2], type: "INT32" }] }))
    await expect(Parquet.factIds(whole(other))).rejects.toThrow(/not an archive of facts/)
  })
})
