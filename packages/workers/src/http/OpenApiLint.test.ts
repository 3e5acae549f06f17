/**
 * The OpenAPI document GET /openapi.json serves (`OpenApi.fromApi` of `Routes.api`, as Documents.ts
 * generates it) passes Redocly's `recommended` ruleset without a single error or warning: servers, a
 * licence, a 4xx for every operation, no one-branch `anyOf`, no two paths that match the same URL. The
 * lint runs `@redocly/cli` offline on the document written to a temporary file.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { cwd, env, execPath } from "node:process"
import { OpenApi } from "effect/http-api"
import { expect, it } from "vitest"
import { api } from "./Routes.js"

interface Problem {
  readonly ruleId: string
  readonly severity: string
  readonly message: string
  readonly location: ReadonlyArray<{ readonly pointer: string }>
}

const redocly = createRequire(join(cwd(), "package.json")).resolve("@redocly/cli/bin/cli.js")

const lint = (document: unknown): Array<string> => {
  const dir = mkdtempSync(join(tmpdir(), "factline-openapi-"))
  try {
    const file = join(dir, "openapi.json")
    writeFileSync(file, JSON.stringify(document))
    // Exits non-zero when there are errors; the report is on stdout either way. Run in the temporary
    // directory so no redocly.yaml is picked up: the ruleset is `recommended`, as published.
    let stdout: string
    try {
      stdout = execFileSync(execPath, [redocly, "lint", "--extends=recommended", "--format=json", file], {
        cwd: dir,
        env: { ...env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" },
        encoding: "utf8",
        maxBuffer: 16 * 1024 * 1024
      })
    } catch (error) {
      stdout = (error as { stdout?: string }).stdout ?? ""
    }
    const report = JSON.parse(stdout) as { readonly problems: ReadonlyArray<Problem> }
    return report.problems.map((p) => `${p.severity} ${p.ruleId} at ${p.location[0]?.pointer}: ${p.message}`)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

it("the served OpenAPI document has no error and no warning under Redocly's recommended ruleset", () => {
  expect(lint(OpenApi.fromApi(api))).toEqual([])
})

it("the lint can fail: a document without servers or licence, with a one-branch anyOf, is reported", () => {
  const document = structuredClone(OpenApi.fromApi(api)) as Record<string, any>
  delete document.servers
  delete document.info.license
  document.paths["/v1/facts"].get.parameters[0].schema = { anyOf: [{ type: "string" }] }
  const problems = lint(document)
  expect(problems).toEqual(expect.arrayContaining([
    expect.stringMatching(/^error no-empty-servers/),
    expect.stringMatching(/^warn info-license/),
    expect.stringMatching(/^warn no-illogical-composition-keywords at #\/paths\/~1v1~1facts/)
  ]))
}, 60_000)
