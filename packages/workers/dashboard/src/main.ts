/**
 * The operators' dashboard (`GET /dashboard`), the page's entry: sign-in and sign-out, the panels (queue
 * health, runs, workflow instances, dead letters, batch jobs, projections) refreshed together (the data subjects
 * panel, an erasure's progress, follows itself) — by hand, and every 10 s while auto-refresh is
 * on, the tab is visible and no dialog is open; the runs panel also reloads itself every second while live.
 *
 * The page holds no data and needs no token itself. The operator enters a token once; it lives in the tab's
 * `sessionStorage` (Session.ts) and every call sends it to this origin's API (Api.ts, the page's only caller,
 * through @factline/client's `Api`, the client derived from the API's description). Every value from the API reaches the page through `textContent` or `setAttribute` (Dom.ts),
 * never as HTML. The page's headers (`public/_headers`) allow only its own script and stylesheet and requests
 * to its own origin, and forbid framing and caching.
 */
import * as Api from "./Api.js"
import * as Batches from "./Batches.js"
import * as Projections from "./Projections.js"
import * as DeadLetters from "./DeadLetters.js"
import * as Dialog from "./Dialog.js"
import { byId } from "./Dom.js"
import * as Health from "./Health.js"
import * as Runs from "./Runs.js"
import * as Session from "./Session.js"
import * as Subjects from "./Subjects.js"
import * as Workflows from "./Workflows.js"

const refreshEveryMs = 10_000

let auto = true
let timer: ReturnType<typeof setTimeout> | null = null
let loading = false

const refreshButton = () => byId<HTMLButtonElement>("refresh")

const stopTimer = () => {
  if (timer !== null) clearTimeout(timer)
  timer = null
}

const schedule = () => {
  stopTimer()
  if (!auto || Session.token() === null) return
  timer = setTimeout(() => {
    // Not while a dialog is open or the tab is hidden; the next tick tries again.
    if (document.hidden || Dialog.isOpen()) schedule()
    else void refresh()
  }, refreshEveryMs)
}

/** Reloads the panels (one refresh at a time). */
const refresh = async (): Promise<void> => {
  if (Session.token() === null || loading) return
  const generation = Session.currentGeneration()
  loading = true
  refreshButton().disabled = true
  try {
    await Promise.all([Health.load(), Runs.load(), Workflows.load(false), DeadLetters.load(false), Batches.load(), Projections.load()])
    if (generation === Session.currentGeneration()) byId("updated").textContent = `updated ${new Date().toLocaleTimeString()}`
  } finally {
    if (generation === Session.currentGeneration()) {
      loading = false
      refreshButton().disabled = false
      schedule()
    }
  }
}

/** A refresh of an earlier session may never finish: a new session starts unblocked. */
const sessionChanged = () => {
  loading = false
  refreshButton().disabled = false
}

const signOut = (message: string) => {
  Session.end()
  sessionChanged()
  stopTimer()
  Dialog.close()
  // Nothing of the previous session stays on the page.
  Health.reset()
  Runs.reset()
  Workflows.reset()
  DeadLetters.reset()
  Batches.reset()
  Projections.reset()
  Subjects.reset()
  byId("updated").textContent = ""
  byId("app").hidden = true
  byId("login").hidden = false
  const error = byId("login-error")
  error.hidden = !message
  error.textContent = message
  const input = byId<HTMLInputElement>("token")
  input.value = ""
  input.focus()
}

const signIn = (token: string) => {
  Session.begin(token)
  sessionChanged()
  byId("login").hidden = true
  byId("app").hidden = false
  void refresh()
  Runs.start()
}

const start = () => {
  Api.onUnauthorized(signOut)
  Health.setup()
  DeadLetters.setup({ healthChanged: () => void Health.load(), refresh })
  Runs.setup({ openDeadLetters: DeadLetters.show })
  Workflows.setup()
  Subjects.setup()
  Dialog.setup()
  byId("host").textContent = location.host
  byId("login-form").addEventListener("submit", (event) => {
    event.preventDefault()
    const token = byId<HTMLInputElement>("token").value.trim()
    if (token) signIn(token)
  })
  byId("signout").addEventListener("click", () => signOut(""))
  byId("refresh").addEventListener("click", () => void refresh())
  byId<HTMLInputElement>("auto").addEventListener("change", (event) => {
    auto = (event.currentTarget as HTMLInputElement).checked
    schedule()
  })
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && Session.token() !== null && auto && !loading) void refresh()
  })
  const stored = Session.token()
  if (stored !== null) signIn(stored)
  else signOut("")
}

start()
