/**
 * Mocha root hooks, named in .mocharc.json (`require`) and in `npm run
 * test:cluster`: after the whole run, close every connection the test
 * adapters opened, delete the run's Redis keys, and drop the PostgreSQL
 * schemas the run made. The helpers that open these register no hook of their
 * own, so that importing one (as the child processes do, outside mocha) does
 * nothing but define functions.
 */
import { closeTestAdapters } from './adapter.js';
import { closePostgresTestAdapters } from './postgres-adapter.js';
import { dropTestSchemas } from './postgres.js';

export const mochaHooks = {
  async afterAll(): Promise<void> {
    await closeTestAdapters();
    // The adapters' sweeps stop and their pool closes before their schema goes.
    await closePostgresTestAdapters();
    await dropTestSchemas();
  },
};
