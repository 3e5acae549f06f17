/**
 * Every projection the app registers has a table a migration creates: a projection added without
 * `npm run db:generate` fails here, not in the deployment (where its writes would dead-letter
 * `projection_not_migrated`).
 */
import { it } from "vitest"
import { checkMigrations } from "@factline/core/testing"
import { modules } from "../src/modules.js"

it("every registered projection has a table some migration creates", () => {
  checkMigrations(modules, new URL("../migrations/", import.meta.url))
})
