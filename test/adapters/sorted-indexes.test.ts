import { expect } from 'chai';
import { createMemoryAdapter } from '../../lib/index.js';
import type { BoundedIndexes, ImpersonationAdapter, IndexEntry } from '../../lib/adapters/contract.js';
import { ADAPTERS } from '../support/adapters.js';

// The contract the session and approval stores rely on, checked on every adapter the package ships.
for (const { name, open } of ADAPTERS) {
  describe(`sorted indexes (${name} adapter)`, () => {
    let store: ImpersonationAdapter & BoundedIndexes;
    const later = (seconds: number) => Date.now() + seconds * 1000;
    beforeEach(async () => {
      store = new (await open())('ImpersonationSession');
    });

    it('returns live members latest expiry first, ties by member descending, and pages after a position', async () => {
      const base = later(60);
      for (const [member, at] of [
        ['a', base],
        ['b', base + 1000],
        ['c', base + 1000],
        ['d', base + 2000],
      ] as const) {
        await store.indexAdd(['all'], member, at);
      }
      const everything = await store.indexRange('all', undefined, 10);
      expect(everything.map((entry) => entry.member)).to.deep.equal(['d', 'c', 'b', 'a']);
      const first = await store.indexRange('all', undefined, 2);
      expect(first.map((entry) => entry.member)).to.deep.equal(['d', 'c']);
      const rest = await store.indexRange('all', first.at(-1), 2);
      expect(rest.map((entry) => entry.member)).to.deep.equal(['b', 'a']);
      expect(await store.indexRange('all', rest.at(-1), 2)).to.deep.equal([]);
    });

    it('orders ties as JavaScript orders strings (case and punctuation included), page after page', async () => {
      const at = later(60);
      const members = ['B', 'a', '_x', '-z', 'A-b', 'Ab', 'b'];
      for (const member of members) await store.indexAdd(['ties'], member, at);
      const expected = [...members].sort().reverse();
      const paged: string[] = [];
      let position: IndexEntry | undefined;
      for (;;) {
        const page = await store.indexRange('ties', position, 2);
        paged.push(...page.map((entry) => entry.member));
        if (page.length < 2) break;
        position = page.at(-1);
      }
      expect(paged).to.deep.equal(expected);
    });

    it('adds within bounds: to every index or none, counting live members only and the member itself aside', async () => {
      const within = (bound: number, member: string, seconds = 60) =>
        store.indexAddWithin(
          [
            { index: 'pending', expiresAt: later(seconds), bound },
            { index: 'given', expiresAt: later(3600), bound: 3 },
          ],
          member,
        );
      expect(await within(2, 'a')).to.equal(undefined);
      expect(await within(2, 'b', 0.2)).to.equal(undefined);
      expect(await within(2, 'c')).to.equal('pending');
      // Refused as a whole: not listed in the index that had room either.
      expect((await store.indexRange('given', undefined, 10)).map((entry) => entry.member)).to.deep.equal(['b', 'a']);
      // A member already listed needs no more room, and moves to its new expiry.
      expect(await within(2, 'a', 120)).to.equal(undefined);
      await new Promise((resolve) => setTimeout(resolve, 300));
      // b expired: its place in 'pending' is free, while 'given' still counts it.
      expect(await within(2, 'c')).to.equal(undefined);
      expect(await within(9, 'd')).to.equal('given');
      expect((await store.indexRange('pending', undefined, 10)).map((entry) => entry.member)).to.deep.equal(['a', 'c']);
    });

    it('moves a member re-added with a new expiry, and removes one', async () => {
      await store.indexAdd(['x'], 'm', later(10));
      await store.indexAdd(['x'], 'n', later(20));
      await store.indexAdd(['x'], 'm', later(30));
      expect((await store.indexRange('x', undefined, 10)).map((entry) => entry.member)).to.deep.equal(['m', 'n']);
      await store.indexRemove(['x'], 'm');
      await store.indexRemove(['x'], 'never-there');
      expect((await store.indexRange('x', undefined, 10)).map((entry) => entry.member)).to.deep.equal(['n']);
    });

    it('never returns an expired member', async () => {
      await store.indexAdd(['short'], 'gone', Date.now() + 300);
      await store.indexAdd(['short'], 'kept', later(60));
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect((await store.indexRange('short', undefined, 10)).map((entry) => entry.member)).to.deep.equal(['kept']);
      expect(await store.indexRange('unknown', undefined, 10)).to.deep.equal([]);
    });

    it('adds a member to several indexes in one call', async () => {
      await store.indexAdd(['one', 'two'], 'both', later(60));
      expect((await store.indexRange('one', undefined, 10)).map((entry) => entry.member)).to.deep.equal(['both']);
      expect((await store.indexRange('two', undefined, 10)).map((entry) => entry.member)).to.deep.equal(['both']);
      await store.indexRemove(['one', 'two'], 'both');
      expect(await store.indexRange('two', undefined, 10)).to.deep.equal([]);
    });

    it("keeps indexes of one name apart from another's", async () => {
      await store.indexAdd(['subject:bob'], 's1', later(60));
      await store.indexAdd(['subject:carol'], 's2', later(60));
      expect((await store.indexRange('subject:bob', undefined, 10)).map((entry) => entry.member)).to.deep.equal(['s1']);
    });
  });
}

describe('sorted indexes (memory adapter): the bound', () => {
  it('refuses one member too many with 503, never dropping a live one', async () => {
    const store = new (createMemoryAdapter({ limits: { ImpersonationSession: 1 } }))('ImpersonationSession');
    for (let i = 0; i < 8; i += 1) await store.indexAdd(['all'], `m${i}`, Date.now() + 60_000);
    let refused: { status?: number } | undefined;
    try {
      await store.indexAdd(['all', 'other'], 'one-too-many', Date.now() + 60_000);
    } catch (error) {
      refused = error as { status?: number };
    }
    expect(refused?.status).to.equal(503);
    expect(await store.indexRange('all', undefined, 100)).to.have.length(8);
    expect(await store.indexRange('other', undefined, 100), 'all or none').to.have.length(0);
  });
});

describe('sorted indexes (memory adapter): members that expire leave the front', () => {
  it('frees the room of expired members and keeps order, paging and removal right once the front is compacted', async () => {
    // 250 entries allow 2,000 index members: the second 1,500 fit only if the first 1,500 left.
    const store = new (createMemoryAdapter({ limits: { ImpersonationSession: 250 } }))('ImpersonationSession');
    const soon = Date.now() + 150;
    for (let i = 0; i < 1500; i += 1) await store.indexAdd(['all'], `old${String(i).padStart(4, '0')}`, soon);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const later = Date.now() + 60_000;
    for (let i = 0; i < 1500; i += 1) await store.indexAdd(['all'], `new${String(i).padStart(4, '0')}`, later + i);
    const first = await store.indexRange('all', undefined, 3);
    expect(first.map((entry) => entry.member)).to.deep.equal(['new1499', 'new1498', 'new1497']);
    const last = await store.indexRange('all', { member: 'new0002', expiresAt: later + 2 }, 10);
    expect(last.map((entry) => entry.member)).to.deep.equal(['new0001', 'new0000']);
    await store.indexRemove(['all'], 'new0001');
    await store.indexAdd(['all'], 'new0000', later + 5000);
    const everything = await store.indexRange('all', undefined, 5000);
    expect(everything).to.have.length(1499);
    expect(everything[0]!.member).to.equal('new0000');
    expect(everything.some((entry) => entry.member.startsWith('old'))).to.equal(false);
  });
});
