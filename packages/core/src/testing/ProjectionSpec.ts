/**
 * `ProjectionSpec.for(projection).given(facts).then(rows)`: a projection's rows after its facts, checked in order,
 * with every fact applied twice, and in reverse order one by one, each on a fresh in-memory platform. Re-exported
 * by Specs.
 */
import * as Result from "effect/Result"
import type { Fact } from "@factline/schemas"
import * as Module from "../definitions/Module.js"
import * as Projection from "../definitions/Projection.js"
import * as ProjectionConsumer from "../projections/ProjectionConsumer.js"
import { json, matches, same, SpecError } from "./SpecError.js"
import * as TestPlatform from "./TestPlatform.js"

type Rows = ReadonlyArray<Record<string, unknown>>

class ProjectionRun {
  constructor(private readonly projection: Projection.Projection, private readonly facts: ReadonlyArray<Fact>) {}

  /** Applies facts in batches on a fresh in-memory platform; returns the rows (visible columns, booleans read back) and failures. */
  private async apply(batches: ReadonlyArray<ReadonlyArray<Fact>>): Promise<{ rows: Rows; failures: ReadonlyArray<string> }> {
    const p = this.projection
    const platform = TestPlatform.make([Module.make("spec", { projections: [p] })], { requireEmitters: false })
    const failures: Array<string> = []
    for (const batch of batches) {
      const outcomes = await platform.run(ProjectionConsumer.process(batch.map((fact, i) => ({ key: `${i}`, value: { fact } }))))
      for (const outcome of outcomes.values()) if (Result.isFailure(outcome)) failures.push(outcome.failure.message)
    }
    const columns = Projection.visibleColumns(p).filter((c) => c !== "tenant_id")
    const booleans = new Set(Projection.booleanColumns(p))
    const order = ["tenant_id", ...p.key].map((c) => `"${c}"`).join(", ")
    const { results } = await platform.db.prepare(`SELECT * FROM "${Projection.tableName(p)}" ORDER BY ${order}`).all()
    const rows = results.map((row) => Object.fromEntries(columns.map((c) => [c, booleans.has(c) && row[c] !== null ? row[c] === 1 : row[c]])))
    return { rows, failures }
  }

  /**
   * Expects exactly these rows (every visible column but `tenant_id`, in key
   * order) after the facts are applied in order — and the same rows when
   * every fact is applied twice, and when they arrive in reverse order one
   * by one.
   */
  async then(expected: Rows): Promise<void> {
    const scenarios: Array<[string, ReadonlyArray<ReadonlyArray<Fact>>]> = [
      ["in order, in one batch", [this.facts]],
      ["every fact applied twice", [this.facts, this.facts]],
      ["in reverse order, one fact per batch", [...this.facts].reverse().map((f) => [f])]
    ]
    const wanted = json(expected)
    for (const [name, batches] of scenarios) {
      const { rows, failures } = await this.apply(batches)
      if (failures.length > 0) throw new SpecError(`projection ${this.projection.name} failed (${name}): ${failures[0]}`)
      if (!same(json(rows), wanted)) throw new SpecError(`projection ${this.projection.name} gave other rows than expected (${name})`, json(rows), wanted)
    }
  }

  /** Expects applying the facts to fail (a mapping that throws, a column the table lacks); `match` is checked against the error. */
  async thenFails(match?: string | RegExp): Promise<void> {
    const { failures } = await this.apply([this.facts])
    if (failures.length === 0) throw new SpecError(`expected projection ${this.projection.name} to fail, but it applied every fact`)
    if (!failures.some((f) => matches(f, match))) throw new SpecError(`projection ${this.projection.name} failed with another error than expected`, failures[0], String(match))
  }
}

export const ProjectionSpec = {
  for: (projection: Projection.Projection) => ({
    /** The facts, in stream order (build them with `fact(…)`). */
    given: (facts: ReadonlyArray<Fact>) => new ProjectionRun(projection, facts)
  })
}
