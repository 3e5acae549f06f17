/**
 * The confirmation dialog (`#dialog`): a title, an explanation, optionally a reason or note typed into it,
 * and an action that runs on OK. No `window.prompt`/`confirm`: a required reason is checked before the
 * action runs, and the action's failure is shown in the dialog, which stays open to try again.
 */
import * as Api from "./Api.js"
import { byId } from "./Dom.js"

export interface Request {
  readonly title: string
  readonly text: string
  /** Whether a text is asked for (the reason of a skip, the note of an escalation). */
  readonly input: boolean
  readonly required?: boolean
  readonly placeholder?: string
  /** The OK button's label. */
  readonly ok: string
  /** Runs on OK with the trimmed text; the dialog closes when it resolves. */
  readonly run: (text: string) => Promise<unknown>
}

let pending: Request | null = null

const dialog = () => byId<HTMLDialogElement>("dialog")
const input = () => byId<HTMLTextAreaElement>("dialog-input")
const ok = () => byId<HTMLButtonElement>("dialog-ok")
const showError = (message: string) => {
  const element = byId("dialog-error")
  element.hidden = false
  element.textContent = message
}

export const open = (request: Request): void => {
  pending = request
  byId("dialog-title").textContent = request.title
  byId("dialog-text").textContent = request.text
  input().hidden = !request.input
  input().value = ""
  input().placeholder = request.placeholder ?? ""
  byId("dialog-error").hidden = true
  ok().textContent = request.ok
  ok().disabled = false
  dialog().showModal()
  if (request.input) input().focus()
}

export const isOpen = (): boolean => dialog().open

export const close = (): void => {
  pending = null
  if (dialog().open) dialog().close()
}

const confirm = () => {
  const request = pending
  if (request === null) return
  const value = input().value.trim()
  if (request.required && value === "") return showError("A reason is required.")
  ok().disabled = true
  request.run(value).then(close, (error: unknown) => {
    ok().disabled = false
    showError(Api.errorText(error))
  })
}

export const setup = (): void => {
  byId("dialog-cancel").addEventListener("click", close)
  byId("dialog-form").addEventListener("submit", (event) => {
    event.preventDefault()
    confirm()
  })
}
