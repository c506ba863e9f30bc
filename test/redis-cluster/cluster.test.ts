import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { Cluster } from 'ioredis';
import { createRedisAdapter } from '../../lib/adapters/redis.js';
import { hasOutbox, type OutboxStore } from '../../lib/outbox/contract.js';
import { hashSubjectToken } from '../../lib/subject-tokens/token.js';
import { redisUnderTest, testPrefix, type RedisTarget } from '../support/adapter.js';
import { adapterContract } from '../support/adapter-contract.js';
import type { Reply } from '../support/http.js';
import { startRedisCluster, type RedisCluster } from '../support/redis-cluster.js';
import { redisAdapterContract } from '../redis/adapter-contract.js';
import { outboxContract } from '../support/outbox-contract.js';
import {
  chunks,
  createdSubjectToken,
  multiProcessContract,
  redeem,
  startProviderProcesses,
  tally,
  type ProviderProcesses,
} from '../support/multi-process.js';

/** A provider process on Redis, which REDIS_CLUSTER_NODES points at a cluster. */
const REDIS_PROCESS = fileURLToPath(new URL('../redis/server-process.js', import.meta.url));

/**
 * The Redis adapter on a real Redis Cluster started for the run: three
 * masters with a replica each, on free local ports. The same contract and the
 * same multi-process race as on one Redis, then a failover of the master that
 * holds subject tokens.
 */
