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
  /** Require the customer's approval and give a standing grant (bench/standing-grant.ts, BENCH_STANDING_GRANT). */
  standingGrant?: boolean;
  redisUrl: string;
  redisPrefix: string;
  /** The schema of the PostgreSQL audit log, for `memory+pg-audit`. */
  auditSchema?: string;
  /** The schema of the PostgreSQL adapter's tables, for `postgres`. */
  storeSchema?: string;
  /** A webhook subscription to every event, delivered to this URL (bench/server.ts, BENCH_WEBHOOK_URL). */
  webhookUrl?: string;
  /** With `webhookUrl`: false when another process on the store delivers the outbox (BENCH_DELIVER_OUTBOX=0). */
  deliverOutbox?: boolean;
  /** With `webhookUrl`: false when another process creates the SSF stream (BENCH_SSF_STREAM=0). */
  createStream?: boolean;
  /** The OpenTelemetry setup (bench/telemetry.ts, BENCH_TELEMETRY). */
  telemetry?: string | undefined;
  /** Extra node flags for the child, e.g. --cpu-prof. */
  execArgv?: string[];
  /** Receives the child's output lines (oidc-provider's warnings among them). */
  log(line: string): void;
}

const READY_TIMEOUT_MS = 20_000;
const REPLY_TIMEOUT_MS = 10_000;

export async function startServer(options: ServerProcessOptions): Promise<ServerProcess> {
  const child = forkServer(options);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const requests = new RequestChannel(child);
  let started: { base: string; pid: number };
  try {
    started = await ready(child, exited);
  } catch (error) {
    child.kill();
    throw error;
  }
  return {
    ...started,
    async stats() {
      const reply = await requests.send({ type: 'stats' });
      if (!reply.stats) throw new Error('the bench server sent no stats');
      return reply.stats;
    },
    async settle() {
      await requests.send({ type: 'settle' });
    },
    async profileStart() {
      await requests.send({ type: 'profile-start' });
    },
    async profileStop(file) {
      await requests.send({ type: 'profile-stop', file });
    },
    async close() {
      if (child.exitCode !== null) return;
      child.send({ type: 'close' } satisfies ParentMessage);
      const timer = setTimeout(() => child.kill(), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** bench/server.ts in a child process, told its store through its environment; its output goes to `options.log`. */
function forkServer(options: ServerProcessOptions): ChildProcess {
  const child = fork(fileURLToPath(new URL('./server.js', import.meta.url)), [], {
    env: {
      ...process.env,
      BENCH_ADAPTER: options.adapter,
      REDIS_URL: options.redisUrl,
      BENCH_PREFIX: options.redisPrefix,
      ...(options.auditSchema ? { BENCH_AUDIT_SCHEMA: options.auditSchema } : {}),
      ...(options.storeSchema ? { BENCH_STORE_SCHEMA: options.storeSchema } : {}),
      ...(options.deployment ? { BENCH_DEPLOYMENT: '1' } : {}),
      ...(options.webhookUrl ? { BENCH_WEBHOOK_URL: options.webhookUrl } : {}),
      ...(options.deliverOutbox === false ? { BENCH_DELIVER_OUTBOX: '0' } : {}),
      ...(options.createStream === false ? { BENCH_SSF_STREAM: '0' } : {}),
      ...(options.standingGrant ? { BENCH_STANDING_GRANT: '1' } : {}),
      ...(options.telemetry ? { BENCH_TELEMETRY: options.telemetry } : {}),
    },
    execArgv: ['--expose-gc', ...(options.execArgv ?? [])],
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  for (const stream of [child.stdout, child.stderr]) {
    if (stream) createInterface({ input: stream }).on('line', options.log);
  }
  return child;
}

/** The base URL and pid the server reports once it listens; rejects should it exit or take too long first. */
function ready(child: ChildProcess, exited: Promise<number | null>): Promise<{ base: string; pid: number }> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the bench server did not start within 20 s')), READY_TIMEOUT_MS);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`the bench server exited with code ${code} before it was ready`));
    });
    child.on('message', (message: ServerMessage) => {
      if (message.type !== 'ready') return;
      clearTimeout(timer);
      resolve({ base: message.base, pid: message.pid });
    });
  });
}

type Request = Exclude<ParentMessage, { type: 'close' }>;
type Reply = Extract<ServerMessage, { type: 'reply' }>;
/** A request as it is sent, before it is given its id. */
type Unnumbered<T> = T extends unknown ? Omit<T, 'id'> : never;

/** Requests to the server, each with an id its reply carries back; one unanswered for 10 s fails. */
class RequestChannel {
  #nextId = 0;
  readonly #pending = new Map<number, (reply: Reply) => void>();

  constructor(private readonly child: ChildProcess) {
    child.on('message', (message: ServerMessage) => {
      if (message.type !== 'reply') return;
      this.#pending.get(message.id)?.(message);
      this.#pending.delete(message.id);
    });
  }

  send(message: Unnumbered<Request>): Promise<Reply> {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error(`the bench server did not answer ${message.type}`));
      }, REPLY_TIMEOUT_MS);
      this.#pending.set(id, (reply) => {
        clearTimeout(timer);
        if (reply.error) reject(new Error(`bench server, ${message.type}: ${reply.error}`));
        else resolve(reply);
      });
      this.child.send({ ...message, id } as Request);
    });
  }
}
