/**
 * Every projection the example registers has a table a migration creates, with every column of its Drizzle table:
 * a projection (or a column) whose migration was never generated fails here, in `npm test`, not in a deployment (where its writes would dead-letter
 * `projection_not_migrated`).
 */
import { describe, expect, it } from "vitest"
import { checkMigrations, unmigrated } from "@factline/core/testing"
import { modules } from "../src/modules.js"
import { testModule } from "./TestModule.js"

/** The repository's migrations folder (this file is apps/example/test/migrations.spec.ts). */
const folder = new URL("../../../migrations/", (import.meta as ImportMeta & { readonly url: string }).url)

describe("migrations", () => {
  it("every registered projection has a table some migration creates", () => {
    checkMigrations(modules, folder)
  })

  it("a projection without one is named, with its table", () => {
    // The test module's projections create their tables in the tests that use them; no migration does.
    expect(() => checkMigrations([...modules, testModule], folder)).toThrow(
      /projection "tallies": no migration in .*migrations\/ creates its table test_tallies/
    )
    const found = unmigrated([testModule], ["CREATE TABLE `test_tallies` (x int);", "CREATE TABLE IF NOT EXISTS \"test_fragile\" (y int)"])
    expect(found.filter((m) => m.columns === undefined).map((m) => m.projection)).toEqual(["test_invoices", "unmigrated"])
    // A table a migration creates without some of the columns its Drizzle table declares: those columns are named.
    expect(found.find((m) => m.projection === "tallies")?.columns).toContain("tenant_id")
  })
})
