/**
 * A workflow instance that failed for good becomes a dead letter like a queue message's: a `dead_messages` row
 * in its tenant's read database, queue `factline-workflows`, reason `permanent_failure`, its error, the
 * attempts of the step it failed on, the workflow's name as its type, the instance id as its key, the start
 * fact's stream as its subject and the instance's params as its message — listed, shown, skipped and escalated
 * with the others (`factline dlq …`, `/v1/dlq`). Replaying it restarts the instance (Cloudflare's `restart`: its
 * completed external calls carry the same step keys, so each is done once), recorded as a new start of the
 * instance (`started_at` now), so that a second failure is a second record. Skipping it appends the
 * `reconciliation` fact to the stream, as for any dead letter.
 */
import * as DataSubject from "../personal/DataSubject.js"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as DeadLetterConsumer from "../consuming/DeadLetterConsumer.js"
import * as Failure from "../failures/Failure.js"
import type { Workflows } from "../platform/Workflows.js"
import * as Time from "../platform/Time.js"
import { Params } from "./Instances.js"
import type { WorkflowRecords } from "./WorkflowRecords.js"

/** The queue name failed instances are recorded under (no queue of that name exists: replay restarts the instance). */
export const queue = "factline-workflows"

/** Records the failed instance (idempotent by id: the instance and the start of its run). */
export const record = Effect.fn("WorkflowDeadLetters.record")(function*(params: Params, failed: {
  readonly message: string
  readonly attempts: number
  readonly startedAt: string
}) {
  const now = yield* Time.now
  // The instance's data subject, from its start fact when it travelled inline (erasure blanks the record's error text).
  const dataSubjectOf = yield* DataSubject.current
  const row = [
    `wf_${params.instance_id}_${failed.startedAt}`,
    queue,
    "permanent_failure",
    failed.message,
    failed.attempts,
    failed.startedAt,
    now,
    params.tenant_id,
    params.workflow,
    params.instance_id,
    params.stream,
    JSON.stringify(params),
    "open",
    now,
    null,
    params.fact === undefined ? null : dataSubjectOf({ payload: { fact: params.fact } })
  ]
  const stored = yield* DeadLetterConsumer.store([row])
  if (!stored.has(row[0] as string)) return yield* new Failure.Unavailable({ service: "d1", message: `the dead letter of workflow instance ${params.instance_id} could not be stored` })
})

/** Restarts a dead-lettered instance from its recorded params (a missing instance is started again under its id). */
export const restart = (workflows: Workflows["Service"], records: WorkflowRecords["Service"], originalMessage: string) =>
  Effect.gen(function*() {
    const params = yield* Schema.decodeUnknownEffect(Schema.fromJsonString(Params))(originalMessage).pipe(
      Effect.mapError((error) => new Failure.PermanentError({ message: `the dead letter's instance params do not decode: ${error.message}` }))
    )
    yield* records.restarted(params.tenant_id, params.instance_id)
    const restarted = yield* workflows.restart(params.instance_id)
    if (restarted === "missing") yield* workflows.start(params.instance_id, params)
  })
