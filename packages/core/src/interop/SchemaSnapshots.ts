/**
 * Schema snapshots: one committed JSON Schema file per message version and per fact version, so changing a
 * released schema without a new version fails the tests instead of breaking stored facts and in-flight
 * messages at run time.
 *
 * A module's snapshots live beside it: `<src>/<module>/schemas/<type>.v<N>.json` (the messages its
 * handlers handle, the facts its handlers and processors emit; the platform's own facts are not a module's).
 * `expected` renders what the code defines, `compare` says what differs from the files: a version without
 * its file (write it), a file that differs from its version's schema (the schema changed without a new
 * version: add one), a file without a version in the code (a released version was removed). Each problem
 * says how to fix it. It reads and writes nothing itself: the test kit's `SchemaSnapshots.check` does.
 */
import type { Schema } from "effect"
import type * as FactDefinition from "../definitions/FactDefinition.js"
import type { MessageDefinition } from "../definitions/MessageDefinition.js"
import type { Module } from "../definitions/Module.js"
import { jsonSchema } from "./AsyncApi.js"

export interface Snapshot {
  readonly module: string
  readonly kind: "message" | "fact"
  readonly type: string
  readonly version: number
  /** Relative to the app's source directory: `<module>/schemas/<type>.v<N>.json`. */
  readonly path: string
  /** The file's content: the version's JSON Schema (draft 2020-12), pretty-printed. */
  readonly text: string
}

export interface Problem {
  readonly path: string
  readonly kind: "missing" | "changed" | "removed"
  readonly message: string
}

/** The commands a problem names (an app can say its own, e.g. a template without `new:version`). */
export interface Commands {
  /** Absent: the message says how to add the version by hand. */
  readonly newVersion?: (module: string, type: string) => string
  readonly write: string
  readonly rewrite: string
}

export const defaultCommands: Commands = {
  newVersion: (module, type) => `npm run new:version -- ${module} ${type}`,
  write: "npm run snapshots:write",
  rewrite: "npm run snapshots:rewrite"
}

/** The directory of a module's snapshots, relative to the app's source directory. */
export const directory = (module: string) => `${module}/schemas`
const fileName = (type: string, version: number) => `${type}.v${version}.json`
/** `<type>.v<N>.json` → type and version. */
export const parseFileName = (name: string): { readonly type: string; readonly version: number } | undefined => {
  const match = /^(.+)\.v([1-9][0-9]*)\.json$/.exec(name)
  return match ? { type: match[1]!, version: Number(match[2]) } : undefined
}

const render = (schema: Schema.Top) => `${JSON.stringify(jsonSchema(schema), null, 2)}\n`

/** Every version of every message and fact type the modules define, as its snapshot file. */
export const expected = (modules: ReadonlyArray<Module>): ReadonlyArray<Snapshot> => {
  const out: Array<Snapshot> = []
  for (const module of modules) {
    const messages = new Map<string, MessageDefinition>()
    for (const handler of module.handlers) messages.set(handler.message.messageType, handler.message)
    const facts = new Map<string, FactDefinition.Any>()
    for (const emitter of [...module.handlers, ...module.processors]) for (const d of emitter.emits) facts.set(d.type, d)
    const add = (kind: Snapshot["kind"], type: string, versions: ReadonlyArray<{ readonly version: number; readonly schema: Schema.Top }>) => {
      for (const v of versions) {
        out.push({ module: module.name, kind, type, version: v.version, path: `${directory(module.name)}/${fileName(type, v.version)}`, text: render(v.schema) })
      }
    }
    for (const [type, d] of messages) add("message", type, d.versions)
    for (const [type, d] of facts) add("fact", type, d.versions)
  }
  return out.sort((a, b) => a.path.localeCompare(b.path))
}

/**
 * What differs between the code (`snapshots`) and the files: `files` maps every snapshot file found under
 * the modules' `schemas` directories (path as in `Snapshot.path`) to its content.
 */
export const compare = (snapshots: ReadonlyArray<Snapshot>, files: ReadonlyMap<string, string>, commands: Commands = defaultCommands): ReadonlyArray<Problem> => {
  const problems: Array<Problem> = []
  const byPath = new Map(snapshots.map((s) => [s.path, s]))
  for (const s of snapshots) {
    const text = files.get(s.path)
    const what = `${s.kind} ${s.type} version ${s.version} (module ${s.module})`
    if (text === undefined) {
      problems.push({ path: s.path, kind: "missing", message: `${what} has no schema snapshot ${s.path}: write it with \`${commands.write}\`` })
    } else if (normalize(text) !== normalize(s.text)) {
      const latest = Math.max(...snapshots.filter((o) => o.kind === s.kind && o.type === s.type).map((o) => o.version))
      problems.push({
        path: s.path,
        kind: "changed",
        message: `the schema of ${what} changed without a new version (it differs from ${s.path}): stored ${s.kind === "fact" ? "facts" : "messages"} of version ${s.version} ` +
          `keep the old shape. Undo the change and add version ${latest + 1} with an upcaster instead: ` +
          (commands.newVersion ? `\`${commands.newVersion(s.module, s.type)}\`. ` : `\`.version(${latest + 1}, Schema, (previous) => …)\` on its definition, then \`${commands.write}\`. `) +
          `Only if version ${s.version} was never deployed, accept the change: \`${commands.rewrite}\``
      })
    }
  }
  for (const path of files.keys()) {
    if (byPath.has(path)) continue
    problems.push({
      path,
      kind: "removed",
      message: `${path} has no version in the code: a deployed version must stay (stored data of that version needs it and its upcaster); delete the file only if that version was never deployed`
    })
  }
  return problems
}

const normalize = (text: string) => text.replace(/\r\n/g, "\n").trim()
