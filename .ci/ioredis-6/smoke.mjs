#!/usr/bin/env node
// The Redis adapter on ioredis 6, run from a project that installed the package and ioredis 6
// (.ci/consumer-check.sh): on a client the project built, and on the one the adapter opens from
// `url`, the store operations of an exchange and of its webhooks' outbox, whose replies (hashes,
// sorted sets with scores) are where a client of another shape would go wrong. Needs Redis at
// REDIS_URL (default redis://127.0.0.1:6379); removes its keys.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { createRedisAdapter, REDIS_CLIENT_OPTIONS } from 'oidc-provider-impersonation/adapters/redis';

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const run = `consumer-check-${randomUUID()}:`;
const client = new Redis(url, REDIS_CLIENT_OPTIONS);

async function exchangeOn(Store, how) {
  const tokens = new Store('SubjectToken');
  const sessions = new Store('ImpersonationSession');
  await tokens.upsert('st-1', { kind: 'SubjectToken', accountId: 'bob' }, 60);
  assert.deepEqual(await tokens.find('st-1'), { kind: 'SubjectToken', accountId: 'bob' }, how);

  const expiresAt = Date.now() + 60_000;
  const commit = (id) =>
    sessions.commitOnce({
      consume: { model: 'SubjectToken', id: 'st-1' },
      write: {
        model: 'ImpersonationSession',
        id,
        payload: { kind: 'ImpersonationSession', subject: 'bob' },
        expiresIn: 60,
      },
      indexes: ['subject:bob'],
      expiresAt,
      guards: [],
      outbox: {
        entries: [{ id: randomUUID(), subscription: 'hooks', subject: 'bob', body: '{}' }],
        maxPending: 10,
        now: Date.now(),
      },
    });
  assert.deepEqual(await commit('session-1'), { outcome: 'committed', dropped: [] }, how);
  assert.deepEqual(await commit('session-2'), { outcome: 'consumed' }, `${how}: a second redemption`);
  assert.deepEqual(await sessions.indexRange('subject:bob', undefined, 10), [{ member: 'session-1', expiresAt }], how);

  await tokens.upsert('st-2', { kind: 'SubjectToken' }, 60);
  assert.deepEqual([await tokens.consumeOnce('st-2'), await tokens.consumeOnce('st-2')], [true, false], how);

  const outbox = sessions.outbox();
  assert.deepEqual((await outbox.stats()).subscriptions, { hooks: { pending: 1, dead: 0, dropped: 0 } }, how);
  const [leased] = await outbox.claim(10, 30_000, Date.now(), 0);
  assert.ok(leased, `${how}: the outbox entry is claimed`);
  assert.equal(await outbox.settle(leased, { outcome: 'dead', reason: 'gone' }, Date.now()), true, how);
  const letters = await outbox.deadLetters(10);
  assert.deepEqual(
    letters.map(({ subscription, reason }) => [subscription, reason]),
    [['hooks', 'gone']],
    how,
  );
  assert.equal(typeof letters[0].deadAt, 'number', how);
}

try {
  const given = createRedisAdapter({ client, keyPrefix: `${run}client:` });
  await exchangeOn(given, 'a client of ioredis 6');
  await given.close();
  assert.equal(await client.ping(), 'PONG', 'a client passed in stays open');

  const opened = createRedisAdapter({ url, keyPrefix: `${run}url:` });
  await exchangeOn(opened, 'the client the adapter opens from url');
  await opened.close();
  console.log('the Redis adapter on ioredis 6: an exchange and its outbox, on a client passed in and on its own');
} finally {
  for (let cursor = '0'; ;) {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${run}*`, 'COUNT', 1000);
    for (const key of keys) await client.del(key);
    if ((cursor = next) === '0') break;
  }
  client.disconnect();
}
