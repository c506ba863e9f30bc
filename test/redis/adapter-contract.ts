import { expect } from 'chai';
import type { Cluster, Redis } from 'ioredis';
import type { AdapterPayload } from 'oidc-provider';
import { hasAtomicConsume } from '../../lib/adapters/contract.js';
import type { RedisAdapterClass } from '../../lib/adapters/redis.js';
import { testPrefix } from '../support/adapter.js';

/** Where the Redis adapter's contract runs: one Redis server, or a Redis Cluster. */
export interface RedisTarget {
  /** A connected client for looking at keys directly. */
  readonly client: Redis | Cluster;
  /** A new adapter class, with a connection of its own, on `keyPrefix`. */
  adapter(keyPrefix: string): RedisAdapterClass;
  /** Every key that matches `pattern`, on every master. */
  keys(pattern: string): Promise<string[]>;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * What the Redis adapter guarantees wherever it runs: storage, expiry, the
 * atomic consume, the lookups and revocation by grant. Called inside a
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

  it('meets the plugin contract', () => {
    expect(hasAtomicConsume(new Adapter('SubjectToken'))).to.equal(true);
  });

  it('stores a payload and finds it unchanged', async () => {
    const adapter = new Adapter('Session');
    const payload = {
      accountId: 'alice',
      exp: 2_000_000_000,
      authorizations: { web: { sid: 's', grantId: 'g', persistsLogout: false } },
      amr: [],
      extra: { big: 12_345_678_901_234_567, float: 0.1, text: 'é/"\\' },
      nothing: null,
    } as unknown as AdapterPayload;
    await adapter.upsert('id-1', payload, 60);
    expect(await adapter.find('id-1')).to.deep.equal(payload);
    expect(await adapter.find('missing')).to.equal(undefined);
  });

  it('keeps a model per key under the prefix, the id in a hash tag', async () => {
    await new Adapter('AccessToken').upsert('tok', { grantId: 'g1' }, 60);
    expect(await client.type(`${prefix}AccessToken:{tok}`)).to.equal('hash');
    expect(await client.type(`${prefix}grant:{g1}`)).to.equal('set');
    expect(await new Adapter('RefreshToken').find('tok')).to.equal(undefined);
  });

  it('sets the TTL from expiresIn, and none without it', async () => {
    const adapter = new Adapter('Interaction');
    await adapter.upsert('short', { uid: 'u-short' }, 30);
    await adapter.upsert('forever', { uid: 'u-forever' });
    const ttl = await client.pttl(`${prefix}Interaction:{short}`);
    expect(ttl).to.be.within(29_000, 30_000);
    expect(await client.pttl(`${prefix}Interaction:uid:{u-short}`)).to.be.within(29_000, 30_000);
    expect(await client.pttl(`${prefix}Interaction:{forever}`)).to.equal(-1);
    expect(await client.pttl(`${prefix}Interaction:uid:{u-forever}`)).to.equal(-1);
    // One key per DEL: on a Cluster the two live in different slots.
    await client.del(`${prefix}Interaction:{forever}`);
    await client.del(`${prefix}Interaction:uid:{u-forever}`);
  });

  it('lets an entry expire', async () => {
    const adapter = new Adapter('AuthorizationCode');
    await adapter.upsert('code', { accountId: 'bob' }, 0.2);
    expect(await adapter.find('code')).to.deep.equal({ accountId: 'bob' });
    await sleep(350);
    expect(await adapter.find('code')).to.equal(undefined);
    expect(await adapter.consumeOnce('code')).to.equal(false);
  });

  it('replaces an entry on upsert, consumed state included', async () => {
    const adapter = new Adapter('RefreshToken');
    await adapter.upsert('rt', { accountId: 'bob' }, 60);
    await adapter.consume('rt');
    await adapter.upsert('rt', { accountId: 'carol' }, 60);
    expect(await adapter.find('rt')).to.deep.equal({ accountId: 'carol' });
    await adapter.upsert('rt', { accountId: 'carol', consumed: 1234 }, 60);
    expect(await adapter.find('rt')).to.deep.equal({ accountId: 'carol', consumed: 1234 });
    expect(await adapter.consumeOnce('rt')).to.equal(false);
  });

  it('consume() marks the entry consumed with a timestamp and keeps its TTL', async () => {
    const adapter = new Adapter('AuthorizationCode');
    await adapter.upsert('c1', { accountId: 'bob' }, 60);
    const before = Math.floor(Date.now() / 1000);
    await adapter.consume('c1');
    const found = await adapter.find('c1');
    expect(found?.consumed)
      .to.be.a('number')
      .within(before, before + 2);
    expect(await client.pttl(`${prefix}AuthorizationCode:{c1}`)).to.be.within(58_000, 60_000);
    await adapter.consume('missing');
    expect(await client.exists(`${prefix}AuthorizationCode:{missing}`)).to.equal(0);
  });

