/**
 * The payload bucket's layout (R2): which prefixes hold what. A tenant's own objects — the facts archive, batch
 * inputs and exports, uploads — are under `<tenant>/`; the platform's prefixes start with `_`, which no tenant id
 * does, so none can fall under a tenant's: offloaded payloads under `_payloads/<tenant>/`, kept events (many
 * tenants' requests in one object) under `_kept/`, spilled dead letters under `_platform/dead-letters/spilled/`.
 * The modules that write each (PayloadStore, KeptEvents, DeadLetterSpill) and a tenant's deletion read them here.
 */

/** A tenant's own objects: archive, the ledger's cold segments (`ledger/`), batch files, uploads. */
export const tenantPrefix = (tenantId: string) => `${tenantId}/`
/** Every offloaded payload (the one prefix a lifecycle rule expires). */
export const payloadsPrefix = "_payloads/"
/** Accepted events kept in development (`FACTLINE_KEEP_ACCEPTED`). */
export const keptPrefix = "_kept/"
/** Dead letters D1 refused, spilled to R2 until the cron inserts them. */
export const spilledPrefix = "_platform/dead-letters/spilled/"
