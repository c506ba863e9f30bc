import { expect } from 'chai';
import { Redis } from 'ioredis';
import { createRedisAdapter, REDIS_CLIENT_OPTIONS, type RedisAdapterClass } from '../../lib/adapters/redis.js';
import { assertRedisReachable, REDIS_URL, redisClient, redisTestAdapter, testPrefix } from '../support/adapter.js';
import { redisAdapterContract } from './adapter-contract.js';
import { hasOutbox } from '../../lib/outbox/contract.js';
import { outboxKeys } from '../../lib/outbox/redis.js';
import { scaled } from '../support/time.js';
import { monitorRedis } from '../support/redis-monitor.js';

describe('Redis adapter', () => {
  let client: Redis;
  let prefix: string;
  let Adapter: RedisAdapterClass;

  before(async () => {
    await assertRedisReachable();
    client = redisClient();
    await client.connect();
  });
  after(() => client?.disconnect());
  beforeEach(() => {
    prefix = testPrefix();
    Adapter = redisTestAdapter({ keyPrefix: prefix });
  });

  redisAdapterContract(() => ({
    client,
    adapter: (keyPrefix) => redisTestAdapter({ keyPrefix }),
    async keys(pattern) {
      const [, keys] = await client.scan('0', 'MATCH', pattern, 'COUNT', 10_000);
      return keys;
    },
  }));

  it("settles a look's answers in one script call, however many there are", async () => {
    const adapter = new Adapter('ImpersonationOutbox');
    if (!hasOutbox(adapter)) throw new Error('the Redis adapter has no outbox');
    const outbox = adapter.outbox();
    const now = Date.now();
    for (let i = 0; i < 8; i += 1) {
      await outbox.append([{ id: `e-${i}`, subscription: 'crm', subject: `customer-${i}`, body: '{}' }], 10, now);
    }
    const claimed = await outbox.claim(10, 30_000, now, 0);
    expect(claimed).to.have.length(8);
    // What Redis is asked, as it sees it: the scripts run over this outbox's keys.
    const key = `"${outboxKeys(prefix)[0]!}"`;
    const scripts: string[] = [];
    const monitor = await monitorRedis((line) => {
      if (/\] "eval/i.test(line) && line.includes(key)) scripts.push(line);
    });
    try {
      // As the delivery loop settles them: together where the store can.
      const settled = claimed.map((entry) => ({ entry, settlement: { outcome: 'delivered' as const } }));
      const held = outbox.settleAll
        ? await outbox.settleAll(settled, now)
        : await Promise.all(settled.map(({ entry, settlement }) => outbox.settle(entry, settlement, now)));
      expect(held).to.deep.equal(Array(8).fill(true));
      // MONITOR relays a command after it ran: a marker sent after the settlements arrives after them.
      const marker = `settled-${prefix}`;
      const relayed = monitor.seen(marker);
      await client.echo(marker);
      await relayed;
    } finally {
      monitor.stop();
    }
    expect(scripts, 'script calls over the outbox').to.have.length(1);
    expect((await outbox.stats()).subscriptions['crm']?.pending ?? 0).to.equal(0);
  });

  it('uses a client passed in and leaves it open', async () => {
    const own = new Redis(REDIS_URL, REDIS_CLIENT_OPTIONS);
    try {
      const Passed = createRedisAdapter({ client: own, keyPrefix: prefix });
      await new Passed('SubjectToken').upsert('p', { kind: 'SubjectToken' }, 60);
      expect(await new Adapter('SubjectToken').consumeOnce('p')).to.equal(true);
      await Passed.disconnect();
      expect(await own.ping()).to.equal('PONG');
    } finally {
      own.disconnect();
    }
  });

  it('rejects, never resolves false, when Redis cannot be reached', async () => {
    // Nothing listens on port 1 of the loopback interface.
    const Unreachable = createRedisAdapter({ url: 'redis://127.0.0.1:1', keyPrefix: prefix });
    try {
      const started = Date.now();
      const adapter = new Unreachable('SubjectToken');
      await expectRejection(adapter.consumeOnce('x'));
      await expectRejection(adapter.find('x'));
      await expectRejection(adapter.upsert('x', {}, 60));
      expect(Date.now() - started).to.be.below(scaled(5000));
    } finally {
      await Unreachable.disconnect();
    }
  });

  it('rejects calls after close(), the name every store closes with', async () => {
    const Closing = redisTestAdapter({ keyPrefix: prefix });
    await new Closing('Session').find('x');
    await Closing.close();
    await expectRejection(new Closing('Session').find('x'));
  });

  it('rejects calls after disconnect()', async () => {
    const Closing = redisTestAdapter({ keyPrefix: prefix });
    await new Closing('Session').find('x');
    await Closing.disconnect();
    await expectRejection(new Closing('Session').find('x'));
  });

  it('with replicas, counts a write only once a replica holds it: without one, upsert and consumeOnce reject', async () => {
    // The test Redis has no replica, so none can confirm.
    const Replicated = createRedisAdapter({ url: REDIS_URL, keyPrefix: prefix, replicas: 1, replicaTimeoutMs: 100 });
    try {
      const adapter = new Replicated('SubjectToken');
      await expectRejection(adapter.upsert('w', { kind: 'SubjectToken' }, 60));
      await new Adapter('SubjectToken').upsert('w', { kind: 'SubjectToken' }, 60);
      await expectRejection(adapter.consumeOnce('w'));
      expect(await adapter.find('w'), 'reads need no replica').to.include({ kind: 'SubjectToken' });
    } finally {
      await Replicated.disconnect();
    }
    expect(() => createRedisAdapter({ url: REDIS_URL, replicas: -1 })).to.throw(TypeError, /replicas/);
    expect(() => createRedisAdapter({ url: REDIS_URL, replicaTimeoutMs: 0 })).to.throw(TypeError, /replicaTimeoutMs/);
  });

  it('refuses both a client and a url', () => {
    expect(() => createRedisAdapter({ client: client, url: REDIS_URL })).to.throw(TypeError);
  });
});

async function expectRejection(promise: Promise<unknown>): Promise<void> {
  let outcome: unknown = 'resolved';
  try {
    outcome = await promise;
  } catch (error) {
    expect(error).to.be.instanceOf(Error);
    return;
  }
  expect.fail(`expected a rejection, got ${JSON.stringify(outcome)}`);
}
