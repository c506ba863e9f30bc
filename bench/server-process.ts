/** Starts bench/server.ts in a child process and talks to it over IPC. */
import { fork, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { AdapterKind, ParentMessage, ServerMessage, ServerStats } from './protocol.js';

export interface ServerProcess {
  base: string;
  pid: number;
  stats(): Promise<ServerStats>;
  /** Has the provider collect its young garbage (a scavenge) and waits until it did. */
  settle(): Promise<void>;
  /** Starts the provider's CPU profiler (inspector, as --cpu-prof would). */
  profileStart(): Promise<void>;
  /** Stops it and has the provider write the profile to `file`. */
  profileStop(file: string): Promise<void>;
  /** Asks the server to exit and waits for it (a --cpu-prof profile is written by then). */
  close(): Promise<void>;
}

export interface ServerProcessOptions {
  adapter: AdapterKind;
  /** Set the provider up as a deployment runs it (bench/server.ts, BENCH_DEPLOYMENT). */
  deployment?: boolean;
  redisUrl: string;
  redisPrefix: string;
  /** The schema of the PostgreSQL audit log, for `memory+pg-audit`. */
  auditSchema?: string;
  /** The schema of the PostgreSQL adapter's tables, for `postgres`. */
  storeSchema?: string;
  /** Extra node flags for the child, e.g. --cpu-prof. */
  execArgv?: string[];
  /** Receives the child's output lines (oidc-provider's warnings among them). */
  log(line: string): void;
}

const READY_TIMEOUT_MS = 20_000;

export async function startServer(options: ServerProcessOptions): Promise<ServerProcess> {
  const child: ChildProcess = fork(fileURLToPath(new URL('./server.js', import.meta.url)), [], {
    env: {
      ...process.env,
      BENCH_ADAPTER: options.adapter,
      REDIS_URL: options.redisUrl,
      BENCH_PREFIX: options.redisPrefix,
      ...(options.auditSchema ? { BENCH_AUDIT_SCHEMA: options.auditSchema } : {}),
      ...(options.storeSchema ? { BENCH_STORE_SCHEMA: options.storeSchema } : {}),
      ...(options.deployment ? { BENCH_DEPLOYMENT: '1' } : {}),
    },
    execArgv: ['--expose-gc', ...(options.execArgv ?? [])],
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  for (const stream of [child.stdout, child.stderr]) {
    if (stream) createInterface({ input: stream }).on('line', options.log);
  }
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

  let nextId = 0;
  const pending = new Map<number, (reply: Extract<ServerMessage, { type: 'reply' }>) => void>();
  const ready = new Promise<{ base: string; pid: number }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the bench server did not start within 20 s')), READY_TIMEOUT_MS);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`the bench server exited with code ${code} before it was ready`));
    });
    child.on('message', (message: ServerMessage) => {
      if (message.type === 'ready') {
        clearTimeout(timer);
        resolve({ base: message.base, pid: message.pid });
      } else if (message.type === 'reply') {
        pending.get(message.id)?.(message);
        pending.delete(message.id);
      }
    });
  });
  let started: { base: string; pid: number };
  try {
    started = await ready;
  } catch (error) {
    child.kill();
    throw error;
  }

  const sendMessage = (message: ParentMessage): void => {
    child.send(message);
  };
  type Request = Exclude<ParentMessage, { type: 'close' }>;
  const request = (message: Omit<Request, 'id'>): Promise<Extract<ServerMessage, { type: 'reply' }>> => {
    const id = nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`the bench server did not answer ${message.type}`));
      }, 10_000);
      pending.set(id, (reply) => {
        clearTimeout(timer);
        if (reply.error) reject(new Error(`bench server, ${message.type}: ${reply.error}`));
        else resolve(reply);
      });
      sendMessage({ ...message, id } as Request);
    });
  };
  return {
    ...started,
    async stats() {
      const reply = await request({ type: 'stats' });
      if (!reply.stats) throw new Error('the bench server sent no stats');
      return reply.stats;
    },
    async settle() {
      await request({ type: 'settle' });
    },
    async profileStart() {
      await request({ type: 'profile-start' });
    },
    async profileStop(file) {
      await request({ type: 'profile-stop', file } as Omit<Request, 'id'>);
    },
    async close() {
      if (child.exitCode !== null) return;
      sendMessage({ type: 'close' });
      const timer = setTimeout(() => child.kill(), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
