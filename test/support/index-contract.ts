import { expect } from 'chai';
import type { BoundedIndexes, IndexEntry, SortedIndexes } from '../../lib/adapters/contracts/indexes.js';

const later = (seconds: number) => Date.now() + seconds * 1000;

/**
 * The sorted indexes, as the sessions', the approvals' and the SSF streams'
 * domains rely on them; `open()` answers with an adapter of the domain's
 * model, in a new deployment, for each test.
 */
export function sortedIndexContract(open: () => Promise<SortedIndexes>): void {
  let store: SortedIndexes;
  beforeEach(async () => {
    store = await open();
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
}

/** The bounded count-and-add, as the approvals' domain relies on it. */
export function boundedIndexContract(open: () => Promise<SortedIndexes & BoundedIndexes>): void {
  let store: SortedIndexes & BoundedIndexes;
  beforeEach(async () => {
    store = await open();
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
}
