/**
 * The data subjects panel (`#subjects`): "Erase a data subject" — the subject id typed in, a confirmation naming
 * the subject and saying it cannot be undone, then the erasure's progress (`POST /v1/subjects/:subject/erase`,
 * then `GET /v1/subjects/:subject/erasure` every 2 s until it has ended `erased` or `failed`). The erasure is of the
 * token's tenant (scope `admin`); docs/personal-data.md says what it removes.
 */
import * as Api from "./Api.js"
import * as Dialog from "./Dialog.js"
import { byId, clear, h } from "./Dom.js"
import { badge, when } from "./Format.js"

const pollMs = 2_000
const ended = new Set(["erased", "failed"])

let timer: ReturnType<typeof setTimeout> | null = null

const stop = () => {
  if (timer !== null) clearTimeout(timer)
  timer = null
}

const removed = (e: Api.SubjectErasure) =>
  Object.entries(e.removed).map(([store, counts]) => `${store} ${Object.entries(counts).map(([action, n]) => `${action} ${n}`).join(", ")}`).join(" · ") || "—"

/** Renders the erasure's progress (and keeps following it until it has ended). */
const show = (e: Api.SubjectErasure) => {
  const body = clear(byId("subjects-body"))
  byId("subjects-sub").textContent = `${e.subject}: ${e.phase}`
  const field = (label: string, value: Node | string) => h("tr", {}, h("th", { text: label }), h("td", {}, value))
  body.appendChild(h("table", { id: "erasure", "data-erasure": e.erasure_id, "data-phase": e.phase },
    h("tbody", {},
      field("Erasure", h("span", { class: "mono", text: e.erasure_id })),
      field("Subject", h("span", { class: "mono", text: e.subject })),
      field("Phase", badge(e.phase)),
      field("Keys destroyed", e.keys_erased_at ? when(e.keys_erased_at) : "not yet"),
      field("Cleaning after", e.clean_after ? when(e.clean_after) : "—"),
      field("Removed", h("span", { class: "wrap", id: "erasure-removed", text: removed(e) })),
      field("Requested by", `${e.requested_by}, ${new Date(e.started_at).toLocaleString()}`),
      ...(e.error ? [field("Error", h("span", { class: "error", text: e.error }))] : []))))
  stop()
  if (!ended.has(e.phase)) timer = setTimeout(() => void follow(e.subject), pollMs)
}

const follow = (subject: string): Promise<void> =>
  Api.subjectErasure(subject).then(show, (error: unknown) => {
    byId("subjects-body").appendChild(h("div", { class: "error", text: `Could not read the erasure: ${Api.errorText(error)}` }))
    timer = setTimeout(() => void follow(subject), pollMs)
  })

const ask = (subject: string) =>
  Dialog.open({
    title: `Erase data subject "${subject}"?`,
    text: `Every personal field of "${subject}" in this tenant — in the ledger, the archive, queues, projections, export files — becomes "[erased]": its keys are destroyed, then what was derived in plaintext is removed. This cannot be undone.`,
    input: false,
    ok: "Erase",
    run: () => Api.eraseSubject(subject).then(show)
  })

export const setup = (): void => {
  byId("erase-form").addEventListener("submit", (event) => {
    event.preventDefault()
    const subject = byId<HTMLInputElement>("erase-subject").value.trim()
    const error = byId("erase-error")
    error.hidden = subject !== ""
    error.textContent = subject === "" ? "Enter the data subject's id." : ""
    if (subject !== "") ask(subject)
  })
}

/** Nothing of the previous session stays. */
export const reset = (): void => {
  stop()
  byId<HTMLInputElement>("erase-subject").value = ""
  byId("erase-error").hidden = true
  byId("subjects-sub").textContent = ""
  clear(byId("subjects-body")).appendChild(h("div", { class: "checks", text: "An erasure started here shows its progress." }))
}
