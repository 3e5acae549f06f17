/** The part of Node's built-in `node:sqlite` (Node ≥ 22.13) the test kit uses; declared here so core needs no Node typings. */
declare module "node:sqlite" {
  export interface StatementSync {
    all(...params: ReadonlyArray<unknown>): Array<Record<string, unknown>>
    get(...params: ReadonlyArray<unknown>): Record<string, unknown> | undefined
    run(...params: ReadonlyArray<unknown>): { changes: number | bigint; lastInsertRowid: number | bigint }
    columns(): Array<{ name: string }>
  }
  export class DatabaseSync {
    constructor(path: string)
    prepare(sql: string): StatementSync
    exec(sql: string): void
    close(): void
    readonly isTransaction: boolean
  }
}
