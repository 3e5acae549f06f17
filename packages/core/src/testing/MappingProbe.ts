/**
 * The registry-time check of projection mappings: each mapping is called with a few values drawn from
 * its fact's schema (Effect's `Arbitrary`, a fixed seed) and the columns it writes are checked against
 * its table, so a misspelled column (`mrr_cent` for `mrr_cents`) fails `RegistrySpec.check` — the app's
 * `npm test` — before any fact is applied, even where the compiler could not see it (a mapping typed as
 * a wide `Row`, or JavaScript). The compiler catches the typed case first (Projection.rows/additive).
 *
 * A probe, not a proof: a mapping that throws on a drawn value, or returns `undefined`, tells nothing
 * and is skipped (its spec and the runtime check still apply); a column written only on some rare
 * branch may not be reached. It runs in the test kit only, never at a Worker's start-up.
 */
import * as Arbitrary from "effect/Arbitrary"
import * as Effect from "effect/Effect"
import type { Fact } from "@factline/schemas"
import * as Projection from "../definitions/Projection.js"

/** Values drawn per mapping: enough to pass the usual `if (!data.x) return undefined` branches. */
const samples = 12

const draws = (schema: Projection.Mapping<unknown>["fact"]["schema"]): ReadonlyArray<unknown> => {
  try {
    return Effect.runSync(Arbitrary.sampleEffect(Arbitrary.schema(schema as never), { count: samples, seed: 40 }))
  } catch {
    // A schema Arbitrary cannot draw from (a declared type without an arbitrary): nothing to probe.
    return []
  }
}

const factOf = (type: string, data: unknown): Fact => ({
  fact_id: "f_probe",
  tenant_id: "tenant-probe",
  stream: "stream-probe",
  sequence: 1,
  type,
  data: data as Record<string, unknown>,
  causation_id: "probe",
  correlation_id: "probe",
  caused_by: "probe",
  created_at: "2026-01-01T00:00:00.000Z"
})

/** The problems of a projection's mappings: one message per mapping that wrote a column its table does not have. */
export const problems = (projection: Projection.Projection): ReadonlyArray<string> =>
  (projection.on as ReadonlyArray<Projection.Mapping<Projection.Row | Projection.AdditiveChange>>).flatMap((mapping) => {
    for (const data of draws(mapping.fact.schema)) {
      let output: Projection.Row | Projection.AdditiveChange | undefined
      try {
        output = mapping.map(data, factOf(mapping.fact.type, data))
      } catch {
        continue
      }
      if (output === undefined || output === null || typeof output !== "object") continue
      const problem = Projection.unknownColumnsProblem(projection, mapping.fact.type, Projection.writtenColumns(projection, output))
      if (problem !== undefined) return [problem]
    }
    return []
  })
