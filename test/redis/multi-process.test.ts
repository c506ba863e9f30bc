import { fileURLToPath } from 'node:url';
import { assertRedisReachable, testPrefix } from '../support/adapter.js';
import { describeProcessesSharingStore } from '../support/multi-process.js';

describeProcessesSharingStore('Redis adapter: several provider processes sharing one Redis', {
  script: fileURLToPath(new URL('./server-process.js', import.meta.url)),
  prepare: async () => {
    await assertRedisReachable();
    return { KEY_PREFIX: testPrefix() };
  },
});
