/**
 * The facts archive's file format: rows of the D1 `facts` copy as one Parquet
 * file (SNAPPY, statistics on), sorted by (stream, sequence), with the
 * table's columns — `data` is the fact's JSON as text, as the copy stores it
 * in `body`; `created_at` stays the ISO text every `*_at` column holds, so an
 * archived row compares equal to the ledger's fact.
 *
 * Written and read here for this one schema, on the leaf modules of
 * `hyparquet-writer` / `hyparquet` (Thrift compact protocol, Snappy, the
 * RLE/bit-packed hybrid, a growing byte buffer): plain JavaScript, no wasm, no
 * Node APIs. Their generic writer and reader are not used — with every type,
 * codec, encoding, bloom filter, page index, variant and geometry they
 * support they were ≈ 36 KiB of the Worker's gzip bundle (docs/performance.md,
 * bundle size); this file writes what they wrote for these columns (data page
 * v2, a dictionary page where it at least halves a column, min/max and null
 * counts, row groups of 1,000 then 100,000 rows, pages of about 1 MiB) and reads
 * that back, in files from either. Any Parquet reader (DuckDB, hyparquet) reads
 * the files (Archive.test.ts). Encoding is deterministic: the same rows give the
 * same bytes.
 *
 * It does not know where files are stored (the archive job does).
 */
import { deserializeTCompactProtocol } from "hyparquet/src/thrift.js"
import { readRleBitPackedHybrid } from "hyparquet/src/encoding.js"
import { snappyUncompress } from "hyparquet/src/snappy.js"
import { ByteWriter } from "hyparquet-writer/src/bytewriter.js"
import { writeRleBitPackedHybrid } from "hyparquet-writer/src/encoding.js"
import { snappyCompress } from "hyparquet-writer/src/snappy.js"
import { serializeTCompactProtocol } from "hyparquet-writer/src/thrift.js"

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
type Column = (typeof columns)[number]

/** A byte range source: a whole buffer, or an object read by ranges. */
export interface Source {
  readonly byteLength: number
  slice(start: number, end?: number): ArrayBuffer | Promise<ArrayBuffer>
}

// Parquet's enum values (parquet.thrift) for what these files hold.
const INT32 = 1, INT64 = 2, BYTE_ARRAY = 6
const PLAIN = 0, PLAIN_DICTIONARY = 2, RLE_DICTIONARY = 8
const DICTIONARY_PAGE = 2, DATA_PAGE_V2 = 3
const UNCOMPRESSED = 0, SNAPPY = 1
const UTF8 = 0

type Value = string | number | null
/** A column's physical type, and whether it may be null (only `traceparent`). */
const typeOf = (name: Column) => name === "sequence" ? INT64 : name === "schema_version" ? INT32 : BYTE_ARRAY
const optional = (name: Column) => name === "traceparent"

const valueOf = (row: FactRow, name: Column): Value =>
  name === "data" ? row.body : name === "schema_version" ? row.schema_version ?? 1 : name === "traceparent" ? row.traceparent : row[name]

const bySubject = (a: FactRow, b: FactRow) =>
  a.stream < b.stream ? -1 : a.stream > b.stream ? 1 : a.sequence - b.sequence || (a.fact_id < b.fact_id ? -1 : a.fact_id > b.fact_id ? 1 : 0)

const textEncoder = new TextEncoder()
const textDecoder = new TextDecoder()
const magic = textEncoder.encode("PAR1")
const pageBytes = 1 << 20
/** Longest text statistic written; a longer column minimum or maximum is left out (the statistics stay exact). */
const statisticBytes = 64

/** Bytes of a value in PLAIN encoding: a text's UTF-8 after its 4-byte length, an integer's 8 or 4. */
const plainSize = (type: number, value: string | number) => {
  if (type !== BYTE_ARRAY) return type === INT64 ? 8 : 4
  const text = value as string
  let size = 4 + text.length
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    // U+0080–U+07FF: 2 bytes; the rest of the BMP: 3; a surrogate pair (two units): 4.
    if (code >= 0x80) size += code < 0x800 || (code >= 0xd800 && code <= 0xdfff) ? 1 : 2
  }
  return size
}

