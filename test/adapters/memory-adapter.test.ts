import { expect } from 'chai';
import { createMemoryAdapter } from '../../lib/index.js';

describe('memory adapter', () => {
  it('stores, finds, destroys and isolates models', async () => {
    const Memory = createMemoryAdapter();
    const tokens = new Memory('AccessToken');
    const codes = new Memory('AuthorizationCode');
    await tokens.upsert('a', { jti: 'a', grantId: 'g1' }, 60);
    expect(await tokens.find('a')).to.deep.equal({ jti: 'a', grantId: 'g1' });
    expect(await codes.find('a')).to.equal(undefined);
    await tokens.destroy('a');
    expect(await tokens.find('a')).to.equal(undefined);
  });

  it("keeps the plugin's records as copies, frozen, so a caller cannot change what is stored, before or after", async () => {
    const sessions = new (createMemoryAdapter())('ImpersonationSession');
    const given = { jti: 's', authorizations: { app: { grantId: 'g1' } } };
    await sessions.upsert('s', given, 60);
    given.authorizations.app.grantId = 'changed after upsert';
    const found = (await sessions.find('s'))! as unknown as typeof given;
    expect(() => (found.authorizations.app.grantId = 'changed after find')).to.throw(TypeError);
    expect(() => Object.assign(found, { jti: 'changed after find' })).to.throw(TypeError);
    expect(await sessions.find('s')).to.deep.equal({ jti: 's', authorizations: { app: { grantId: 'g1' } } });
    // The store's own changes replace the record: one read before them still reads as it was.
    expect(await sessions.consumeOnce('s')).to.equal(true);
    expect(found).to.not.have.property('consumed');
    expect(await sessions.find('s'))
      .to.have.property('consumed')
      .that.is.a('number');
  });

  it("gives back what JSON keeps of the plugin's records, as the Redis adapter does", async () => {
    const tokens = new (createMemoryAdapter())('SubjectToken');
    await tokens.upsert(
      'a',
      { jti: 'a', scope: undefined, aud: ['x', { y: [1, null] }] as never, extra: {}, at: new Date(0) as never },
      60,
    );
    expect(await tokens.find('a')).to.deep.equal({
      jti: 'a',
      aud: ['x', { y: [1, null] }],
      extra: {},
      at: '1970-01-01T00:00:00.000Z',
    });
  });

  it('stores exactly what a JSON round trip gives, whether the payload is plain JSON or not', async () => {
    const tokens = new (createMemoryAdapter())('SubjectToken');
    const withProto = Object.defineProperty({ jti: 'p' }, '__proto__', {
      value: { admin: true },
      enumerable: true,
      writable: true,
      configurable: true,
    });
    class Claims {
      constructor(readonly tier: string) {}
    }
    const payloads: Array<Record<string, unknown>> = [
      { jti: 'plain', nested: { list: [1, 'two', true, null, { deep: [] }] }, zero: -0, count: 3.5 },
      { jti: 'numbers', nan: Number.NaN, inf: Number.POSITIVE_INFINITY, list: [Number.NEGATIVE_INFINITY] },
      { jti: 'holes', list: [1, undefined, () => 1], gone: undefined, fn: () => 1 },
      { jti: 'objects', at: new Date(5), map: new Map([['a', 1]]), claims: new Claims('gold') },
      { jti: 'json', custom: { toJSON: () => 'as text' }, bare: Object.assign(Object.create(null), { a: 1 }) },
      withProto,
    ];
    for (const [at, payload] of payloads.entries()) {
      await tokens.upsert(`t${at}`, payload as never, 60);
      const found = (await tokens.find(`t${at}`)) as Record<string, unknown>;
      expect(found, String(payload['jti'])).to.deep.equal(JSON.parse(JSON.stringify(payload)));
      expect(Object.keys(found), String(payload['jti'])).to.deep.equal(
        Object.keys(JSON.parse(JSON.stringify(payload))),
      );
      expect(Object.is(found['zero'], -0), 'JSON writes -0 as 0').to.equal(false);
    }
    const proto = (await tokens.find('t5')) as Record<string, unknown>;
    expect(Object.getPrototypeOf(proto)).to.equal(Object.prototype);
    expect(proto['admin']).to.equal(undefined);
  });

  it('keeps a "__proto__" member a member, never a prototype', async () => {
    const tokens = new (createMemoryAdapter())('SubjectToken');
    await tokens.upsert('a', JSON.parse('{"jti":"a","extra":{"__proto__":{"admin":true}}}') as never, 60);
    const found = (await tokens.find('a'))! as { extra: Record<string, unknown> };
    expect(Object.keys(found.extra)).to.deep.equal(['__proto__']);
    expect(Object.getPrototypeOf(found.extra)).to.equal(Object.prototype);
    expect((found.extra as { admin?: boolean }).admin).to.equal(undefined);
  });

  it("keeps oidc-provider's models as its own memory adapter does: the object saved, past its expiry by the clock tolerance", async () => {
    const Memory = createMemoryAdapter({ clockTolerance: 1 });
    const codes = new Memory('DeviceCode');
    const subjectTokens = new Memory('SubjectToken');
    const code = { jti: 'd', userCode: 'ABCD-EFGH', grantId: 'g' };
    await codes.upsert('d', code, 0.2);
    await codes.upsert('zero', { jti: 'zero' }, 0);
    await subjectTokens.upsert('s', { jti: 's' }, 0.2);
    expect(await codes.find('d')).to.equal(code);
    expect(await codes.findByUserCode('ABCD-EFGH')).to.equal(code);
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(await codes.find('d')).to.equal(code);
    expect(await codes.find('zero')).to.deep.equal({ jti: 'zero' });
    // The plugin's own records end at their expiry.
    expect(await subjectTokens.find('s')).to.equal(undefined);
    await new Promise((resolve) => setTimeout(resolve, 900));
    expect(await codes.find('d')).to.equal(undefined);
    expect(() => createMemoryAdapter({ clockTolerance: -1 })).to.throw(TypeError, /clockTolerance/);
  });

  it("times entries by Date.now(), oidc-provider's clock, which fake timers move too", async () => {
    const tokens = new (createMemoryAdapter())('AccessToken');
    await tokens.upsert('a', { jti: 'a' }, 60);
    const now = Date.now;
    Date.now = () => now() + 61_000;
    try {
      expect(await tokens.find('a')).to.equal(undefined);
    } finally {
      Date.now = now;
    }
  });

  it('forgets entries when expiresIn runs out', async () => {
    const tokens = new (createMemoryAdapter())('AccessToken');
    await tokens.upsert('a', { jti: 'a' }, 1);
    expect(await tokens.find('a')).to.not.equal(undefined);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect(await tokens.find('a')).to.equal(undefined);
  });

  it('finds by uid and by user code, and revokes by grant id', async () => {
    const Memory = createMemoryAdapter();
    const sessions = new Memory('Session');
    const devices = new Memory('DeviceCode');
    const tokens = new Memory('AccessToken');
    await sessions.upsert('s', { uid: 'u-1' }, 60);
    await devices.upsert('d', { userCode: 'ABCD-EFGH' }, 60);
    await tokens.upsert('t1', { grantId: 'g' }, 60);
    await tokens.upsert('t2', { grantId: 'g' }, 60);
    await tokens.upsert('t3', { grantId: 'other' }, 60);
    expect(await sessions.findByUid('u-1')).to.deep.equal({ uid: 'u-1' });
    expect(await sessions.findByUid('nope')).to.equal(undefined);
    expect(await devices.findByUserCode('ABCD-EFGH')).to.deep.equal({ userCode: 'ABCD-EFGH' });
    expect(await devices.findByUserCode('nope')).to.equal(undefined);
    await tokens.revokeByGrantId('g');
    expect(await tokens.find('t1')).to.equal(undefined);
    expect(await tokens.find('t2')).to.equal(undefined);
    expect(await tokens.find('t3')).to.not.equal(undefined);
  });

  it('revokes only grantable models by grant id, never an interaction or a session', async () => {
    const Memory = createMemoryAdapter();
    const interactions = new Memory('Interaction');
    const tokens = new Memory('AccessToken');
    await interactions.upsert('i', { grantId: 'g' }, 60);
    await tokens.upsert('t', { grantId: 'g' }, 60);
    await tokens.revokeByGrantId('g');
    expect(await tokens.find('t')).to.equal(undefined);
    expect(await interactions.find('i')).to.not.equal(undefined);
  });

  it('keeps the grant index as long as its longest-lived entry', async () => {
    const Memory = createMemoryAdapter();
    const tokens = new Memory('AccessToken');
    const codes = new Memory('AuthorizationCode');
    await tokens.upsert('long', { grantId: 'g' }, 3600);
    await codes.upsert('short', { grantId: 'g' }, 1);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    await tokens.revokeByGrantId('g');
    expect(await tokens.find('long')).to.equal(undefined);
  });

  describe('consumeOnce: the atomic-consume contract', () => {
    it('is true for exactly one of many concurrent callers', async () => {
      const store = new (createMemoryAdapter())('SubjectToken');
      await store.upsert('k', { jti: 'k' }, 60);
      const results = await Promise.all(Array.from({ length: 50 }, () => store.consumeOnce('k')));
      expect(results.filter(Boolean)).to.have.length(1);
      expect((await store.find('k'))!.consumed).to.be.a('number');
    });

    it('is false for a missing or expired entry', async () => {
      const store = new (createMemoryAdapter())('SubjectToken');
      expect(await store.consumeOnce('missing')).to.equal(false);
      await store.upsert('short', { jti: 'short' }, 1);
      await new Promise((resolve) => setTimeout(resolve, 1100));
      expect(await store.consumeOnce('short')).to.equal(false);
    });

    it('follows upsert: a new version starts unconsumed, a payload saved as consumed stays consumed', async () => {
      const store = new (createMemoryAdapter())('SubjectToken');
      await store.upsert('k', { jti: 'k' }, 60);
      expect(await store.consumeOnce('k')).to.equal(true);
      await store.upsert('k', { jti: 'k' }, 60);
      expect((await store.find('k'))!.consumed).to.equal(undefined);
      await store.upsert('k', { jti: 'k', consumed: 123 }, 60);
      expect((await store.find('k'))!.consumed).to.equal(123);
      expect(await store.consumeOnce('k')).to.equal(false);
    });

    it("backs oidc-provider's consume()", async () => {
      const codes = new (createMemoryAdapter())('AuthorizationCode');
      await codes.upsert('c', { jti: 'c' }, 60);
      await codes.consume('c');
      expect((await codes.find('c'))!.consumed).to.be.a('number');
      expect(await codes.consumeOnce('c')).to.equal(false);
    });
  });

  describe('the bounds', () => {
    const inAMinute = () => Math.floor(Date.now() / 1000) + 60;

    it('bounds each model on its own: a flood of one kind evicts only that kind, counted, with a callback', async () => {
      const evicted: string[] = [];
      const Memory = createMemoryAdapter({ max: 3, onEvict: (model, id) => evicted.push(`${model}:${id}`) });
      const interactions = new Memory('Interaction');
      const sessions = new Memory('Session');
      await sessions.upsert('s', { jti: 's', uid: 'u', exp: inAMinute() }, 60);
      for (const id of ['a', 'b', 'c', 'd', 'e']) await interactions.upsert(id, { jti: id, exp: inAMinute() }, 60);
      expect(await interactions.find('a')).to.equal(undefined);
      expect(await interactions.find('e')).to.not.equal(undefined);
      expect(await sessions.find('s')).to.not.equal(undefined);
      expect(await sessions.findByUid('u')).to.not.equal(undefined);
      expect(evicted).to.deep.equal(['Interaction:a', 'Interaction:b']);
      const stats = Memory.stats();
      expect(stats.size).to.equal(4);
      expect(stats.evictedUnexpired).to.deep.equal({ Interaction: 2 });
      expect(stats.models['Interaction']).to.deep.equal({ size: 3, max: 3, protected: false });
      Memory.clear();
      expect(Memory.stats().size).to.equal(0);
    });

    it('pushes out the least recently used: a read keeps an entry for at least half the bound of writes after it', async () => {
      const evicted: string[] = [];
      const Memory = createMemoryAdapter({ max: 4, onEvict: (_model, id) => evicted.push(id) });
      const grants = new Memory('Grant');
      const write = (id: string) => grants.upsert(id, { jti: id, exp: inAMinute() }, 60);
      for (const id of ['a', 'b', 'c', 'd']) await write(id);
      // 'a', read three writes after its own, moves last; 'd', read right after its own, stays where it is.
      expect(await grants.find('a')).to.not.equal(undefined);
      expect(await grants.find('d')).to.not.equal(undefined);
      await write('e');
      await write('f');
      expect(evicted).to.deep.equal(['b', 'c']);
      for (const id of ['g', 'h']) await write(id);
      expect(evicted).to.deep.equal(['b', 'c', 'd', 'a']);
    });

    it('takes a bound per model from limits', async () => {
      const Memory = createMemoryAdapter({ max: 10, limits: { Interaction: 2 } });
      const interactions = new Memory('Interaction');
      for (const id of ['a', 'b', 'c']) await interactions.upsert(id, { jti: id }, 60);
      expect(Memory.stats().models['Interaction']!.size).to.equal(2);
      expect(Memory.stats().models['Interaction']!.max).to.equal(2);
    });

    // ReplayDetection is bounded per client besides (test/security/replay-shares.test.ts).
    for (const model of ['SubjectToken', 'ImpersonationApproval', 'Custom']) {
      it(`never evicts an unexpired ${model} entry: when full, a new one is refused with 503 and the old ones stay`, async () => {
        const Memory = createMemoryAdapter({ max: 2, protectedModels: ['Custom'] });
        const store = new Memory(model);
        await store.upsert('a', { jti: 'a' }, 60);
        await store.upsert('b', { jti: 'b' }, 60);
        let refused: { status?: number; error?: string } | undefined;
        try {
          await store.upsert('c', { jti: 'c' }, 60);
        } catch (error) {
          refused = error as typeof refused;
        }
        expect(refused).to.include({ status: 503, error: 'temporarily_unavailable' });
        expect(await store.find('a')).to.not.equal(undefined);
        expect(await store.find('b')).to.not.equal(undefined);
        expect(await store.find('c')).to.equal(undefined);
        // Rewriting an entry that is already there needs no room.
        await store.upsert('a', { jti: 'a', consumed: 1 }, 60);
        expect(Memory.stats().refusedFull).to.deep.equal({ [model]: 1 });
      });
    }

    it('sweeps expired entries out, so that they never hold a protected bound', async () => {
      const Memory = createMemoryAdapter({ max: 2 });
      const store = new Memory('SubjectToken');
      await store.upsert('a', { jti: 'a' }, 1);
      await store.upsert('b', { jti: 'b' }, 1);
      await new Promise((resolve) => setTimeout(resolve, 1100));
      await store.upsert('c', { jti: 'c' }, 60);
      await store.upsert('d', { jti: 'd' }, 60);
      expect(Memory.stats().models['SubjectToken']!.size).to.equal(2);
    });

    it('does not count entries that had already expired', async () => {
      const Memory = createMemoryAdapter({ max: 1 });
      const store = new Memory('Interaction');
      await store.upsert('old', { jti: 'old', exp: Math.floor(Date.now() / 1000) - 1 }, 60);
      await store.upsert('new', { jti: 'new' }, 60);
      expect(Memory.stats().evictedUnexpired).to.deep.equal({});
    });

    it("takes a grant's tokens with its index when the index is pushed out, so that no token outlives its revocation", async () => {
      const Memory = createMemoryAdapter({ max: 10, limits: { Grant: 1 } });
      const tokens = new Memory('AccessToken');
      await tokens.upsert('t1', { jti: 't1', grantId: 'g1' }, 60);
      await tokens.upsert('t2', { jti: 't2', grantId: 'g2' }, 60);
      expect(await tokens.find('t1')).to.equal(undefined);
      expect(await tokens.find('t2')).to.not.equal(undefined);
    });

    it('refuses bounds that are not positive integers, and protectedModels that is not a list', () => {
      expect(() => createMemoryAdapter({ max: 0 })).to.throw(TypeError, /max/);
      expect(() => createMemoryAdapter({ limits: { Session: 1.5 } })).to.throw(TypeError, /limits\.Session/);
      expect(() => createMemoryAdapter({ protectedModels: 'Session' as never })).to.throw(TypeError, /protectedModels/);
    });
  });
});
