import { is } from "drizzle-orm"
import { getTableConfig, SQLiteTable } from "drizzle-orm/sqlite-core"
import { describe, expect, it } from "vitest"
import * as PlatformTables from "../tables/PlatformTables.js"
import * as Move from "./Move.js"

/** Every platform table with a `tenant_id` column, by name. */
const tenantScoped = (Object.values(PlatformTables) as ReadonlyArray<unknown>)
  .filter((t): t is SQLiteTable => is(t, SQLiteTable))
  .map((t) => getTableConfig(t))
  .filter((config) => config.columns.some((c) => c.name === "tenant_id"))
  .map((config) => config.name)
  .sort()

describe("a tenant's deletion covers every tenant-scoped table", () => {
  it("each platform table with a tenant_id column is one a move copies, one of the platform's the deletion drops, or the deletion's own record", () => {
    // A new table with a tenant_id column fails here until it is added to Move.tenantTables (read databases: copied
    // by a move, dropped by a deletion) or Move.platformTables (the platform database: dropped by a deletion).
    const covered = new Set<string>([...Move.tenantTables, ...Move.platformTables, "tenant_deletions"])
    expect(tenantScoped.filter((table) => !covered.has(table))).toEqual([])
    expect(tenantScoped).toContain("workflow_instances")
    expect(tenantScoped.length).toBeGreaterThanOrEqual(15)
  })

  it("the lists name only tables that exist, each once", () => {
    const listed = [...Move.tenantTables, ...Move.platformTables]
    expect(listed.filter((t) => !tenantScoped.includes(t))).toEqual([])
    expect(new Set(listed).size).toBe(listed.length)
  })
})