/** Appends a value in PLAIN encoding, the text encoded in place (no copy per value). */
const appendPlain = (writer: ByteWriter, type: number, value: string | number) => {
  if (type === INT64) return writer.appendInt64(BigInt(value))
  if (type === INT32) return writer.appendInt32(value as number)
  const text = value as string
  writer.ensure(4 + 3 * text.length)
  const { written } = textEncoder.encodeInto(text, new Uint8Array(writer.buffer, writer.index + 4))
  writer.view.setUint32(writer.index, written, true)
  writer.index += 4 + written
  writer.offset += 4 + written
}

/** Code-point order of two texts — their UTF-8 byte order, Parquet's for a text column's statistics. */
const textBefore = (a: string, b: string) => {
  let i = 0
  while (i < a.length && i < b.length && a.charCodeAt(i) === b.charCodeAt(i)) i++
  if (i === a.length || i === b.length) return a.length < b.length
  // UTF-16 code units sort surrogates (U+10000 and up) below U+E000–U+FFFF; code points sort them above.
  const key = (code: number) => code >= 0xd800 && code <= 0xdfff ? code + 0x2000 : code >= 0xe000 ? code - 0x800 : code
  return key(a.charCodeAt(i)) < key(b.charCodeAt(i))
}

const writePage = (out: ByteWriter, header: Record<`field_${number}`, unknown>, levels: Uint8Array, data: Uint8Array) => {
  const compressed = snappyCompress(data)
  const start = out.offset
  serializeTCompactProtocol(out, { field_1: header.field_1, field_2: levels.length + data.length, field_3: levels.length + compressed.length, ...header })
  out.appendBytes(levels)
  out.appendBytes(compressed)
  return { uncompressed: out.offset - start - compressed.length + data.length }
}

/** One column chunk of a row group at the writer's offset; its ColumnMetaData. */
const writeChunk = (out: ByteWriter, name: Column, values: ReadonlyArray<Value>) => {
  const type = typeOf(name)
  const start = out.offset
  const present = values.filter((value): value is string | number => value !== null)
  const sizes = present.map((value) => plainSize(type, value))
  // A dictionary when it and its bit-packed indexes at least halve the PLAIN bytes (as hyparquet-writer decides).
  const index = new Map<string | number, number>()
  const dictionary: Array<string | number> = []
  let dictionaryBytes = 0
  const indexes = present.map((value, i) => {
    let at = index.get(value)
    if (at === undefined) {
      index.set(value, at = dictionary.push(value) - 1)
      dictionaryBytes += sizes[i]!
    }
    return at
  })
  const bitWidth = Math.ceil(Math.log2(dictionary.length || 1))
  const dictionaryWins = present.length > 0 && 2 * (dictionaryBytes + Math.ceil(present.length * bitWidth / 8)) <= sizes.reduce((n, size) => n + size, 0)
  let uncompressed = 0
  let dictionaryOffset: bigint | undefined
  if (dictionaryWins) {
    dictionaryOffset = BigInt(out.offset)
    const data = new ByteWriter()
    for (const value of dictionary) appendPlain(data, type, value)
    uncompressed += writePage(out, { field_1: DICTIONARY_PAGE, field_7: { field_1: dictionary.length, field_2: PLAIN } }, new Uint8Array(), data.getBytes()).uncompressed
  }
  const dataOffset = BigInt(out.offset)
  // Pages of about 1 MiB of values (a dictionary index counts 4 bytes), each a whole number of rows.
  let from = 0
  let presentFrom = 0
  do {
    let to = from
    let size = 0
    let presentTo = presentFrom
    while (to < values.length && (to === from || size < pageBytes)) {
      if (values[to] !== null) {
        size += dictionaryWins ? 4 : sizes[presentTo]!
        presentTo++
      }
      to++
    }
    const levels = new ByteWriter()
    if (optional(name)) writeRleBitPackedHybrid(levels, values.slice(from, to).map((value) => value === null ? 0 : 1), 1)
    const data = new ByteWriter()
    if (dictionaryWins) {
      const pageIndexes = indexes.slice(presentFrom, presentTo)
      const width = Math.ceil(Math.log2(Math.max(0, ...pageIndexes) + 1))
      data.appendUint8(width)
      writeRleBitPackedHybrid(data, pageIndexes, width)
    } else for (let i = presentFrom; i < presentTo; i++) appendPlain(data, type, present[i]!)
    const nulls = to - from - (presentTo - presentFrom)
    uncompressed += writePage(out, {
      field_1: DATA_PAGE_V2,
      field_8: { field_1: to - from, field_2: nulls, field_3: to - from, field_4: dictionaryWins ? RLE_DICTIONARY : PLAIN, field_5: levels.offset, field_6: 0 }
    }, levels.getBytes(), data.getBytes()).uncompressed
    from = to
    presentFrom = presentTo
  } while (from < values.length)
  let min = 0
  let max = 0
  const before = (i: number, j: number) => type === BYTE_ARRAY ? textBefore(present[i] as string, present[j] as string) : present[i]! < present[j]!
  for (let i = 1; i < present.length; i++) {
    if (before(i, min)) min = i
    if (before(max, i)) max = i
  }
  const statistic = (i: number) => {
    const bytes = new ByteWriter(8)
    appendPlain(bytes, type, present[i]!)
    return type === BYTE_ARRAY ? bytes.getBytes().slice(4) : bytes.getBytes().slice()
  }
  const bounded = present.length > 0 && sizes[min]! <= statisticBytes && sizes[max]! <= statisticBytes
  return {
    meta: {
      field_1: type,
      field_2: dictionaryWins ? [PLAIN, RLE_DICTIONARY] : [PLAIN],
      field_3: [name],
      field_4: SNAPPY,
      field_5: BigInt(values.length),
      field_6: BigInt(uncompressed),
      field_7: BigInt(out.offset - start),
      field_9: dataOffset,
      field_11: dictionaryOffset,
      field_12: { field_3: BigInt(values.length - present.length), ...(bounded ? { field_5: statistic(max), field_6: statistic(min), field_7: true, field_8: true } : {}) }
    },
    start,
    uncompressed
  }
}

