/** Messages between bench/run.ts and the provider process (bench/server.ts). */
import type { MemoryAdapterStats } from '../lib/index.js';

/**
 * The provider's store; `memory+pg-audit` is the memory store with the PostgreSQL audit log awaited on every
 * exchange, `postgres+pg-audit` the PostgreSQL store with the audit log on its pool (the row in the exchange's commit).
 */
export type AdapterKind = 'memory' | 'redis' | 'postgres' | 'memory+pg-audit' | 'postgres+pg-audit';

/** Requests carry an id; the server answers each with a `reply` of the same id. */
export type ParentMessage =
  | { type: 'stats'; id: number }
  /**
   * A young-generation collection, so that a window does not pay for the garbage of what came before it;
   * with a webhook subscription, first the delivery of what the outbox holds.
   */
  | { type: 'settle'; id: number }
  /** Starts V8's CPU profiler (the one --cpu-prof uses) through the inspector. */
  | { type: 'profile-start'; id: number }
  /** Stops it and writes the .cpuprofile to `file`. */
  | { type: 'profile-stop'; id: number; file: string }
  | { type: 'close' };

export interface ServerStats {
  /** process.cpuUsage() of the provider process (all its threads), in microseconds. */
  cpu: NodeJS.CpuUsage;
  /**
   * CPU seconds, from /proc, of the main thread (JavaScript, the event loop) and
   * of the threads other than libuv's pool (V8's concurrent GC and compiler,
   * Node's own; null where libuv does not name its threads, as on Node 20); null
   * where /proc is not there. The pool, where signatures are computed, has the rest.
   */
  threads: { main: number; v8: number | null } | null;
  heapUsed: number;
  /** The memory adapter's own stats plus what its onEvict saw; null on Redis and PostgreSQL. */
  adapter: (MemoryAdapterStats & { onEvict: Record<string, number> }) | null;
  /** The webhook subscription's outbox (waiting, dead letters, dropped); null without one. */
  webhooks: { pending: number; dead: number; dropped: number } | null;
}

export type ServerMessage =
  | { type: 'ready'; base: string; adapter: AdapterKind; pid: number }
  | { type: 'reply'; id: number; stats?: ServerStats; error?: string };
