// The few Node APIs the OpenAPI lint test uses (the package's types are the Workers' only; no @types/node).
declare module "node:child_process" {
  export function execFileSync(file: string, args: ReadonlyArray<string>, options: { cwd?: string; env?: Record<string, string | undefined>; encoding: "utf8"; maxBuffer?: number }): string
}
declare module "node:fs" {
  export function mkdtempSync(prefix: string): string
  export function writeFileSync(path: string, data: string): void
  export function rmSync(path: string, options: { recursive: boolean; force: boolean }): void
}
declare module "node:module" {
  export function createRequire(from: string): { resolve(specifier: string): string }
}
declare module "node:os" {
  export function tmpdir(): string
}
declare module "node:path" {
  export function join(...paths: Array<string>): string
}
declare module "node:process" {
  export const execPath: string
  export const env: Record<string, string | undefined>
  export function cwd(): string
}