describe('Redis adapter on a Redis Cluster (three masters, one replica each)', function () {
  this.timeout(60_000);
  let cluster: RedisCluster | undefined;
  const clients: Cluster[] = [];
  const client = (): Cluster => {
    const opened = cluster!.client();
    opened.on('error', () => {});
    clients.push(opened);
    return opened;
  };

  before(async () => {
    cluster = await startRedisCluster();
  });
  after(async () => {
    await Promise.all(clients.splice(0).map((opened) => opened.quit().catch(() => opened.disconnect())));
    await cluster?.stop();
  });

  describe('the adapter contract', () => {
    let inspector: Cluster;
    before(() => {
      inspector = client();
    });
    // A Cluster client still connecting when an adapter's first call comes fails that call closed after 1 s
    // (Invariant 9): on a loaded machine a new one can take that long, so each test's adapters get connected ones.
    const connected: Cluster[] = [];
    beforeEach(async () => {
      while (connected.length < 4) connected.push(client());
      await Promise.all(connected.map(async (opened) => opened.status === 'ready' || once(opened, 'ready')));
    });

    const target = (): RedisTarget => ({
      client: inspector,
      adapter: (keyPrefix) => createRedisAdapter({ client: connected.pop() ?? client(), keyPrefix }),
      async keys(pattern) {
        const perMaster = await Promise.all(
          inspector.nodes('master').map(async (node) => {
            const [, keys] = await node.scan('0', 'MATCH', pattern, 'COUNT', 10_000);
            return keys;
          }),
        );
        return perMaster.flat();
      },
    });

    adapterContract(() => redisUnderTest(target()));
    redisAdapterContract(target);

    it('opens a Cluster of its own from the nodes given as `cluster`, and closes it', async () => {
      const Own = createRedisAdapter({ cluster: [...cluster!.nodes], keyPrefix: testPrefix() });
      const tokens = new Own('SubjectToken');
      await tokens.upsert('own', { kind: 'SubjectToken' }, 60);
      expect([await tokens.consumeOnce('own'), await tokens.consumeOnce('own')]).to.deep.equal([true, false]);
      await Own.close();
      expect(
        await tokens.find('own').then(
          () => 'found',
          () => 'rejected',
        ),
        'after close()',
      ).to.equal('rejected');
    });

    it("keeps what one exchange commits (its notification included) in one slot, and spreads oidc-provider's own tokens over every master", async () => {
      const prefix = testPrefix();
      const Adapter = createRedisAdapter({ client: client(), keyPrefix: prefix });
      const tokens = new Adapter('SubjectToken');
      const sessions = new Adapter('ImpersonationSession');
      const ids = Array.from({ length: 30 }, (_, i) => hashSubjectToken(`ist_spread-${i}`));
      await Promise.all(ids.map((id) => tokens.upsert(id, { kind: 'SubjectToken' }, 60)));
      // Each commit names the subject token, the session and its indexes: one script, so one slot.
      const outcomes = await Promise.all(
        ids.map((id, i) =>
          sessions.commitOnce({
            consume: { model: 'SubjectToken', id },
            write: {
              model: 'ImpersonationSession',
              id: `imp_${i}`,
              payload: { kind: 'ImpersonationSession' },
              expiresIn: 60,
            },
            indexes: ['active', `subject:user-${i}`, `actor:agent-${i % 3}`],
            expiresAt: Date.now() + 60_000,
            guards: [`ended:actor-grant:g-${i}`],
            // The exchange's notification, appended by the same script.
            outbox: {
              entries: [{ id: `msg_${i}`, subscription: 'crm', subject: `user-${i}`, body: '{}' }],
              maxPending: 100,
              now: Date.now(),
            },
          }),
        ),
      );
      expect(outcomes.every((outcome) => outcome.outcome === 'committed')).to.equal(true);
      const accessTokens = new Adapter('AccessToken');
      await Promise.all(ids.map((id) => accessTokens.upsert(id, { accountId: 'bob' }, 60)));
      const inspector = client();
      if (inspector.status !== 'ready') await once(inspector, 'ready');
      const mastersOf = async (pattern: string) => {
        const holders = await Promise.all(
          inspector.nodes('master').map(async (node) => {
            const [, keys] = await node.scan('0', 'MATCH', pattern, 'COUNT', 10_000);
            return keys.length > 0 ? [node.options.port] : [];
          }),
        );
        return holders.flat();
      };
      expect(await mastersOf(`${prefix}SubjectToken:*`)).to.have.length(1);
      expect(await mastersOf(`${prefix}ImpersonationSession:*`)).to.deep.equal(
        await mastersOf(`${prefix}SubjectToken:*`),
      );
      expect(await mastersOf(`${prefix}outbox:*`)).to.deep.equal(await mastersOf(`${prefix}SubjectToken:*`));
      const holder = new Adapter('ImpersonationOutbox');
      if (!hasOutbox(holder)) throw new Error('the Redis adapter has no outbox');
      expect((await holder.outbox().stats()).subscriptions['crm']?.pending).to.equal(30);
      expect(await mastersOf(`${prefix}AccessToken:*`)).to.have.length(3);
    });
  });

  describe('the outbox store contract', () => {
    // A client connected before the outbox's first call, as the adapter contract's (a new one can take 1 s).
    const outboxOf = async (keyPrefix: string): Promise<OutboxStore> => {
      const opened = client();
      if (opened.status !== 'ready') await once(opened, 'ready');
      const adapter = new (createRedisAdapter({ client: opened, keyPrefix }))('ImpersonationOutbox');
      if (!hasOutbox(adapter)) throw new Error('the Redis adapter has no outbox');
      return adapter.outbox();
    };

    outboxContract(() => outboxOf(testPrefix()));

    it("keeps every key of a deployment's outbox in one slot, whatever the subscriptions and subjects", async () => {
      const prefix = testPrefix();
      const outbox = await outboxOf(prefix);
      const subjects = Array.from({ length: 30 }, (_, i) => `user-${i}`);
      // Two subscriptions, thirty subjects each, past the bound of two: every key the scripts write.
      for (const subscription of ['crm', 'mail']) {
        for (const subject of subjects) {
          await outbox.append([{ id: `${subscription}-${subject}`, subscription, subject, body: '{}' }], 2, Date.now());
        }
      }
      expect((await outbox.stats()).subscriptions['crm']).to.deep.equal({ pending: 2, dead: 0, dropped: 28 });
      const [claimed] = await outbox.claim(1, 30_000, Date.now(), 0);
      expect(await outbox.settle(claimed!, { outcome: 'dead', reason: 'attempts' }, Date.now())).to.equal(true);

      const inspector = client();
      // No offline queue: it is asked once it knows the masters.
      if (inspector.status !== 'ready') await once(inspector, 'ready');
      const keys = (
        await Promise.all(
          inspector.nodes('master').map(async (node) => {
            const [, found] = await node.scan('0', 'MATCH', `${prefix}*`, 'COUNT', 10_000);
            return found;
          }),
        )
      ).flat();
      expect(keys.length, 'counters, queue, heads, entries, dead letters').to.be.at.least(8);
      const slots = await Promise.all(keys.map((key) => inspector.cluster('KEYSLOT', key)));
      expect(new Set(slots).size).to.equal(1);
    });
  });

  describe('provider processes sharing the cluster', () => {
    let group: ProviderProcesses | undefined;
    before(async () => {
      group = await startProviderProcesses(REDIS_PROCESS, {
        KEY_PREFIX: testPrefix(),
        REDIS_CLUSTER_NODES: nodesOf(cluster!),
      });
    });
    after(() => group?.stop());

    multiProcessContract(() => group!);
  });
});

