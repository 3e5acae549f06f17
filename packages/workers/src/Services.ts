/**
 * The live layers of core's services, built from a Worker's bindings.
 * This is the only place where bindings meet the framework.
 */
import { Layer } from "effect"
import { AcceptedKeys, DeadLetters, Inbox, Ledger, PayloadStore, Producer, ProjectionStore, QueueProducer, RetryPolicy, Shards, type MessageDefinition } from "@factline/core"
import type { PlatformEnv } from "./Env.js"

const deadLetterQueue = (env: PlatformEnv) => (queue: string) => {
  const policy = RetryPolicy.forQueue(queue)
  return policy ? (env[policy.deadLetterBinding] as Queue | undefined) : undefined
}

/** A platform queue's producer binding by queue name (undefined for an unknown queue or a missing binding). */
export const queueBinding = (env: PlatformEnv) => (queue: string) => {
  const policy = RetryPolicy.forQueue(queue)
  return policy && policy.queue === queue ? (env[policy.binding] as Queue | undefined) : undefined
}

/** `FACTLINE_LEDGER_SHARDS`: the shard count recorded for tenants seen from now on (default 16). */
export const shardsPerTenant = (env: PlatformEnv): number => {
  const raw = env.FACTLINE_LEDGER_SHARDS
  return raw === undefined || raw === "" ? Shards.defaultShardsPerTenant : Shards.checkShardCount(Number(raw))
}

const ledgerLayer = (env: PlatformEnv) => Ledger.Ledger.layer(env.LEDGER, env.DB, shardsPerTenant(env))

export type ConsumerServices =
  | AcceptedKeys.AcceptedKeys
  | Ledger.Ledger
  | Inbox.Inbox
  | ProjectionStore.ProjectionStore
  | DeadLetters.DeadLetters
  | PayloadStore.PayloadStore
  | QueueProducer.QueueProducer

export const consumerLayer = (env: PlatformEnv): Layer.Layer<ConsumerServices> =>
  Layer.mergeAll(
    ledgerLayer(env),
    AcceptedKeys.AcceptedKeys.layer(env.DB),
    QueueProducer.QueueProducer.layer(queueBinding(env)),
    Inbox.Inbox.layer(env.DB),
    ProjectionStore.ProjectionStore.layer(env.DB),
    DeadLetters.DeadLetters.layer(deadLetterQueue(env)),
    PayloadStore.PayloadStore.layer(env.PAYLOADS, env.FACTLINE_PAYLOAD_BUCKET)
  )

export const apiLayer = (env: PlatformEnv, definitions: ReadonlyMap<string, MessageDefinition.MessageDefinition>) => {
  const payloads = PayloadStore.PayloadStore.layer(env.PAYLOADS, env.FACTLINE_PAYLOAD_BUCKET)
  return Layer.mergeAll(
    ledgerLayer(env),
    ProjectionStore.ProjectionStore.layer(env.DB),
    AcceptedKeys.AcceptedKeys.layer(env.DB),
    payloads,
    Producer.Producer.layer({ queue: env.EVENTS_QUEUE, definitions, defaultSource: "http" }).pipe(Layer.provide(payloads))
  )
}
