import { expect } from 'chai';
import type { Cluster, Redis } from 'ioredis';
import type { RedisAdapterClass } from '../../lib/adapters/redis.js';
import { testPrefix, type RedisTarget } from '../support/adapter.js';

/**
 * What the Redis adapter guarantees wherever it runs, besides every store's
 * adapter contract (test/adapters/adapter-contract.test.ts; the Cluster runs it too):
 * how it lays out its keys: one per entry, the id in a hash tag, lookup
 * pointers and grant sets with the TTLs of their entries. Called inside a
 * describe block whose `before` makes `target()` answer.
 */
export function redisAdapterContract(target: () => RedisTarget): void {
  let client: Redis | Cluster;
  let prefix: string;
  let Adapter: RedisAdapterClass;

  beforeEach(() => {
    client = target().client;
    prefix = testPrefix();
    Adapter = target().adapter(prefix);
  });

  it('keeps a model per key under the prefix, the id in a hash tag', async () => {
    await new Adapter('AccessToken').upsert('tok', { grantId: 'g1' }, 60);
    expect(await client.type(`${prefix}AccessToken:{tok}`)).to.equal('hash');
    expect(await client.type(`${prefix}grant:{g1}`)).to.equal('set');
    expect(await new Adapter('RefreshToken').find('tok')).to.equal(undefined);
  });

  it("gives a uid pointer its entry's TTL, and none without one", async () => {
    const adapter = new Adapter('Interaction');
    await adapter.upsert('short', { uid: 'u-short' }, 30);
    await adapter.upsert('forever', { uid: 'u-forever' });
    expect(await client.pttl(`${prefix}Interaction:{short}`)).to.be.within(29_000, 30_000);
    expect(await client.pttl(`${prefix}Interaction:uid:{u-short}`)).to.be.within(29_000, 30_000);
    expect(await client.pttl(`${prefix}Interaction:{forever}`)).to.equal(-1);
    expect(await client.pttl(`${prefix}Interaction:uid:{u-forever}`)).to.equal(-1);
    // One key per DEL: on a Cluster the two live in different slots.
    await client.del(`${prefix}Interaction:{forever}`);
    await client.del(`${prefix}Interaction:uid:{u-forever}`);
  });

  it('findByUid() remembers the pointer it read, and never trusts it over the entry', async () => {
    const sessions = new Adapter('Session');
    await sessions.upsert('sid-1', { uid: 'uid-1', accountId: 'alice' }, 60);
    expect(await sessions.findByUid('uid-1')).to.deep.equal({ uid: 'uid-1', accountId: 'alice' });
    // The index read is what is saved: with the pointer gone, the entry is still found.
    await client.del(`${prefix}Session:uid:{uid-1}`);
    expect(await sessions.findByUid('uid-1'), 'remembered pointer').to.deep.equal({ uid: 'uid-1', accountId: 'alice' });

    // The entry itself is read every time: a change to it shows at once.
    await sessions.upsert('sid-1', { uid: 'uid-1', accountId: 'alice', authorizations: {} }, 60);
    expect(await sessions.findByUid('uid-1')).to.deep.equal({ uid: 'uid-1', accountId: 'alice', authorizations: {} });

    // Another instance rotates the id as oidc-provider does (old id destroyed, new one saved):
    // the remembered id finds nothing, and the index names the new one.
    const otherInstance = new (target().adapter(prefix))('Session');
    await otherInstance.destroy('sid-1');
    await otherInstance.upsert('sid-2', { uid: 'uid-1', accountId: 'alice', rotated: true }, 60);
    expect(await sessions.findByUid('uid-1')).to.deep.equal({ uid: 'uid-1', accountId: 'alice', rotated: true });

    // A logout on the other instance is seen here at once.
    await otherInstance.destroy('sid-2');
    expect(await sessions.findByUid('uid-1')).to.equal(undefined);

    // An entry is only ever the answer for its own uid, whatever a pointer, read or remembered, says.
    await sessions.upsert('sid-3', { uid: 'uid-3', accountId: 'bob' }, 60);
    await client.set(`${prefix}Session:uid:{uid-4}`, 'sid-3', 'EX', 60);
    expect(await sessions.findByUid('uid-4')).to.equal(undefined);
    expect(await sessions.findByUid('uid-3')).to.deep.equal({ uid: 'uid-3', accountId: 'bob' });
    await sessions.upsert('sid-3', { uid: 'uid-5', accountId: 'bob' }, 60);
    expect(await sessions.findByUid('uid-3')).to.equal(undefined);
  });

  it('keeps a grant index as long as its longest member, and deletes it with the grant', async () => {
    const access = new Adapter('AccessToken');
    await access.upsert('at-1', { grantId: 'g1' }, 60);
    await new Adapter('RefreshToken').upsert('rt-1', { grantId: 'g1' }, 600);
    expect(await client.pttl(`${prefix}grant:{g1}`), 'the index outlives its longest member').to.be.within(
      598_000,
      600_000,
    );
    await access.revokeByGrantId('g1');
    expect(await client.exists(`${prefix}grant:{g1}`)).to.equal(0);
  });

  it('keeps a grant index without TTL while a member has none, and never shortens it', async () => {
    const access = new Adapter('AccessToken');
    await access.upsert('long', { grantId: 'g3' }, 600);
    await access.upsert('short', { grantId: 'g3' }, 10);
    expect(await client.pttl(`${prefix}grant:{g3}`)).to.be.above(590_000);
    await access.upsert('forever', { grantId: 'g3' });
    await access.upsert('short-2', { grantId: 'g3' }, 10);
    expect(await client.pttl(`${prefix}grant:{g3}`)).to.equal(-1);
    await access.revokeByGrantId('g3');
  });

  /** A session committed to `indexes`, listed until `expiresAt` (ms). */
  const commitSession = (id: string, indexes: string[], expiresAt: number) =>
    new Adapter('ImpersonationSession').commitOnce({
      write: { model: 'ImpersonationSession', id, payload: { kind: 'ImpersonationSession' }, expiresIn: 3600 },
      indexes,
      expiresAt,
      guards: [],
    });
  const indexKey = (index: string) => `${prefix}ImpersonationSession:index:{${prefix}impersonation}:${index}`;

  it("keeps a sessions' index while its longest-lived member lives, whatever order they came in", async () => {
    await commitSession('imp-long', ['by-order'], Date.now() + 3_000_000);
    await commitSession('imp-short', ['by-order'], Date.now() + 60_000);
    expect(await client.pttl(indexKey('by-order')), 'kept past the first, longer member').to.be.above(2_990_000);
    await commitSession('imp-longer', ['by-order'], Date.now() + 4_000_000);
    expect(await client.pttl(indexKey('by-order')), 'pushed past the longer one').to.be.above(3_990_000);
  });

  it('drops the expired members of the indexes it writes on one commit in 16, and never lists them meanwhile', async () => {
    await commitSession('imp-gone', ['pruned'], Date.now() + 50);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const sessions = new Adapter('ImpersonationSession');
    for (let n = 0; n < 16; n += 1) {
      await commitSession(`imp-${n}`, ['pruned'], Date.now() + 600_000);
      expect((await sessions.indexRange('pruned', undefined, 100)).map((entry) => entry.member)).not.to.include(
        'imp-gone',
      );
    }
    expect(await client.zscore(indexKey('pruned'), 'imp-gone')).to.equal(null);
    expect(await client.zcard(indexKey('pruned'))).to.equal(16);
  });
}
