/** Messages between bench/run.ts and the provider process (bench/server.ts). */
import type { MemoryAdapterStats } from '../lib/index.js';

export type AdapterKind = 'memory' | 'redis';

export type ParentMessage =
  | { type: 'stats'; id: number }
  | { type: 'close' };

export interface ServerStats {
  /** process.cpuUsage() of the provider process, in microseconds. */
  cpu: NodeJS.CpuUsage;
  heapUsed: number;
  /** The memory adapter's own stats plus what its onEvict saw; null on Redis. */
  adapter: (MemoryAdapterStats & { onEvict: Record<string, number> }) | null;
}

export type ServerMessage =
  | { type: 'ready'; base: string; adapter: AdapterKind; pid: number }
  | ({ type: 'stats'; id: number } & ServerStats);
