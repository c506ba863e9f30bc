/**
 * The CPU a store's service has used so far, read around a window by
 * bench/scale-out.ts: Redis's own account (INFO cpu); for the stores on
 * PostgreSQL, every postgres process of this machine from /proc (the
 * backends, the WAL writer, the checkpointer).
 */
import { readdirSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { readStat } from './proc-stat.js';
import type { AdapterKind } from './protocol.js';
import { connectRedis } from './stores.js';

export interface StoreCpu {
  /** CPU seconds the store's service has used so far. */
  seconds(): Promise<number>;
  close(): void;
}

export async function storeCpu(store: AdapterKind, redisUrl: string): Promise<StoreCpu> {
  if (store !== 'redis') return { seconds: async () => postgresCpuSeconds(), close: () => {} };
  const redis = await connectRedis(redisUrl);
  return { seconds: () => redisCpuSeconds(redis), close: () => redis.disconnect() };
}

async function redisCpuSeconds(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const value = (name: string): number => Number(new RegExp(`^${name}:(\\S+)`, 'm').exec(info)?.[1] ?? Number.NaN);
  return value('used_cpu_user') + value('used_cpu_sys');
}

function postgresCpuSeconds(): number {
  let seconds = 0;
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const stat = readStat(`/proc/${pid}/stat`);
      if (stat.name === 'postgres') seconds += stat.cpuSeconds;
    } catch {
      // The process ended meanwhile.
    }
  }
  return seconds;
}
