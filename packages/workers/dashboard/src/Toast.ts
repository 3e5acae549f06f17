/** Short notices in the corner (`#toast`, an aria-live region): 4 s, or 8 s for a failure. */
import { byId, h } from "./Dom.js"

export const show = (message: string, failure = false): void => {
  const element = h("div", { class: failure ? "bad" : "", role: "status", text: message })
  byId("toast").appendChild(element)
  setTimeout(() => element.remove(), failure ? 8_000 : 4_000)
}
