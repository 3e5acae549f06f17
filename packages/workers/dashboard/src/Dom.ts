/**
 * Building the page's DOM from values: `h` makes an element whose text is set with `textContent` and whose
 * attributes are set with `setAttribute` — never HTML — so a value from the API shows as the characters it
 * is, whatever it contains. No templates, no `innerHTML` anywhere in the dashboard.
 */

/** What `h` appends: nodes, text (numbers as text), nested lists; null, undefined and false are skipped. */
export type Child = Node | string | number | null | undefined | false | ReadonlyArray<Child>

/**
 * Props of `h`: `class` sets the class list, `text` the text content, `on<event>` adds a listener; every
 * other key is an attribute (`true` as an empty value). null, undefined and false leave it unset.
 */
export type Props = Readonly<Record<string, string | number | boolean | null | undefined | ((event: Event) => void)>>

/** The page's element with this id; the page and its script ship together, so a missing one is a bug. */
export const byId = <E extends HTMLElement = HTMLElement>(id: string): E => {
  const element = document.getElementById(id)
  if (element === null) throw new Error(`dashboard: the page has no element #${id}`)
  return element as E
}

export const append = (parent: Node, child: Child): void => {
  if (child === null || child === undefined || child === false) return
  if (Array.isArray(child)) {
    for (const c of child as ReadonlyArray<Child>) append(parent, c)
    return
  }
  parent.appendChild(typeof child === "object" ? (child as Node) : document.createTextNode(String(child)))
}

export const h = <K extends keyof HTMLElementTagNameMap>(tag: K, props?: Props | null, ...children: Array<Child>): HTMLElementTagNameMap[K] => {
  const element = document.createElement(tag)
  for (const [key, value] of Object.entries(props ?? {})) {
    if (value === null || value === undefined || value === false) continue
    if (typeof value === "function") element.addEventListener(key.slice(2), value)
    else if (key === "class") element.className = String(value)
    else if (key === "text") element.textContent = String(value)
    else element.setAttribute(key, value === true ? "" : String(value))
  }
  append(element, children)
  return element
}

/** Removes every child; returns the element. */
export const clear = <E extends Element>(element: E): E => {
  while (element.firstChild) element.removeChild(element.firstChild)
  return element
}

const svgNamespace = "http://www.w3.org/2000/svg"

/** An SVG element with these attributes. */
export const svg = <K extends keyof SVGElementTagNameMap>(tag: K, attributes: Readonly<Record<string, string | number>> = {}): SVGElementTagNameMap[K] => {
  const element = document.createElementNS(svgNamespace, tag)
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, String(value))
  return element
}
