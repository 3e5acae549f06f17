/**
 * Every message and fact version of the example's modules has its committed JSON Schema under
 * `src/<module>/schemas/<type>.v<N>.json`: changing a released schema without a new version fails here,
 * naming the fix (`npm run new:version -- <module> <type>`). `npm run snapshots:write` writes the files of
 * new types and versions.
 */
import { describe, it } from "vitest"
import { checkSchemaSnapshots } from "@factline/core/testing"
import { modules } from "../src/modules.js"

describe("schema snapshots", () => {
  it("every message and fact version has its committed JSON Schema, unchanged", () => {
    checkSchemaSnapshots({ modules })
  })
})
