import { expect } from 'chai';
import { createMemoryAdapter } from '../../lib/index.js';

// The sorted indexes every adapter keeps are in the domains' contract (test/support/index-contract.ts,
// run by test/adapters/adapter-contract.test.ts); here what is the memory adapter's own.
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
