/** The app's modules: the one list the Worker (`index.ts`), the schema and the tests read. Register new modules here. */
import { orders } from "./orders/Orders.js"

export const modules = [orders] as const
