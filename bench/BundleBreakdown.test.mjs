// node --test bench/BundleBreakdown.test.mjs: the bench's bundle breakdown by package (bench/BundleBreakdown.mjs).
import assert from "node:assert/strict"
import { test } from "node:test"
import * as BundleBreakdown from "./BundleBreakdown.mjs"

test("inputs are grouped by the package they come from: node_modules (scoped or not), the workspace's packages, the app", () => {
  assert.equal(BundleBreakdown.packageOf("../../node_modules/effect/dist/Schema.js"), "effect")
  assert.equal(BundleBreakdown.packageOf("../../node_modules/@scope/lib/index.js"), "@scope/lib")
  assert.equal(BundleBreakdown.packageOf("../../node_modules/hyparquet-writer/node_modules/hyparquet/src/thrift.js"), "hyparquet")
  assert.equal(BundleBreakdown.packageOf("../../packages/core/src/archive/Parquet.ts"), "@factline/core")
  assert.equal(BundleBreakdown.packageOf("src/calls/Calls.ts"), "app")
})

test("bytes in every .js output are summed per package, in KiB, largest first; source maps and empty inputs are left out", () => {
  const metafile = {
    outputs: {
      "out/index.js.map": { inputs: {} },
      "out/index.js": {
        inputs: {
          "../../node_modules/effect/dist/Schema.js": { bytesInOutput: 2048 },
          "../../node_modules/effect/dist/Effect.js": { bytesInOutput: 1024 },
          "../../packages/core/src/index.ts": { bytesInOutput: 0 },
          "../../packages/core/src/archive/Parquet.ts": { bytesInOutput: 4096 },
          "src/index.ts": { bytesInOutput: 512 }
        }
      },
      "out/chunk.js": { inputs: { "../../node_modules/effect/dist/Stream.js": { bytesInOutput: 1024 } } }
    }
  }
  const breakdown = BundleBreakdown.byPackage(metafile)
  assert.deepEqual(breakdown, { effect: 4, "@factline/core": 4, app: 0.5 })
  assert.deepEqual(Object.keys(breakdown), ["effect", "@factline/core", "app"])
})
