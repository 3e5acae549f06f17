/**
 * Every projection the app registers has a table a migration creates, with every column its Tables.ts declares:
 * a projection (or a column) added without
 * `npm run db:generate` fails here, not in the deployment (where its writes would dead-letter
 * `projection_not_migrated`).
 */
import { it } from "vitest"
import { checkMigrations } from "@factline/core/testing"
import { modules } from "../src/modules.js"

/** The app's migrations folder (this file is test/migrations.spec.ts). */
const folder = new URL("../migrations/", (import.meta as ImportMeta & { readonly url: string }).url)

it("every registered projection has a table some migration creates, with every column of its Tables.ts", () => {
  checkMigrations(modules, folder)
})
