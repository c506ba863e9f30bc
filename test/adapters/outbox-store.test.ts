import { hasOutbox } from '../../lib/outbox/contract.js';
import { ADAPTERS } from '../support/adapters.js';
import { outboxContract } from '../support/outbox-contract.js';

// The outbox every adapter the package ships keeps; Redis Cluster runs the same contract in test/redis-cluster/.
for (const kind of ADAPTERS) {
  describe(`${kind.name} adapter: the outbox`, function () {
    this.timeout(30_000);
    outboxContract(async () => {
      const Adapter = await kind.open();
      const adapter = new Adapter('ImpersonationOutbox');
      if (!hasOutbox(adapter)) throw new Error(`${kind.name} adapter has no outbox`);
      return adapter.outbox();
    });
  });
}
