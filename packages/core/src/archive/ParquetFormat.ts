/**
 * What the archive's Parquet files hold, in Parquet's own numbers (parquet.thrift): the physical types, encodings,
 * page types and codecs used, a column's description and a value as the writer takes it and the reader gives it
 * back. Shared by ParquetWriter.ts and ParquetReader.ts; the facts' schema itself is in Parquet.ts.
 */
export const INT32 = 1
export const INT64 = 2
export const BYTE_ARRAY = 6
export const PLAIN = 0
export const PLAIN_DICTIONARY = 2
export const RLE_DICTIONARY = 8
export const DICTIONARY_PAGE = 2
export const DATA_PAGE_V2 = 3
export const UNCOMPRESSED = 0
export const SNAPPY = 1
/** The converted type of a text column. */
export const UTF8 = 0

/** A leaf column: its name, physical type, and whether it may be null. */
export interface Column {
  readonly name: string
  readonly type: typeof INT32 | typeof INT64 | typeof BYTE_ARRAY
  readonly optional: boolean
}

/** A value of a column: text, an integer (INT64 ones are safe integers here), or null in an optional column. */
export type Value = string | number | null

/** A byte range source: a whole buffer, or an object read by ranges. */
export interface Source {
  readonly byteLength: number
  slice(start: number, end?: number): ArrayBuffer | Promise<ArrayBuffer>
}

/** "PAR1", at both ends of a file. */
export const magic = new TextEncoder().encode("PAR1")
