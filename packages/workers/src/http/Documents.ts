/**
 * The handlers of the Documents routes, implemented against their description (`@factline/core/api`'s `Documents`,
 * where each route's path, parameters, body, answers and errors are declared). What each does is
 * documented there.
 */
import * as Effect from "effect/Effect"
import type { HttpApi } from "effect/http-api"
import * as HttpApiBuilder from "effect/http-api/HttpApiBuilder"
import * as OpenApi from "effect/http-api/OpenApi"
import * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import { Failure, Registry } from "@factline/core"
import { AsyncApi } from "@factline/core/runtime"
import * as Services from "../Services.js"
import { apiOf, WorkerEnv } from "./Edge.js"
import { Documents as Description } from "@factline/core/api"

/** The documents are public and the same for everyone: cacheable, and readable by tools on other origins. */
const json = (text: string) =>
  HttpServerResponse.text(text, { contentType: "application/json; charset=utf-8", headers: { "cache-control": "public, max-age=300", "access-control-allow-origin": "*" } })

/**
 * A page of the static assets, for a request that reached the Worker: the same file and headers the assets
 * serve. Without an `ASSETS` binding the app has not configured the assets; the 404 says how.
 */
const fromAssets = Effect.gen(function*() {
  const request = (yield* HttpServerRequest.HttpServerRequest).source as Request
  const assets = Services.staticAssets(yield* WorkerEnv)
  if (assets === undefined) {
    return yield* new Failure.NotFound({ message: `${new URL(request.url).pathname} is a page of @factline/workers' static assets, and this Worker has none: add "assets": { "directory": "node_modules/@factline/workers/dist/assets", "binding": "ASSETS" } to wrangler.jsonc` })
  }
  return HttpServerResponse.raw(yield* Effect.promise(() => assets.fetch(request)))
})

/** The documents' handlers; `api` is the whole API the OpenAPI document describes (generated once per isolate, on first use). */
export const handlers = (api: HttpApi.HttpApi<string, any>) =>
  HttpApiBuilder.group(apiOf(Description.group), "documents", (handlers) => {
    let openApiText: string | undefined
    let asyncApiText: string | undefined
    return handlers
      .handle("openApi", () => Effect.sync(() => json(openApiText ??= JSON.stringify(OpenApi.fromApi(api)))))
      .handle("asyncApi", () => Effect.map(Effect.service(Registry.Registry), (registry) => json(asyncApiText ??= JSON.stringify(AsyncApi.generate(registry)))))
      .handle("docs", () => fromAssets)
      .handle("dashboard", () => fromAssets)
  })
