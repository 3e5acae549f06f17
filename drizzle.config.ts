// drizzle-kit: generates D1 migrations into migrations/ from the platform tables and every module's
// projection tables (each module keeps them in its own `Tables.ts`; a new module's are picked up by the glob).
import { defineConfig } from "drizzle-kit"

export default defineConfig({
  dialect: "sqlite",
  schema: ["./packages/core/src/tables/PlatformTables.ts", "./apps/example/src/*/Tables.ts"],
  out: "./migrations"
})
