/** The part of Node's `node:http` the fault-injection server uses; declared here so the client needs no Node typings. */
declare module "node:http" {
  export interface IncomingMessage {
    readonly method?: string
    readonly url?: string
    readonly headers: Record<string, string | ReadonlyArray<string> | undefined>
    readonly socket: { destroy(): void }
    on(event: "data", listener: (chunk: Uint8Array) => void): this
    on(event: "end", listener: () => void): this
  }
  export interface ServerResponse {
    writeHead(status: number, headers?: Record<string, string>): this
    end(body?: string): void
  }
  export interface Server {
    listen(port: number, host: string, callback: () => void): this
    address(): { readonly port: number } | string | null
    close(callback?: () => void): this
    closeAllConnections(): void
  }
  export function createServer(handler: (request: IncomingMessage, response: ServerResponse) => void): Server
}
