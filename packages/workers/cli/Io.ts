/** Where a command writes: its output and its errors (the process's stdout and stderr, or a test's buffers). */
export interface Io {
  readonly out: (text: string) => void
  readonly err: (text: string) => void
}

export const stdio: Io = { out: (text) => void process.stdout.write(text), err: (text) => void process.stderr.write(text) }
