import { assertRedisReachable, REDIS_URL, redisTestAdapter } from '../support/adapter.js';
import { storeOutageContract } from '../support/outage.js';
import { TcpRelay } from '../support/relay.js';

describe('Redis adapter: Redis unreachable', function () {
  this.timeout(30_000);
  const relay = new TcpRelay(REDIS_URL, 6379);

  before(() => assertRedisReachable());

  storeOutageContract({
    name: 'Redis',
    relay,
    adapter: () => redisTestAdapter({ url: relay.url }),
    // A connection attempt made while frozen is itself dropped after the socket timeout.
    stalled: { failsWithinMs: 4000, because: 'the dead connection is dropped, not waited on', recoversWithinMs: 5000 },
  });
});
