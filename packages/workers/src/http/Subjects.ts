/**
 * The handlers of the Subjects routes, implemented against their description (`@factline/core/api`'s `Subjects`,
 * where each route's path, parameters, answers and errors are declared). The use cases are core's: the erasure
 * (`Erasure`, started through `BatchStart.erase`) and the export (`SubjectExport`), always of the caller's tenant.
 */
import * as Effect from "effect/Effect"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import { Failure } from "@factline/core"
import { BatchStart, Erasure, Placement, SubjectExport } from "@factline/core/runtime"
import { apiOf, Caller } from "./Edge.js"
import { Subjects as Description } from "@factline/core/api"

export const handlers = HttpApiBuilder.group(apiOf(Description.group), "subjects", (handlers) =>
  handlers
    .handle("eraseSubject", ({ params }) =>
      Effect.gen(function*() {
        const caller = yield* Caller
        return Erasure.view(yield* BatchStart.erase(caller.tenantId, params.subject, caller.name ?? caller.tenantId))
      }))
    .handle("getSubjectErasure", ({ params }) =>
      Effect.gen(function*() {
        const { tenantId } = yield* Caller
        const erasure = yield* Placement.reading(tenantId)(Erasure.latest(tenantId, params.subject))
        if (!erasure) return yield* new Failure.NotFound({ message: `data subject ${JSON.stringify(params.subject)} was never erased in this tenant` })
        return Erasure.view(erasure)
      }))
    .handle("exportSubject", ({ params }) =>
      Effect.gen(function*() {
        const { tenantId } = yield* Caller
        return yield* Placement.reading(tenantId)(SubjectExport.exportSubject(tenantId, params.subject))
      })))
