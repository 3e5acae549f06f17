// The few Node file and HTTP APIs the Node tests use (the package's types are the Workers' only; no @types/node).
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
// The few Node HTTP APIs the webhook tests use for a real server on loopback (a receiver, a DNS over HTTPS stand-in).
declare module "node:http" {
  export interface IncomingMessage {
    readonly url?: string
    readonly headers: Record<string, string | undefined>
    resume(): IncomingMessage
    on(event: "end", listener: () => void): IncomingMessage
    on(event: "data", listener: (chunk: Uint8Array) => void): IncomingMessage
  }
  export interface ServerResponse {
    writeHead(status: number, headers?: Record<string, string>): ServerResponse
    end(body?: string): ServerResponse
  }
  export interface Server {
    listen(port: number, host: string, callback: () => void): Server
    address(): { readonly port: number } | string | null
    close(callback: () => void): Server
  }
  export function createServer(handler: (req: IncomingMessage, res: ServerResponse) => void): Server
}
