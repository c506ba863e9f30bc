import { createMemoryAdapter } from '../../lib/index.js';
import type { AdapterSource } from '../../lib/adapters/contract.js';
import { assertRedisReachable, redisTestAdapter } from './adapter.js';
import { postgresTestAdapter } from './postgres-adapter.js';

/**
 * The stores the package offers for the plugin's own records (the `store`
 * option). Every test of that option runs once per entry: a new store is one
 * more line here.
 */
export const PLUGIN_STORES: ReadonlyArray<{ name: string; open(): Promise<AdapterSource> }> = [
  { name: 'memory', open: async () => createMemoryAdapter() },
  {
    name: 'Redis',
    open: async () => {
      await assertRedisReachable();
      return redisTestAdapter();
    },
  },
  { name: 'PostgreSQL', open: () => postgresTestAdapter() },
];
