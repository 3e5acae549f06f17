/**
 * The API reference page (`GET /docs`), its start-up script: mounts Scalar (the standalone bundle served
 * beside this file from the same static assets, so the page needs no internet) on `#api-reference`, reading
 * this deployment's `/openapi.json`. A script file rather than inline code, so the page's CSP can stay
 * `script-src 'self'`. The page's CSP refuses Scalar's font host, so the reference shows in the system's fonts.
 */
declare const Scalar: {
  readonly createApiReference: (selector: string, configuration: Readonly<Record<string, unknown>>) => unknown
}

Scalar.createApiReference("#api-reference", { url: "/openapi.json", withDefaultFonts: false, hideClientButton: false })
