/**
 * The operator's session in this tab: the API token, kept in `sessionStorage` (gone with the tab, never in
 * `localStorage`, never in the page's URL or markup), and a generation number bumped at every sign-in and
 * sign-out. A response is used only if its request was made in the current generation: a slow answer of an
 * earlier session is dropped — never rendered, and never allowed to sign the new session out.
 */
const storageKey = "factline.dashboard.token"

let current: string | null = sessionStorage.getItem(storageKey)
let generation = 0

/** The signed-in token, if any. */
export const token = (): string | null => current

/** The current generation: compare it with the one a request started in. */
export const currentGeneration = (): number => generation

export const begin = (value: string): void => {
  generation++
  current = value
  sessionStorage.setItem(storageKey, value)
}

export const end = (): void => {
  generation++
  current = null
  sessionStorage.removeItem(storageKey)
}
