// drizzle-kit: generates D1 migrations into migrations/ from the platform (and, later, projection) tables.
import { defineConfig } from "drizzle-kit"

export default defineConfig({
  dialect: "sqlite",
  schema: ["./apps/example/src/schema.ts"],
  out: "./migrations"
})
