import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

const CLI = fileURLToPath(new URL('../../lib/cli/main.js', import.meta.url));

/** The command as built for the tests (build/lib/cli/main.js), run by this Node, with an environment of the test's choosing. */
export function runCli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliRun> {
  return runProcess(process.execPath, [CLI, ...args], env);
}

/**
 * The command read as `… | head -1` reads it: its first line, then its standard output closed
 * while it still writes. `stdout` is that line.
 */
export async function runCliReadingFirstLine(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliRun> {
  const child = spawn(process.execPath, [CLI, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  const exited = once(child, 'exit') as Promise<[number | null]>;
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  for await (const chunk of child.stdout) {
    stdout += (chunk as Buffer).toString();
    if (stdout.includes('\n')) break; // destroys the stream: the pipe's reading end is closed
  }
  const [code] = await exited;
  return { code, stdout: stdout.slice(0, stdout.indexOf('\n') + 1), stderr };
}

export async function runProcess(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv = {},
  cwd?: string,
): Promise<CliRun> {
  const child = spawn(command, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
    ...(cwd ? { cwd } : {}),
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}