/** One Parquet file of `rows`, sorted by (stream, sequence). */
export const encode = (rows: ReadonlyArray<FactRow>): Uint8Array => {
  const sorted = [...rows].sort(bySubject)
  const out = new ByteWriter()
  out.appendBytes(magic)
  const rowGroups = []
  // Row groups of 1,000 rows, then 100,000 (hyparquet-writer's default: a small first group for a quick first read).
  for (let from = 0; from < sorted.length; from += from === 0 ? 1000 : 100_000) {
    const group = sorted.slice(from, from === 0 ? 1000 : from + 100_000)
    const chunks = columns.map((name) => writeChunk(out, name, group.map((row) => valueOf(row, name))))
    rowGroups.push({
      field_1: chunks.map((chunk) => ({ field_2: BigInt(chunk.start), field_3: chunk.meta })),
      field_2: BigInt(chunks.reduce((n, chunk) => n + chunk.uncompressed, 0)),
      field_3: BigInt(group.length),
      field_5: BigInt(chunks[0]!.start),
      field_6: BigInt(out.offset - chunks[0]!.start)
    })
  }
  const footer = out.offset
  serializeTCompactProtocol(out, {
    field_1: 2,
    field_2: [
      { field_4: "root", field_5: columns.length },
      ...columns.map((name) => ({ field_1: typeOf(name), field_3: optional(name) ? 1 : 0, field_4: name, field_6: typeOf(name) === BYTE_ARRAY ? UTF8 : undefined }))
    ],
    field_3: BigInt(sorted.length),
    field_4: rowGroups,
    field_6: "factline archive",
    field_7: columns.map(() => ({ field_1: {} }))
  })
  out.appendUint32(out.offset - footer)
  out.appendBytes(magic)
  return new Uint8Array(out.getBuffer())
}

type Thrift = { [key: `field_${number}`]: any }
const notFacts = (why: string) => new Error(`not an archive of facts: ${why}`)

/** The file's metadata (its footer), read by two ranges from the end. */
const footerOf = async (source: Source): Promise<Thrift> => {
  if (source.byteLength < 12) throw notFacts("too short for Parquet")
  const tail = new DataView(await source.slice(source.byteLength - 8, source.byteLength))
  if (tail.getUint32(4, true) !== 0x31524150) throw notFacts("no Parquet footer")
  const length = tail.getUint32(0, true)
  if (length > source.byteLength - 12) throw notFacts("footer longer than the file")
  return deserializeTCompactProtocol({ view: new DataView(await source.slice(source.byteLength - 8 - length, source.byteLength - 8)), offset: 0 })
}

