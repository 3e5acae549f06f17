// drizzle-kit generates D1 migrations into migrations/ from src/schema.ts (the platform's tables and the modules').
import { defineConfig } from "drizzle-kit"

export default defineConfig({ dialect: "sqlite", schema: ["./src/schema.ts"], out: "./migrations" })
