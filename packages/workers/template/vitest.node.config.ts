// The specs (test/**/*.spec.ts) in plain Node with the test kit, @factline/core/testing (Node ≥ 22.13).
import { defineConfig } from "vitest/config"

export default defineConfig({ test: { include: ["test/**/*.spec.ts"], environment: "node" } })
