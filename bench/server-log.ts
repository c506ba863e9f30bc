/**
 * The provider's output, passed through, except the "Error: aborted" stacks Koa
 * prints for Management API requests whose connection autocannon closes at
 * the end of a window: those are counted.
 */
export class ServerLog {
  aborted = 0;
  #inStack = false;

  readonly line = (line: string): void => {
    if (/^\s*Error: aborted$/.test(line)) {
      this.aborted += 1;
      this.#inStack = true;
      return;
    }
    if (this.#inStack && /^\s+at /.test(line)) return;
    this.#inStack = false;
    if (line.trim()) console.log(`  [server] ${line}`);
  };
}