describe('Redis Cluster: failover of the master that holds subject tokens', function () {
  this.timeout(90_000);
  let cluster: RedisCluster | undefined;
  let group: ProviderProcesses | undefined;
  let prefix: string;

  before(async () => {
    cluster = await startRedisCluster();
    prefix = testPrefix();
    // Writes wait for a replica: an acknowledged write then survives the loss of its master.
    group = await startProviderProcesses(
      REDIS_PROCESS,
      { KEY_PREFIX: prefix, REDIS_CLUSTER_NODES: nodesOf(cluster), REDIS_REPLICAS: '1' },
      2,
    );
  });
  after(async () => {
    await group?.stop();
    await cluster?.stop();
  });

  it('redeems nothing twice and loses nothing acknowledged while a replica takes over', async () => {
    const { instances, management } = group!;
    const outcomes = new Map<string, Reply[]>();
    const record = (token: string, reply: Reply): void => {
      outcomes.set(token, [...(outcomes.get(token) ?? []), reply]);
    };
    const create = async (count: number): Promise<string[]> => {
      const created: string[] = [];
      for (const batch of chunks(
        Array.from({ length: count }, (_, i) => i),
        20,
      )) {
        created.push(
          ...(await Promise.all(batch.map((i) => createdSubjectToken(instances[i % instances.length]!, management)))),
        );
      }
      return created;
    };

    // Acknowledged before the failure: 30 redeemed, 30 created and kept for later.
    const redeemedBefore = await create(30);
    const keptForLater = await create(30);
    const raced = await create(60);
    for (const token of redeemedBefore) {
      const reply = await redeem(instances[0]!, token);
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      record(token, reply);
    }
    const victim = await cluster!.masterOf(keyOf(redeemedBefore[0]!));
    const onVictim = async (tokens: string[]) =>
      (await Promise.all(tokens.map(async (token) => (await cluster!.masterOf(keyOf(token))) === victim))).filter(
        Boolean,
      ).length;
    const exposure = {
      redeemedBefore: await onVictim(redeemedBefore),
      keptForLater: await onVictim(keptForLater),
      raced: await onVictim(raced),
    };

    // The master dies while both processes race for the other tokens, one pair of exchanges every 25 ms.
    const started = Date.now();
    const failover = cluster!.killAndFailOver(victim);
    await Promise.all(
      raced.map(async (token, i) => {
        await new Promise((resolve) => setTimeout(resolve, i * 25));
        await Promise.all(
          instances.map(async (instance) => record(token, await redeem(instance, token).catch(noAnswer))),
        );
      }),
    );
    await failover;
    const failoverMs = Date.now() - started;
    // The failed node comes back, as a replica of the master that replaced it: its slots take writes again.
    await cluster!.rejoin(victim);

    // Afterwards, every token is tried again on both processes.
    for (const token of [...redeemedBefore, ...keptForLater, ...raced]) {
      for (const instance of instances) record(token, await redeem(instance, token).catch(noAnswer));
    }

    const issued = (token: string) => outcomes.get(token)!.filter((reply) => reply.status === 200).length;
    const errorsDuringFailover = tally(
      [...outcomes.values()].flat().filter((reply) => reply.status >= 500 || reply.status === 0),
    );
    const summary = {
      failoverMs,
      onVictim: exposure,
      doubleRedemptions: [...outcomes.keys()].filter((token) => issued(token) > 1).length,
      redeemedBeforeStillRefused: redeemedBefore.filter((token) =>
        outcomes
          .get(token)!
          .slice(1)
          .every((reply) => reply.body['error_description'] === 'subject_token was already used'),
      ).length,
      keptForLaterRedeemedOnce: keptForLater.filter((token) => issued(token) === 1).length,
      racedRedeemedOnce: raced.filter((token) => issued(token) === 1).length,
      racedSpentUnissued: raced.filter((token) => issued(token) === 0).length,
      unknownAfterwards: [...outcomes.values()]
        .flat()
        .filter((reply) => reply.body['error_description'] === 'subject_token is unknown').length,
      errorsDuringFailover,
    };
    console.log(`      failover: ${JSON.stringify(summary)}`);
    expect(
      exposure.redeemedBefore + exposure.keptForLater,
      'some tokens live on the master that fails',
    ).to.be.greaterThan(0);
    expect(summary.doubleRedemptions).to.equal(0);
    expect(summary.redeemedBeforeStillRefused, 'a redemption acknowledged before the failure stays').to.equal(30);
    const notRedeemedOnce = keptForLater
      .filter((token) => issued(token) !== 1)
      .map((token) =>
        outcomes.get(token)!.map((reply) => `${reply.status} ${String(reply.body['error_description'])}`),
      );
    expect(
      summary.keptForLaterRedeemedOnce,
      `a creation acknowledged before the failure stays; answers to those that did not: ${JSON.stringify(notRedeemedOnce)}`,
    ).to.equal(30);
    expect(summary.unknownAfterwards).to.equal(0);
    // A token whose redemption failed with the connection may be spent without an issued token (the caller got a 5xx).
    const spentUnissued = raced.filter((token) => issued(token) === 0);
    for (const token of spentUnissued) {
      expect(
        outcomes.get(token)!.some((reply) => reply.status >= 500 || reply.status === 0),
        'spent only by a redemption that failed with the connection',
      ).to.equal(true);
    }
  });

  it('keeps a redemption acknowledged just before its master fails when writes wait for a replica; without, it can be lost', async () => {
    const client = cluster!.client();
    client.on('error', () => {});
    try {
      // A master's replication link is cut, one redemption is answered, and the master dies at once.
      const redeemThenFail = async (replicas: number) => {
        const tag = `{wait-${replicas}-${Math.random()}}:`;
        const Adapter = createRedisAdapter({ client, keyPrefix: tag, replicas });
        const tokens = new Adapter('SubjectToken');
        // The setup and the check afterwards give a replica longer than the redemption under test does: on a
        // loaded machine a replica that has just rejoined can take more than the default 500 ms to acknowledge.
        const patient = new (createRedisAdapter({ client, keyPrefix: tag, replicas: 1, replicaTimeoutMs: 5000 }))(
          'SubjectToken',
        );
        await patient.upsert('t', { kind: 'SubjectToken' }, 60);
        const master = await cluster!.masterOf(`${tag}SubjectToken:{t}`);
        await cluster!.cutReplicas(master);
        const answered = await tokens.consumeOnce('t').catch(() => 'rejected' as const);
        await cluster!.killAndFailOver(master);
        // Back as a replica of the new master, so that a write that waits for one can be confirmed.
        await cluster!.rejoin(master);
        return { answered, redeemableAgain: await patient.consumeOnce('t') };
      };

      // Without waiting, the answer came before any replica had the write: the new master never saw it.
      const unsafe = await redeemThenFail(0);
      expect(unsafe, 'the setup loses an unreplicated write').to.deep.equal({ answered: true, redeemableAgain: true });

      // Waiting for a replica, the same redemption is refused (a 5xx, nothing issued) rather than answered and lost.
      const safe = await redeemThenFail(1);
      expect(safe.answered).to.equal('rejected');
    } finally {
      await client.quit().catch(() => client.disconnect());
    }
  });

  function keyOf(subjectToken: string): string {
    return `${prefix}SubjectToken:{${prefix}impersonation}:${hashSubjectToken(subjectToken)}`;
  }
});

/** A request that got no answer in time: it may or may not have reached the store, like a 5xx. */
function noAnswer(): Reply {
  return { status: 0, headers: new Headers(), body: { error: 'no answer' } };
}

function nodesOf(cluster: RedisCluster): string {
  return cluster.nodes.map(({ host, port }) => `${host}:${port}`).join(',');
}
