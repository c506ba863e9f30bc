import { assertRedisReachable, testPrefix } from '../support/adapter.js';
import { multiProcessContract, startProviderProcesses, type ProviderProcesses } from './processes.js';

describe('Redis adapter: several provider processes sharing one Redis', function () {
  this.timeout(60_000);
  let group: ProviderProcesses | undefined;

  before(async () => {
    await assertRedisReachable();
    group = await startProviderProcesses({ KEY_PREFIX: testPrefix() });
  });
  after(() => group?.stop());

  multiProcessContract(() => group!);
});
