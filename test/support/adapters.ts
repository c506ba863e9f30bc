import { fileURLToPath } from 'node:url';
import type { ImpersonationAdapterClass } from '../../lib/adapters/contract.js';
import { createMemoryAdapter } from '../../lib/index.js';
import type { AdapterUnderTest } from './adapter-contract.js';
import { redisReachable, redisServer, redisTestAdapter, redisUnderTest } from './adapter.js';
import { postgresTestAdapter, postgresUnderTest } from './postgres-adapter.js';

/** An adapter the package ships, as every test that runs on each of them sees it. */
export interface AdapterKind {
  /** As `TEST_ADAPTER` names it. */
  id: string;
  /** As test titles name it. */
  name: string;
  /** A new deployment (a store, a key prefix, a table) for a provider or the plugin's store; rejects when its service is down. */
  open(): Promise<ImpersonationAdapterClass>;
  /** A new deployment with the view into its store that the shared adapter contract needs. */
  underTest(): Promise<AdapterUnderTest>;
}

/**
 * The adapters the package ships. The shared adapter contract, the sorted
 * indexes, the `store` option and `TEST_ADAPTER` all run on this list: a new
 * adapter is one more entry here. (Redis Cluster runs the same contract on its
 * own, in `npm run test:cluster`, since it starts servers of its own.)
 */
export const ADAPTERS: readonly AdapterKind[] = [
  {
    id: 'memory',
    name: 'memory',
    open: async () => createMemoryAdapter(),
    underTest: async () => {
      const Adapter = createMemoryAdapter();
      return {
        Adapter,
        secondsLeft: async (model, id) => Adapter.secondsLeft(model, id),
        stored: async () => Adapter.stats().size,
        // One process: every caller shares the one store, as concurrent requests do.
        connections: async (count) => ({
          classes: Array.from({ length: count }, () => Adapter),
          close: async () => {},
        }),
        another: () => createMemoryAdapter(),
      };
    },
  },
  {
    id: 'redis',
    name: 'Redis',
    open: async () => {
      await redisReachable();
      return redisTestAdapter();
    },
    underTest: async () => redisUnderTest(await redisServer()),
  },
  {
    id: 'postgres',
    name: 'PostgreSQL',
    open: () => postgresTestAdapter(),
    underTest: () => postgresUnderTest(),
  },
];

/** The entry of ADAPTERS that `id` names (as `TEST_ADAPTER` does). */
export function adapterKind(id: string): AdapterKind {
  const kind = ADAPTERS.find((candidate) => candidate.id === id);
  if (!kind) {
    const ids = ADAPTERS.map((candidate) => candidate.id).join(', ');
    throw new Error(`TEST_ADAPTER must be one of ${ids}, not ${id}`);
  }
  return kind;
}

/**
 * The adapter the suite runs its providers on: the memory adapter unless
 * `TEST_ADAPTER` names another entry of ADAPTERS. The one place that reads
 * the variable; helpers are given the kind or the adapter.
 */
export function suiteAdapterKind(): AdapterKind {
  noteSpecFile(suiteAdapterUsers);
  return adapterKind(process.env['TEST_ADAPTER'] ?? 'memory');
}

/**
 * The spec files that called suiteAdapterKind() in this process, directly or
 * through helpers. The store runs take the files whose imports reach a call
 * (scripts/test-files.mjs); after the run, run-cleanup.ts fails it if a file
 * got here another way, so that no file is left out of them unseen.
 */
export const suiteAdapterUsers = new Set<string>();

/** Adds to `files` the spec file on the caller's stack (async frames included), if any. */
function noteSpecFile(files: Set<string>): void {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = Infinity;
  const stack = new Error().stack ?? '';
  Error.stackTraceLimit = limit;
  const spec = /(file:\/\/[^\s()]+?\.test\.js):\d+:\d+/.exec(stack)?.[1];
  if (spec) files.add(fileURLToPath(spec));
}
