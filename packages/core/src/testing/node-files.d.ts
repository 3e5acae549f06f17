// The few Node file APIs the Node tests use (the package's types are the Workers' only; no @types/node).
declare module "node:fs" {
  export function mkdtempSync(prefix: string): string
  export function mkdirSync(path: string, options?: { recursive?: boolean }): string | undefined
  export function writeFileSync(path: string, data: Uint8Array | string): void
}
declare module "node:os" {
  export function tmpdir(): string
}
declare module "node:path" {
  export function dirname(path: string): string
  export function join(...paths: Array<string>): string
}
