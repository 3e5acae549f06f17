/**
 * A D1 database that refuses one copy page of a table (a copy page lost mid-step), and a move run step by step
 * against it (BatchSteps.ts): the tests of resumable moves (the projection move's and the split's).
 */
import { createExecutionContext } from "cloudflare:test"
import { env } from "cloudflare:workers"
import { expect } from "vitest"
import * as CountingBindings from "@factline/core/testing/bindings"
import type { PlatformEnv } from "@factline/workers"
import * as BatchSteps from "./BatchSteps.js"
import { tokenPlatform } from "./helpers.js"
import { platform } from "./worker.js"

/**
 * A database whose first `batch` holding an `INSERT OR REPLACE INTO "<table>"` is refused before reaching it (a copy
 * page lost mid-step); everything else goes through. Statements are recorded by their SQL as they are prepared.
 */
export const refusingFirstCopyOf = (db: D1Database, table: string, refused: { count: number }): D1Database => {
  const recorded = new WeakMap<object, { readonly sql: string; readonly real: D1PreparedStatement }>()
  const copy = `INSERT OR REPLACE INTO "${table}"`
  const statement = (s: D1PreparedStatement, sql: string): D1PreparedStatement => {
    const proxy = new Proxy(s, { get: (t, p) => (p === "bind" ? (...args: Array<unknown>) => statement(t.bind(...args), sql) : typeof (t as any)[p] === "function" ? (t as any)[p].bind(t) : (t as any)[p]) })
    recorded.set(proxy, { sql, real: s })
    return proxy
  }
  const sqlOf = { get: (s: D1PreparedStatement) => recorded.get(s)?.sql }
  const real = (s: D1PreparedStatement) => recorded.get(s)?.real ?? s
  return new Proxy(db, {
    get(target, prop) {
      if (prop === CountingBindings.unwrap) return (target as any)[CountingBindings.unwrap] ?? target
      if (prop === "prepare") return (sql: string) => statement(target.prepare(sql), sql)
      if (prop === "batch") {
        return (statements: Array<D1PreparedStatement>) => {
          if (refused.count === 0 && statements.some((s) => sqlOf.get(s)?.startsWith(copy))) {
            refused.count++
            return Promise.reject(new Error(`injected fault: D1 refused a copy page of ${table}`))
          }
          return target.batch(statements.map(real))
        }
      }
      const value = (target as any)[prop]
      return typeof value === "function" ? value.bind(target) : value
    }
  })
}


/**
 * Starts `move` (the body of `POST /v1/tenants/{tenant}/moves`) with its batch messages recorded instead of sent,
 * against a read database 1 that refuses the first copy page of `table`, then delivers each recorded step in turn
 * (redelivering a retried one) until none is left. Returns the move's id, how many pages were refused and how many
 * deliveries were retried.
 */
export const moveStepByStep = async (tenant: string, move: Record<string, unknown>, table: string, settings: Record<string, string> = {}) => {
  const { sent, queue: recording } = BatchSteps.recordingBatchQueue()
  const refused = { count: 0 }
  const faulty = { ...(env as unknown as PlatformEnv), BATCH_QUEUE: recording, FACTLINE_READ_DB_1: refusingFirstCopyOf(env.FACTLINE_READ_DB_1, table, refused), ...settings } as unknown as PlatformEnv
  const response = await platform.fetch!(new Request(`http://factline.test/v1/tenants/${tenant}/moves`, {
    method: "POST", headers: { authorization: `Bearer ${tokenPlatform}`, "content-type": "application/json" }, body: JSON.stringify(move)
  }) as any, faulty, createExecutionContext())
  expect(response.status).toBe(202)
  const moveId = (await response.json<any>()).move_id as string
  const retried = await BatchSteps.deliverSteps(sent, faulty, 50)
  return { moveId, refused: refused.count, retried }
}
