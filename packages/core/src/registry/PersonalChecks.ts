/**
 * The registry's checks of personal data (personal/Personal.ts), at start-up: every declaration fits its schemas
 * (`Personal.problems`), and personal data never flows on in plaintext by accident — a fact that a handler,
 * processor or workflow derives from personal data and that has a field of the same name as a personal field of
 * its source must declare that field personal too. Every mistake throws a `RegistryConfigError` naming both sides.
 */
import type * as FactDefinition from "../definitions/FactDefinition.js"
import type { Module } from "../definitions/Module.js"
import * as Personal from "../personal/Personal.js"
import * as Projection from "../definitions/Projection.js"
import { RegistryConfigError } from "./Registrations.js"

const fail = (message: string): never => {
  throw new RegistryConfigError(message)
}

const checkDeclaration = (owner: string, declaration: Personal.Declaration | undefined, schemas: ReadonlyArray<{ readonly schema: unknown }>) => {
  if (declaration === undefined) return
  const problems = Personal.problems(owner, declaration, schemas.map((v) => v.schema as never))
  if (problems.length > 0) fail(problems.join("; "))
}

/** Personal fields of `source` that `fact` carries under the same name without declaring them personal. */
const leaked = (source: Personal.Declaration | undefined, fact: FactDefinition.Any): ReadonlyArray<string> => {
  if (source === undefined) return []
  const names = new Set(Personal.fieldNames(fact.schema))
  const declared = new Set(fact.personalData?.fields ?? [])
  return source.fields.filter((f) => names.has(f) && !declared.has(f))
}

const checkFlow = (by: string, sourceName: string, source: Personal.Declaration | undefined, emits: ReadonlyArray<FactDefinition.Any>) => {
  for (const fact of emits) {
    const fields = leaked(source, fact)
    if (fields.length > 0) {
      fail(
        `${by} reads ${sourceName}, whose field(s) ${fields.map((f) => `"${f}"`).join(", ")} are personal data, and emits fact type "${fact.type}", which has ` +
          `field(s) of the same name not declared personal: they would be stored in plaintext. Declare them on the fact: ` +
          `.personal({ subject: "${source!.subject}", fields: [${fields.map((f) => `"${f}"`).join(", ")}] })`
      )
    }
  }
}

/** A snapshot holds the folded state in plaintext, out of reach of erasure: no snapshot for a decider that folds personal data. */
const checkSnapshot = (decider: string, folded: ReadonlyArray<FactDefinition.Any>) => {
  const personal = folded.filter((f) => f.personalData !== undefined)
  if (personal.length > 0) {
    fail(
      `${decider} declares a snapshot but folds fact type(s) ${personal.map((f) => `"${f.type}"`).join(", ")} with personal data: its snapshots would ` +
        `store state derived from personal data in plaintext, which erasing a data subject could not reach. Remove its snapshot, ` +
        `or fold only fact types without personal data`
    )
  }
}

/** Every module's personal declarations and flows, checked. */
export const check = (modules: ReadonlyArray<Module>) => {
  for (const module of modules) {
    for (const handler of module.handlers) {
      checkDeclaration(`message type "${handler.message.messageType}"`, handler.message.personalData, handler.message.versions)
      checkFlow(`${handler._tag === "Decider" ? "decider" : "handler"} "${handler.name}" (module ${module.name})`, `message type "${handler.message.messageType}"`, handler.message.personalData, handler.emits)
      if (handler._tag === "Decider" && handler.snapshot !== undefined) checkSnapshot(`decider "${handler.name}" (module ${module.name})`, [...handler.emits, ...handler.reads])
    }
    const emitters = [...module.handlers.map((h) => h.emits), ...module.processors.map((p) => p.emits), ...module.workflows.map((w) => w.emits)]
    for (const emits of emitters) for (const fact of emits) checkDeclaration(`fact type "${fact.type}"`, fact.personalData, fact.versions)
    for (const processor of module.processors) {
      checkFlow(`processor "${processor.name}" (module ${module.name})`, `fact type "${processor.fact.type}"`, processor.fact.personalData, processor.emits)
    }
    for (const projection of module.projections) {
      const personal = projection.on.filter((m) => m.fact.personalData !== undefined)
      if (personal.length > 0 && projection.erasure === undefined) {
        fail(
          `projection "${projection.name}" (module ${module.name}) maps fact type(s) ${personal.map((m) => `"${m.fact.type}"`).join(", ")} with personal data ` +
            `but does not say what erasing a data subject does to its rows: declare erasure: { subject: "<column holding the subject id>", action: "delete" }, ` +
            `or { subject, action: "mask", columns: [...] }, or { action: "none", reason: "…" } if it stores none of the personal fields`
        )
      }
      if (projection.erasure !== undefined && projection.erasure.action !== "none") {
        const columns = new Set(Projection.columnNames(projection))
        const named = [projection.erasure.subject, ...(projection.erasure.action === "mask" ? projection.erasure.columns : [])]
        const unknown = named.filter((c) => !columns.has(c))
        if (unknown.length > 0) fail(`projection "${projection.name}" (module ${module.name}): erasure names column(s) ${unknown.join(", ")} that its table does not have (columns: ${[...columns].join(", ")})`)
      }
    }
    for (const event of module.webhooks) {
      const declaration = event.fact.personalData
      if (declaration === undefined || event.schema === event.fact.schema) continue
      const names = new Set(Personal.fieldNames(event.schema))
      if (!names.has(declaration.subject)) {
        fail(
          `webhook event "${event.type}" (module ${module.name}) builds its own payload from fact type "${event.fact.type}", which carries personal data: ` +
            `its payload must carry the data subject field "${declaration.subject}" and keep the personal fields under their names (${declaration.fields.join(", ")}), ` +
            `so it travels sealed on the webhooks queue and in the delivery record`
        )
      }
    }
    for (const workflow of module.workflows) {
      const sources = [workflow.start, ...Object.values(workflow.waitsFor as Record<string, ReadonlyArray<FactDefinition.Any>>).flat()]
      for (const source of sources) checkFlow(`workflow "${workflow.name}" (module ${module.name})`, `fact type "${source.type}"`, source.personalData, workflow.emits)
    }
  }
}