  it('consumeOnce() is true once, then false; false for a missing entry', async () => {
    const adapter = new Adapter('SubjectToken');
    await adapter.upsert('st', { kind: 'SubjectToken' }, 60);
    expect(await adapter.consumeOnce('st')).to.equal(true);
    expect(await adapter.consumeOnce('st')).to.equal(false);
    expect(await adapter.consumeOnce('never-stored')).to.equal(false);
    expect(await client.exists(`${prefix}SubjectToken:{never-stored}`)).to.equal(0);
    expect(await client.pttl(`${prefix}SubjectToken:{st}`)).to.be.within(58_000, 60_000);
  });

  it('consumeOnce() lets exactly one of 50 concurrent calls over 5 connections win', async () => {
    const connections = [Adapter, ...Array.from({ length: 4 }, () => target().adapter(prefix))];
    const adapters = connections.map((Connection) => new Connection('SubjectToken'));
    for (let round = 0; round < 5; round += 1) {
      await adapters[0]!.upsert(`race-${round}`, { kind: 'SubjectToken' }, 60);
      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) => adapters[i % adapters.length]!.consumeOnce(`race-${round}`)),
      );
      expect(results.filter(Boolean)).to.have.length(1);
    }
  });

  it('destroy() removes the entry', async () => {
    const adapter = new Adapter('Grant');
    await adapter.upsert('g', { accountId: 'bob' }, 60);
    await adapter.destroy('g');
    expect(await adapter.find('g')).to.equal(undefined);
    await adapter.destroy('g');
  });

  it('findByUid() and findByUserCode() find through their index', async () => {
    const sessions = new Adapter('Session');
    await sessions.upsert('sid-1', { uid: 'uid-1', accountId: 'alice' }, 60);
    expect(await sessions.findByUid('uid-1')).to.deep.equal({ uid: 'uid-1', accountId: 'alice' });
    expect(await sessions.findByUid('uid-2')).to.equal(undefined);
    // A rotated session id keeps its uid; destroying the old id must not lose the new one.
    await sessions.upsert('sid-2', { uid: 'uid-1', accountId: 'alice' }, 60);
    await sessions.destroy('sid-1');
    expect(await sessions.findByUid('uid-1')).to.deep.equal({ uid: 'uid-1', accountId: 'alice' });
    await sessions.destroy('sid-2');
    expect(await sessions.findByUid('uid-1')).to.equal(undefined);

    const codes = new Adapter('DeviceCode');
    await codes.upsert('dc-1', { userCode: 'ABCD-EFGH', grantId: 'g-dc' }, 60);
    expect(await codes.findByUserCode('ABCD-EFGH')).to.deep.equal({ userCode: 'ABCD-EFGH', grantId: 'g-dc' });
    expect(await codes.findByUserCode('ZZZZ-ZZZZ')).to.equal(undefined);
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

  it('revokeByGrantId() removes every token of the grant, of every grantable model, and nothing else', async () => {
    const access = new Adapter('AccessToken');
    const refresh = new Adapter('RefreshToken');
    const interaction = new Adapter('Interaction');
    await access.upsert('at-1', { grantId: 'g1' }, 60);
    await access.upsert('at-2', { grantId: 'g1' }, 60);
    await refresh.upsert('rt-1', { grantId: 'g1' }, 600);
    await access.upsert('at-other', { grantId: 'g2' }, 60);
    await interaction.upsert('i-1', { grantId: 'g1' }, 60);

    expect(await client.pttl(`${prefix}grant:{g1}`), 'the index outlives its longest member').to.be.within(
      598_000,
      600_000,
    );
    await access.revokeByGrantId('g1');

    expect(await access.find('at-1')).to.equal(undefined);
    expect(await access.find('at-2')).to.equal(undefined);
    expect(await refresh.find('rt-1')).to.equal(undefined);
    expect(await client.exists(`${prefix}grant:{g1}`)).to.equal(0);
    expect(await access.find('at-other')).to.deep.equal({ grantId: 'g2' });
    expect(await interaction.find('i-1')).to.deep.equal({ grantId: 'g1' });
    await access.revokeByGrantId('unknown-grant');
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

  it('keeps deployments with different prefixes apart', async () => {
    const other = target().adapter(testPrefix());
    await new Adapter('SubjectToken').upsert('shared-id', { kind: 'mine' }, 60);
    await new other('SubjectToken').upsert('shared-id', { kind: 'theirs' }, 60);
    expect(await new Adapter('SubjectToken').consumeOnce('shared-id')).to.equal(true);
    expect(await new other('SubjectToken').find('shared-id')).to.deep.equal({ kind: 'theirs' });
    expect(await new other('SubjectToken').consumeOnce('shared-id')).to.equal(true);
    await new other('AccessToken').upsert('at', { grantId: 'same-grant' }, 60);
    await new Adapter('AccessToken').revokeByGrantId('same-grant');
    expect(await new other('AccessToken').find('at')).to.deep.equal({ grantId: 'same-grant' });
    const keys = await target().keys(`${prefix}*`);
    expect(keys.sort()).to.deep.equal([`${prefix}SubjectToken:{shared-id}`]);
  });
}
