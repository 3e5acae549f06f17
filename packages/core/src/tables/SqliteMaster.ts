/**
 * Rows of SQLite's own catalog (`sqlite_master`), as the stores that look at a database's tables read them:
 * the rebuild copies a table's DDL, the catch-up and the tenant move ask which tables exist. Not a Drizzle
 * table: SQLite keeps it, no migration creates it.
 */
import * as Schema from "effect/Schema"

/** A table or index and the statement that created it. */
export const Definition = Schema.Struct({ type: Schema.String, sql: Schema.String })

/** A table's name. */
export const Name = Schema.Struct({ name: Schema.String })
