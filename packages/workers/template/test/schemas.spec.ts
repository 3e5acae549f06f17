/**
 * Every message and fact version of the app's modules has its committed JSON Schema under
 * `src/<module>/schemas/<type>.v<N>.json`: changing a schema that is deployed without a new version
 * (`.version(N + 1, Schema, upcaster)` on its definition) fails here. `npm run snapshots:write` writes the
 * files of new types and versions; `npm run snapshots:rewrite` accepts a change to a version never deployed.
 */
import { describe, it } from "vitest"
import { checkSchemaSnapshots } from "@factline/core/testing"
import { modules } from "../src/modules.js"

describe("schema snapshots", () => {
  it("every message and fact version has its committed JSON Schema, unchanged", () => {
    checkSchemaSnapshots({ modules, commands: { write: "npm run snapshots:write", rewrite: "npm run snapshots:rewrite" } })
  })
})
