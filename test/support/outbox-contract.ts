import { expect } from 'chai';
import type { NewOutboxEntry, OutboxStore, Settlement, SettledEntry } from '../../lib/outbox/contract.js';

const MAX = 100;
const LEASE = 30_000;

function entry(id: string, subject: string, subscription = 'crm'): NewOutboxEntry {
  return { id, subscription, subject, body: JSON.stringify({ id }) };
}

/**
 * What every outbox store guarantees, for webhooks: order per stream, leases,
 * bounds, dead letters. Called inside a describe block; `open()` answers with
 * a new, empty outbox for each test. test/adapters/outbox-store.test.ts runs it on
 * every adapter of test/support/adapters.ts, test/redis-cluster/ on a Redis
 * Cluster.
 */
export function outboxContract(open: () => Promise<OutboxStore>): void {
  let outbox: OutboxStore;
  // A clock of the test's own: every operation is given its time.
  let now: number;

  beforeEach(async () => {
    outbox = await open();
    now = Date.now();
  });

  it('hands an entry out once, under a lease, and forgets it once delivered', async () => {
    expect(await outbox.append([entry('e1', 'alice')], MAX, now)).to.deep.equal([]);
    const [claimed, ...others] = await outbox.claim(10, LEASE, now, 0);
    expect(others).to.deep.equal([]);
    expect(claimed).to.include({ id: 'e1', subscription: 'crm', subject: 'alice', attempts: 1, createdAt: now });
    expect(claimed?.body).to.equal(JSON.stringify({ id: 'e1' }));
    expect(await outbox.claim(10, LEASE, now + 1, 0)).to.deep.equal([]);
    expect((await outbox.stats()).subscriptions['crm']).to.include({ pending: 1 });
    expect(await outbox.settle(claimed!, { outcome: 'delivered' }, now + 2)).to.equal(true);
    expect(await outbox.claim(10, LEASE, now + LEASE * 2, 0)).to.deep.equal([]);
    expect((await outbox.stats()).subscriptions['crm'] ?? { pending: 0 }).to.include({ pending: 0 });
  });

  it("keeps each subject's entries in order: the next waits for the one before", async () => {
    await outbox.append([entry('a1', 'alice')], MAX, now);
    await outbox.append([entry('a2', 'alice')], MAX, now);
    await outbox.append([entry('b1', 'bob')], MAX, now);
    const first = await outbox.claim(10, LEASE, now, 0);
    expect(first.map((e) => e.id)).to.have.members(['a1', 'b1']);
    expect(await outbox.claim(10, LEASE, now, 0)).to.deep.equal([]);
    await outbox.settle(
      first.find((e) => e.id === 'a1')!,
      { outcome: 'delivered' },
      now,
    );
    expect((await outbox.claim(10, LEASE, now, 0)).map((e) => e.id)).to.deep.equal(['a2']);
  });

  it('keeps the streams of two subscriptions apart', async () => {
    await outbox.append([entry('x', 'alice', 'crm'), entry('x', 'alice', 'mail')], MAX, now);
    const claimed = await outbox.claim(10, LEASE, now, 0);
    expect(claimed.map((e) => e.subscription)).to.have.members(['crm', 'mail']);
  });

  it('hands an entry out again once its lease ran out', async () => {
    await outbox.append([entry('e1', 'alice')], MAX, now);
    const [first] = await outbox.claim(10, 50, now, 0);
    expect(await outbox.claim(10, 50, now + 49, 0)).to.deep.equal([]);
    const [second] = await outbox.claim(10, 50, now + 50, 0);
    expect(second).to.include({ id: 'e1', attempts: 2 });
    expect(second?.lease).to.not.equal(first?.lease);
    expect(await outbox.settle(second!, { outcome: 'delivered' }, now + 60)).to.equal(true);
    expect(await outbox.claim(10, 50, now + 500, 0)).to.deep.equal([]);
  });

  // Whatever it would settle, the instance whose lease ran out and was taken over changes nothing.
  const settlements: Settlement[] = [
    { outcome: 'delivered' },
    { outcome: 'retry', at: 0 },
    { outcome: 'dead', reason: 'attempts' },
  ];
  for (const settlement of settlements) {
    it(`ignores a ${settlement.outcome} settlement under a lease that ran out and was taken over`, async () => {
      await outbox.append([entry('a1', 'alice')], MAX, now);
      await outbox.append([entry('a2', 'alice')], MAX, now);
      const [lapsed] = await outbox.claim(10, 50, now, 0);
      const [holder] = await outbox.claim(10, LEASE, now + 50, 0);
      expect(holder).to.include({ id: 'a1', attempts: 2 });
      const before = await outbox.stats();

      expect(await outbox.settle(lapsed!, settlement, now + 60)).to.equal(false);
      expect(await outbox.stats()).to.deep.equal(before);
      expect(await outbox.deadLetters(10)).to.deep.equal([]);
      // Still leased to the holder: neither the entry nor the one after it is handed out.
      expect(await outbox.claim(10, LEASE, now + 70, 0)).to.deep.equal([]);

      expect(await outbox.settle(holder!, { outcome: 'delivered' }, now + 80)).to.equal(true);
      const [next] = await outbox.claim(10, LEASE, now + 80, 0);
      expect(next).to.include({ id: 'a2', attempts: 1 });
      // Nor does it touch the stream's next entry once its own is gone.
      expect(await outbox.settle(lapsed!, settlement, now + 90)).to.equal(false);
      expect(await outbox.claim(10, LEASE, now + 90, 0)).to.deep.equal([]);
      expect(await outbox.settle(next!, { outcome: 'delivered' }, now + 100)).to.equal(true);
      expect(await outbox.deadLetters(10)).to.deep.equal([]);
      expect((await outbox.stats()).subscriptions['crm'] ?? { pending: 0, dead: 0 }).to.include({
        pending: 0,
        dead: 0,
      });
    });
  }

  it('gives each entry to one of many claims made at once', async () => {
    const subjects = Array.from({ length: 20 }, (_, i) => `user-${i}`);
    for (const subject of subjects) await outbox.append([entry(`e-${subject}`, subject)], MAX, now);
    const claims = await Promise.all(Array.from({ length: 8 }, () => outbox.claim(5, LEASE, now, 0)));
    const ids = claims.flat().map((e) => e.id);
    expect(ids).to.have.length(new Set(ids).size);
    expect(new Set(ids).size).to.be.at.most(20);
    const rest = await outbox.claim(100, LEASE, now, 0);
    expect([...ids, ...rest.map((e) => e.id)].sort()).to.deep.equal(subjects.map((s) => `e-${s}`).sort());
  });

  it('hands out an entry appended while the one before it is settled, whichever comes first', async () => {
    for (let i = 0; i < 40; i++) {
      const subject = `racer-${i}`;
      await outbox.append([entry(`${subject}-1`, subject)], MAX, now);
      const [first] = await outbox.claim(10, LEASE, now, 0);
      expect(first).to.include({ id: `${subject}-1` });
      const [settled] = await Promise.all([
        outbox.settle(first!, i % 2 ? { outcome: 'delivered' } : { outcome: 'dead', reason: 'attempts' }, now),
        outbox.append([entry(`${subject}-2`, subject)], MAX, now),
      ]);
      expect(settled).to.equal(true);
      const [second, ...others] = await outbox.claim(10, LEASE, now, 0);
      expect(others).to.deep.equal([]);
      expect(second, `round ${i}`).to.include({ id: `${subject}-2` });
      expect(await outbox.settle(second!, { outcome: 'delivered' }, now)).to.equal(true);
    }
  });

  /** Settles as the delivery loop does: together where the store can, else one by one. */
  const settleAll = (settled: readonly SettledEntry[], at: number): Promise<boolean[]> =>
    outbox.settleAll
      ? outbox.settleAll(settled, at)
      : Promise.all(settled.map(({ entry: leased, settlement }) => outbox.settle(leased, settlement, at)));

  it('settles a batch as each settlement would: delivered, dead, retried, and a lapsed lease left alone', async () => {
    // dave's entry is leased first, its lease runs out and is taken over.
    await outbox.append([entry('dave-1', 'dave')], MAX, now);
    await outbox.append([entry('dave-2', 'dave')], MAX, now);
    const [daveLapsed] = await outbox.claim(10, 50, now, 0);
    const [daveHolder] = await outbox.claim(10, LEASE, now + 50, 0);
    expect(daveHolder).to.include({ id: 'dave-1', attempts: 2 });
    for (const subject of ['alice', 'bob', 'carol']) {
      await outbox.append([entry(`${subject}-1`, subject)], MAX, now);
      await outbox.append([entry(`${subject}-2`, subject)], MAX, now);
    }
    const claimed = await outbox.claim(10, LEASE, now + 50, 0);
    const of = (id: string) => claimed.find((leased) => leased.id === id)!;
    const held = await settleAll(
      [
        { entry: of('alice-1'), settlement: { outcome: 'delivered' } },
        { entry: of('bob-1'), settlement: { outcome: 'dead', reason: 'attempts' } },
        { entry: of('carol-1'), settlement: { outcome: 'retry', at: now + 1000 } },
        { entry: daveLapsed!, settlement: { outcome: 'delivered' } },
      ],
      now + 60,
    );
    expect(held).to.deep.equal([true, true, true, false]);
    expect((await outbox.deadLetters(10)).map((letter) => letter.id)).to.deep.equal(['bob-1']);
    // alice's and bob's next entries are handed out; carol's waits for its retry; dave's is still leased.
    expect((await outbox.claim(10, LEASE, now + 70, 0)).map((leased) => leased.id)).to.have.members([
      'alice-2',
      'bob-2',
    ]);
    expect((await outbox.claim(10, LEASE, now + 1000, 0)).map((leased) => leased.id)).to.deep.equal(['carol-1']);
  });

  it('hands out the entries appended while a batch before them is settled, whichever comes first', async () => {
    for (let round = 0; round < 10; round++) {
      const subjects = Array.from({ length: 4 }, (_, i) => `racer-${round}-${i}`);
      for (const subject of subjects) await outbox.append([entry(`${subject}-1`, subject)], MAX, now);
      const claimed = await outbox.claim(10, LEASE, now, 0);
      expect(claimed).to.have.length(4);
      const [held] = await Promise.all([
        settleAll(
          claimed.map((leased, i) => ({
            entry: leased,
            settlement: i % 2 ? { outcome: 'delivered' } : { outcome: 'dead', reason: 'attempts' },
          })),
          now,
        ),
        ...subjects.map((subject) => outbox.append([entry(`${subject}-2`, subject)], MAX, now)),
      ]);
      expect(held).to.deep.equal([true, true, true, true]);
      const next = await outbox.claim(10, LEASE, now, 0);
      expect(
        next.map((leased) => leased.id),
        `round ${round}`,
      ).to.have.members(subjects.map((s) => `${s}-2`));
      await settleAll(
        next.map((leased) => ({ entry: leased, settlement: { outcome: 'delivered' } })),
        now,
      );
    }
  });

  it('leases no more of a subscription than its bound leaves room for, and the others still', async () => {
    for (let i = 0; i < 6; i += 1) await outbox.append([entry(`slow-${i}`, `subject-${i}`, 'slow')], MAX, now);
    await outbox.append([entry('fast-0', 'alice', 'fast')], MAX, now);
    await outbox.append([entry('fast-1', 'bob', 'fast')], MAX, now);
    const bound = (out: Record<string, number>) => ({ each: 3, out: new Map(Object.entries(out)) });
    // 'slow' has one out already: two more of it, and every due entry of 'fast'.
    const first = await outbox.claim(10, LEASE, now, 0, bound({ slow: 1 }));
    const of = (claimed: readonly { subscription: string }[], subscription: string) =>
      claimed.filter((leased) => leased.subscription === subscription).length;
    expect(of(first, 'slow')).to.equal(2);
    expect(of(first, 'fast')).to.equal(2);
    // 'slow' at its bound: nothing of it, whatever it has waiting.
    expect(await outbox.claim(10, LEASE, now, 0, bound({ slow: 3 }))).to.deep.equal([]);
    await outbox.append([entry('fast-2', 'carol', 'fast')], MAX, now);
    expect((await outbox.claim(10, LEASE, now, 0, bound({ slow: 3, fast: 2 }))).map((e) => e.id)).to.deep.equal([
      'fast-2',
    ]);
    // Room again: the rest of 'slow', up to the bound, and never more than the limit.
    expect(await outbox.claim(1, LEASE, now, 0, bound({}))).to.have.length(1);
    expect(of(await outbox.claim(10, LEASE, now, 0, bound({})), 'slow')).to.equal(3);
  });

  it('says whether a subscription has an entry waiting, a leased one included', async () => {
    const waits = (subscription: string) =>
      outbox.waits
        ? outbox.waits(subscription)
        : outbox.stats().then((stats) => (stats.subscriptions[subscription]?.pending ?? 0) > 0);
    expect(await waits('crm')).to.equal(false);
    await outbox.append([entry('e1', 'alice'), entry('m1', 'alice', 'mail')], MAX, now);
    expect(await waits('crm')).to.equal(true);
    const claimed = await outbox.claim(10, LEASE, now, 0);
    expect(await waits('crm')).to.equal(true);
    const of = (subscription: string) => claimed.find((leased) => leased.subscription === subscription)!;
    await outbox.settle(of('crm'), { outcome: 'delivered' }, now);
    await outbox.settle(of('mail'), { outcome: 'dead', reason: 'attempts' }, now);
    expect(await waits('crm')).to.equal(false);
    expect(await waits('mail')).to.equal(false);
  });

  it('retries no earlier than asked', async () => {
    await outbox.append([entry('e1', 'alice')], MAX, now);
    const [claimed] = await outbox.claim(10, LEASE, now, 0);
    expect(await outbox.settle(claimed!, { outcome: 'retry', at: now + 1000 }, now)).to.equal(true);
    expect(await outbox.claim(10, LEASE, now + 999, 0)).to.deep.equal([]);
    expect((await outbox.claim(10, LEASE, now + 1000, 0)).map((e) => e.attempts)).to.deep.equal([2]);
  });

  it('drops and counts what comes past the bound of waiting entries', async () => {
    await outbox.append([entry('e1', 'alice')], 2, now);
    await outbox.append([entry('e2', 'bob')], 2, now);
    expect(await outbox.append([entry('e3', 'carol'), entry('e3', 'carol', 'mail')], 2, now)).to.deep.equal(['crm']);
    const stats = (await outbox.stats()).subscriptions;
    expect(stats['crm']).to.deep.equal({ pending: 2, dead: 0, dropped: 1 });
    expect(stats['mail']).to.deep.equal({ pending: 1, dead: 0, dropped: 0 });
    expect((await outbox.claim(10, LEASE, now, 0)).map((e) => e.id)).to.have.members(['e1', 'e2', 'e3']);
  });

  it('bounds a subscription by its own waiting entries, whatever other subscriptions appended meanwhile', async () => {
    expect(await outbox.append([entry('a1', 'alice')], 3, now)).to.deep.equal([]);
    for (let i = 0; i < 5; i += 1) await outbox.append([entry(`m${i}`, `subject-${i}`, 'mail')], 10, now);
    expect(await outbox.append([entry('a2', 'bob')], 3, now)).to.deep.equal([]);
    expect(await outbox.append([entry('a3', 'carol')], 3, now)).to.deep.equal([]);
    expect(await outbox.append([entry('a4', 'dave')], 3, now)).to.deep.equal(['crm']);
    const first = (await outbox.claim(20, LEASE, now, 0)).find((claimed) => claimed.id === 'a1')!;
    expect(await outbox.settle(first, { outcome: 'delivered' }, now)).to.equal(true);
    expect(await outbox.append([entry('a5', 'erin')], 3, now)).to.deep.equal([]);
    expect((await outbox.stats()).subscriptions['crm']).to.deep.equal({ pending: 3, dead: 0, dropped: 1 });
  });

  it("says when each subscription's oldest waiting entry was appended, whichever stream holds it", async () => {
    expect((await outbox.stats()).oldest).to.deep.equal({});
    await outbox.append([entry('a1', 'alice')], MAX, now);
    await outbox.append([entry('b1', 'bob')], MAX, now + 5);
    await outbox.append([entry('a2', 'alice'), entry('m1', 'alice', 'mail')], MAX, now + 10);
    expect((await outbox.stats()).oldest).to.deep.equal({ crm: now, mail: now + 10 });
    const claimed = await outbox.claim(10, LEASE, now + 20, 0);
    // Leased, an entry still waits.
    expect((await outbox.stats()).oldest).to.deep.equal({ crm: now, mail: now + 10 });
    const settle = (id: string, settlement: Settlement) =>
      outbox.settle(
        claimed.find((e) => e.id === id)!,
        settlement,
        now + 30,
      );
    expect(await settle('a1', { outcome: 'delivered' })).to.equal(true);
    // alice's next entry is newer than bob's first.
    expect((await outbox.stats()).oldest).to.deep.equal({ crm: now + 5, mail: now + 10 });
    expect(await settle('b1', { outcome: 'dead', reason: 'attempts' })).to.equal(true);
    expect(await settle('m1', { outcome: 'retry', at: now + 40 })).to.equal(true);
    expect((await outbox.stats()).oldest).to.deep.equal({ crm: now + 10, mail: now + 10 });
    const [a2] = await outbox.claim(10, LEASE, now + 30, 0);
    expect(await outbox.settle(a2!, { outcome: 'delivered' }, now + 30)).to.equal(true);
    expect((await outbox.stats()).oldest).to.deep.equal({ mail: now + 10 });
  });

  it('dead-letters an entry, lets its stream move on, lists it, and forgets it after the retention', async () => {
    await outbox.append([entry('a1', 'alice')], MAX, now);
    await outbox.append([entry('a2', 'alice')], MAX, now);
    const [claimed] = await outbox.claim(10, LEASE, now, 0);
    expect(await outbox.settle(claimed!, { outcome: 'dead', reason: 'attempts' }, now + 5)).to.equal(true);
    expect((await outbox.claim(10, LEASE, now + 5, 0)).map((e) => e.id)).to.deep.equal(['a2']);
    const [letter, ...others] = await outbox.deadLetters(10);
    expect(others).to.deep.equal([]);
    expect(letter).to.include({ id: 'a1', subject: 'alice', attempts: 1, deadAt: now + 5, reason: 'attempts' });
    expect((await outbox.stats()).subscriptions['crm']).to.include({ pending: 1, dead: 1 });
    await outbox.claim(10, LEASE, now + 6, now + 6);
    expect(await outbox.deadLetters(10)).to.deep.equal([]);
  });

  it("forgets a subscription: its waiting, leased and dead entries and its drops, nothing of another's", async () => {
    await outbox.append([entry('a1', 'alice', 'gone'), entry('k1', 'alice')], MAX, now);
    await outbox.append([entry('a2', 'alice', 'gone'), entry('b1', 'bob', 'gone')], MAX, now);
    const claimed = await outbox.claim(10, LEASE, now, 0);
    expect(
      await outbox.settle(
        claimed.find((e) => e.id === 'b1')!,
        { outcome: 'dead', reason: 'x' },
        now,
      ),
    ).to.equal(true);
    expect(await outbox.append([entry('a3', 'alice', 'gone')], 2, now)).to.deep.equal(['gone']);
    expect((await outbox.stats()).subscriptions['gone']).to.deep.equal({ pending: 2, dead: 1, dropped: 1 });

    await outbox.forget('gone');
    const stats = await outbox.stats();
    expect(Object.keys(stats.subscriptions)).to.deep.equal(['crm']);
    expect(Object.keys(stats.oldest)).to.deep.equal(['crm']);
    expect(await outbox.deadLetters(10)).to.deep.equal([]);
    // The lease held on a forgotten entry settles nothing; the other subscription's entry is handed out again.
    expect(
      await outbox.settle(
        claimed.find((e) => e.id === 'a1')!,
        { outcome: 'dead', reason: 'x' },
        now,
      ),
    ).to.equal(false);
    expect((await outbox.claim(10, LEASE, now + LEASE, 0)).map((e) => e.id)).to.deep.equal(['k1']);
    expect(await outbox.append([entry('a4', 'alice', 'gone')], MAX, now)).to.deep.equal([]);
    expect((await outbox.stats()).subscriptions['gone']).to.deep.equal({ pending: 1, dead: 0, dropped: 0 });
  });
}
