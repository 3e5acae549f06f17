/** The part of Node's `node:fs` the test kit's migrations check reads with; declared here so core needs no Node typings. */
declare module "node:fs" {
  export function readdirSync(path: string | URL): Array<string>
  export function readFileSync(path: string | URL, encoding: "utf8"): string
}
