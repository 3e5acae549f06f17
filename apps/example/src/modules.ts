/**
 * The example platform's modules: the one list the Worker entry (`index.ts`),
 * the Drizzle schema (`schema.ts`) and the tests read. Register a new module
 * here (`npm run new:module -- <name>` does it for you).
 */
import { calls } from "./calls/Calls.js"
import { crm } from "./crm/Crm.js"

export const modules = [calls, crm] as const
