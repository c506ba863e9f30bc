import { type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { scaled } from './time.js';

/**
 * The provider processes of multi-process tests: each prints `PORT <n>` once it
 * listens, and exits when its parent closes its stdin or sends SIGTERM, so that
 * none outlives the test run.
 */

/** In the child: runs `close` once and exits when the parent goes away or asks. */
export function serveUntilParentLeaves(close: () => Promise<void>): void {
  let closing = false;
  const shutdown = async (): Promise<void> => {
    if (closing) return;
    closing = true;
    await close();
    process.exit(0);
  };
  process.stdin.on('end', () => void shutdown());
  process.stdin.resume();
  process.on('SIGTERM', () => void shutdown());
}

/** In the parent: stops every child still running and waits for it. */
export async function stopChildren(children: ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    }),
  );
}

/** In the parent: the port a child printed, or why it printed none (its stderr). */
export function portOf(child: ChildProcess): Promise<number> {
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail('did not print its port in time'), scaled(15_000));
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      const match = /^PORT (\d+)$/.exec(line);
      if (match) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    });
    child.once('exit', (code) => fail(`exited with ${code}`));
    function fail(why: string): void {
      clearTimeout(timer);
      reject(new Error(`provider process ${why}:\n${stderr}`));
    }
  });
}
