/**
 * Mocha root hooks, named in .mocharc.json (`require`): after the whole run,
 * close every connection the test adapters opened, delete the run's Redis
 * keys, and drop the PostgreSQL schemas the run made; then check that every
 * spec file that ran on TEST_ADAPTER's store is one the store runs take. The
 * helpers that open these register no hook of their own, so that importing
 * one (as the child processes do, outside mocha) does nothing but define
 * functions.
 */
import { closeTestAdapters } from './adapter.js';
import { suiteAdapterUsers } from './adapters.js';
import { closePostgresTestAdapters } from './postgres-adapter.js';
import { dropTestSchemas } from './postgres.js';
import { loadTestFiles } from './test-files.js';

export const mochaHooks = {
  async afterAll(): Promise<void> {
    await closeTestAdapters();
    // The adapters' sweeps stop and their pool closes before their schema goes.
    await closePostgresTestAdapters();
    await dropTestSchemas();
    await assertStoreRunsTake([...suiteAdapterUsers]);
  },
};

/** Fails the run when a spec file used TEST_ADAPTER's store in a way the store runs' selection does not see. */
async function assertStoreRunsTake(users: string[]): Promise<void> {
  if (!users.length) return;
  const { ModuleGraph } = await loadTestFiles();
  const graph = new ModuleGraph();
  const missed = users.filter((file) => !graph.usesSuiteAdapter(file));
  if (missed.length)
    throw new Error(
      `${missed.join(', ')} called suiteAdapterKind() through no import that scripts/test-files.mjs follows: ` +
        `the Redis and PostgreSQL runs would leave it out; import what starts the provider, or start a script as new URL('./….js', import.meta.url)`,
    );
}
