import { fileURLToPath } from 'node:url';
import { describeProcessesSharingStore } from '../support/multi-process.js';
import { postgresRunSchema, postgresTestAdapter, testTable } from '../support/postgres-adapter.js';

describeProcessesSharingStore('PostgreSQL adapter: several provider processes sharing one table', {
  script: fileURLToPath(new URL('./server-process.js', import.meta.url)),
  prepare: async () => {
    const table = testTable();
    // Migrated here, so that the processes start on the table as a deployment finds it.
    await postgresTestAdapter({ table });
    return { STORE_SCHEMA: await postgresRunSchema(), STORE_TABLE: table };
  },
});
