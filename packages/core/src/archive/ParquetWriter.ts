/**
 * Writes a Parquet file of flat columns (texts, INT32, INT64; nulls only where a column is optional) as
 * hyparquet-writer wrote the archive's files: SNAPPY, data pages v2 of about 1 MiB, a dictionary page where it and
 * its bit-packed indexes at least halve a column, null counts and exact min/max (texts up to 60 bytes), row groups
 * of 1,000 then 100,000 rows. Built on hyparquet-writer's leaf modules (Thrift compact protocol, Snappy, the
 * RLE/bit-packed hybrid, a growing byte buffer), not its general writer: with every type, codec, encoding, bloom
 * filter, page index, variant and geometry it supports, it and hyparquet's reader were ≈ 36 KiB of the Worker's
 * gzip bundle (docs/performance.md, bundle size). Deterministic: the same values give the same bytes.
 */
import { ByteWriter } from "hyparquet-writer/src/bytewriter.js"
import { writeRleBitPackedHybrid } from "hyparquet-writer/src/encoding.js"
import { snappyCompress } from "hyparquet-writer/src/snappy.js"
import { serializeTCompactProtocol } from "hyparquet-writer/src/thrift.js"
import { BYTE_ARRAY, type Column, DATA_PAGE_V2, DICTIONARY_PAGE, INT32, INT64, magic, PLAIN, RLE_DICTIONARY, SNAPPY, UTF8, type Value } from "./ParquetFormat.js"

const textEncoder = new TextEncoder()
const pageBytes = 1 << 20
/** Longest PLAIN value (a text's 4-byte length included) written as a statistic; a longer minimum or maximum is left out, so every statistic stays exact. */
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
const writeChunk = (out: ByteWriter, column: Column, values: ReadonlyArray<Value>) => {
  const { name, type } = column
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
    if (column.optional) writeRleBitPackedHybrid(levels, values.slice(from, to).map((value) => value === null ? 0 : 1), 1)
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

/** One Parquet file of `rowCount` rows: each column's values (`data[i]` for `columns[i]`), in row order. */
export const write = (columns: ReadonlyArray<Column>, data: ReadonlyArray<ReadonlyArray<Value>>, rowCount: number, createdBy: string): Uint8Array => {
  const out = new ByteWriter()
  out.appendBytes(magic)
  const rowGroups = []
  // Row groups of 1,000 rows, then 100,000 (hyparquet-writer's default: a small first group for a quick first read).
  for (let from = 0; from < rowCount; from += from === 0 ? 1000 : 100_000) {
    const to = Math.min(rowCount, from === 0 ? 1000 : from + 100_000)
    const chunks = columns.map((column, i) => writeChunk(out, column, data[i]!.slice(from, to)))
    rowGroups.push({
      field_1: chunks.map((chunk) => ({ field_2: BigInt(chunk.start), field_3: chunk.meta })),
      field_2: BigInt(chunks.reduce((n, chunk) => n + chunk.uncompressed, 0)),
      field_3: BigInt(to - from),
      field_5: BigInt(chunks[0]!.start),
      field_6: BigInt(out.offset - chunks[0]!.start)
    })
  }
  const footer = out.offset
  serializeTCompactProtocol(out, {
    field_1: 2,
    field_2: [
      { field_4: "root", field_5: columns.length },
      ...columns.map(({ name, type, optional }) => ({ field_1: type, field_3: optional ? 1 : 0, field_4: name, field_6: type === BYTE_ARRAY ? UTF8 : undefined }))
    ],
    field_3: BigInt(rowCount),
    field_4: rowGroups,
    field_6: createdBy,
    field_7: columns.map(() => ({ field_1: {} }))
  })
  out.appendUint32(out.offset - footer)
  out.appendBytes(magic)
  return new Uint8Array(out.getBuffer())
}
