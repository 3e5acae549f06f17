/**
 * Reads named columns of a Parquet file by byte ranges (the footer, then each wanted column chunk), as the
 * archive's files hold them: data pages v2, PLAIN or dictionary-encoded, SNAPPY or uncompressed, flat texts and
 * integers with nulls where a column is optional — the files ParquetWriter.ts writes and those hyparquet-writer
 * wrote before it. Built on hyparquet's leaf modules (Thrift compact protocol, Snappy, the RLE/bit-packed hybrid);
 * anything else (another page type, encoding or codec) is refused as not an archive of facts.
 */
import { readRleBitPackedHybrid } from "hyparquet/src/encoding.js"
import { snappyUncompress } from "hyparquet/src/snappy.js"
import { deserializeTCompactProtocol } from "hyparquet/src/thrift.js"
import { DATA_PAGE_V2, DICTIONARY_PAGE, INT32, INT64, PLAIN, PLAIN_DICTIONARY, RLE_DICTIONARY, SNAPPY, type Source, UNCOMPRESSED, type Value } from "./ParquetFormat.js"

const textDecoder = new TextDecoder()

type Thrift = { [key: `field_${number}`]: any }
/** What the reader throws on bytes it cannot read as the archive's Parquet. */
export const notFacts = (why: string) => new Error(`not an archive of facts: ${why}`)

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
    if (leaf.field_3 === 1 && page.field_5 > 0) readRleBitPackedHybrid({ view: reader.view, offset: at + page.field_6 }, 1, defined, page.field_5)
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
export const readColumns = async (source: Source, names: ReadonlyArray<string>): Promise<Array<Array<Value>>> => {
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
