import { adapterContract } from '../support/adapter-contract.js';
import { ADAPTERS } from '../support/adapters.js';

// The contract every adapter the package ships meets; Redis Cluster runs it in test/redis-cluster/.
for (const kind of ADAPTERS) {
  describe(`${kind.name} adapter: the adapter contract`, function () {
    this.timeout(30_000);
    adapterContract(() => kind.underTest());
  });
}