/** The values of one column chunk: integers as numbers, text as strings, nulls where the column had none. */
const readChunk = async (source: Source, meta: Thrift, leaf: Thrift): Promise<Array<Value>> => {
  const start = Number(meta.field_11 ?? meta.field_9)
  const bytes = new Uint8Array(await source.slice(start, start + Number(meta.field_7)))
  const reader = { view: new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength), offset: 0 }
  const type: number = meta.field_1
  const codec: number = meta.field_4
  if (codec !== SNAPPY && codec !== UNCOMPRESSED) throw notFacts(`codec ${codec}`)
  const plainValues = (data: Uint8Array, count: number): Array<Value> => {
    const view = new DataView(data.buffer, data.byteOffset, data.byteLength)
    const read: Array<Value> = []
    for (let at = 0; read.length < count;) {
      if (type === INT64) { read.push(Number(view.getBigInt64(at, true))); at += 8 }
      else if (type === INT32) { read.push(view.getInt32(at, true)); at += 4 }
      else { const length = view.getUint32(at, true); read.push(textDecoder.decode(data.subarray(at + 4, at + 4 + length))); at += 4 + length }
    }
    return read
  }
  const inflate = (data: Uint8Array, size: number, compressed = true) => {
    if (codec === UNCOMPRESSED || !compressed) return data
    const output = new Uint8Array(size)
    snappyUncompress(data, output)
    return output
  }
  const total = Number(meta.field_5)
  const values: Array<Value> = []
  let dictionary: Array<Value> = []
  while (values.length < total) {
    const header = deserializeTCompactProtocol(reader)
    const at = reader.offset
    reader.offset += header.field_3
    if (header.field_1 === DICTIONARY_PAGE) {
      dictionary = plainValues(inflate(bytes.subarray(at, reader.offset), header.field_2), header.field_7.field_1)
      continue
    }
    if (header.field_1 !== DATA_PAGE_V2) throw notFacts(`page type ${header.field_1}`)
    const page: Thrift = header.field_8
    const count: number = page.field_1
    const levelsLength: number = page.field_5 + page.field_6
    const defined = new Array<number>(count).fill(1)
    if (leaf.field_3 === 1) readRleBitPackedHybrid({ view: reader.view, offset: at + page.field_6 }, 1, defined, page.field_5)
    const present = count - page.field_2
    const data = inflate(bytes.subarray(at + levelsLength, reader.offset), header.field_2 - levelsLength, page.field_7 !== false)
    let read: Array<Value>
    if (page.field_4 === PLAIN) read = plainValues(data, present)
    else if (page.field_4 === RLE_DICTIONARY || page.field_4 === PLAIN_DICTIONARY) {
      const indexes = new Array<number>(present)
      if (present > 0) readRleBitPackedHybrid({ view: new DataView(data.buffer, data.byteOffset + 1, data.byteLength - 1), offset: 0 }, data[0]!, indexes, data.byteLength - 1)
      read = indexes.map((i) => dictionary[i] ?? null)
    } else throw notFacts(`encoding ${page.field_4}`)
    let next = 0
    for (let i = 0; i < count; i++) values.push(defined[i] === 1 ? read[next++]! : null)
  }
  return values
}

/** The named columns of every row group, in file order. */
const readColumns = async (source: Source, names: ReadonlyArray<Column>) => {
  const metadata = await footerOf(source)
  const leaves: Array<Thrift> = metadata.field_2.slice(1)
  const positions = names.map((name) => {
    const position = leaves.findIndex((leaf) => textDecoder.decode(leaf.field_4) === name)
    if (position < 0) throw notFacts(`no ${name} column`)
    return position
  })
  const read = names.map((): Array<Value> => [])
  for (const group of metadata.field_4 as Array<Thrift>) {
    for (const [i, position] of positions.entries()) {
      const chunk: Array<Value> = await readChunk(source, group.field_1[position].field_3, leaves[position]!)
      if (chunk.length !== Number(group.field_3)) throw notFacts(`${names[i]} has ${chunk.length} values in a group of ${group.field_3} rows`)
      for (const value of chunk) read[i]!.push(value)
    }
  }
  if (read.some((values) => values.length !== Number(metadata.field_3))) throw notFacts("row count differs from the footer's")
  return read
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
  const column = (name: Column) => read[columns.indexOf(name)]!
  const text = (name: Column, i: number) => {
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
