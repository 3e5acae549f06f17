import { DatabaseSync } from "node:sqlite"
import { describe, expect, it } from "vitest"
import * as FanOut from "./FanOut.js"

describe("FanOut's merge order", () => {
  it("is SQLite's: NULL, numbers, text by UTF-8 bytes (not UTF-16 units); integer columns exactly past 2^53", () => {
    const values: Array<string | number | null> = ["b", "a", "\u{1F600}", "\uFFFD", "A", "", 10, 9, -1, 2.5, null, "10", "ä"]
    const db = new DatabaseSync(":memory:")
    db.exec("CREATE TABLE t (v)")
    const insert = db.prepare("INSERT INTO t (v) VALUES (?)")
    for (const v of values) insert.run(v)
    const sqlite = db.prepare("SELECT v FROM t ORDER BY v").all().map((r) => (r as { v: string | number | null }).v)
    expect([...values].sort((a, b) => FanOut.compareValues(a, b, false))).toEqual(sqlite)
    // An integer column past 2^53 comes back as its exact decimal text (ProjectionQuery.exactInteger): compared as integers.
    const big = ["9007199254740993", 9007199254740991, "18446744073709551615", -5]
    expect([...big].sort((a, b) => FanOut.compareValues(a, b, true))).toEqual([-5, 9007199254740991, "9007199254740993", "18446744073709551615"])
  })
})
