import { expect } from 'chai';
import type { IndexEntry } from '../../lib/adapters/contracts/indexes.js';
import { MemoryIndex } from '../../lib/adapters/memory-index.js';

/** A deterministic pseudo-random sequence, so that a failure can be replayed. */
function numbers(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state / 2147483648;
  };
}

/** The contract's order, written plainly: latest expiry first, ties by member, descending. */
function expected(live: Map<string, number>, now: number): IndexEntry[] {
  return [...live]
    .filter(([, expiresAt]) => expiresAt > now)
    .map(([member, expiresAt]) => ({ member, expiresAt }))
    .sort((a, b) => b.expiresAt - a.expiresAt || (a.member < b.member ? 1 : a.member > b.member ? -1 : 0));
}

/** Every page of `limit`, each after the last entry of the one before. */
function pages(index: MemoryIndex, limit: number, now: number): IndexEntry[] {
  const all: IndexEntry[] = [];
  for (;;) {
    const page = index.range(all[all.length - 1], limit, now);
    all.push(...page);
    if (page.length < limit) return all;
  }
}

/** Random additions, moves, removals, prunes and pages of one index, each checked against a plain sort. */
function playAgainstPlainSort(seed: number, expiryOf: (random: () => number, now: number) => number): void {
  const random = numbers(seed);
  const index = new MemoryIndex();
  const live = new Map<string, number>();
  let now = 1_000_000;
  for (let step = 0; step < 4000; step += 1) {
    const roll = random();
    const member = `m${Math.floor(random() * 600)}`;
    if (roll < 0.6) {
      const expiresAt = expiryOf(random, now);
      index.add(Object.freeze({ member, expiresAt }));
      live.set(member, expiresAt);
    } else if (roll < 0.8) {
      expect(index.remove(member)).to.equal(live.delete(member));
    } else if (roll < 0.9) {
      now += Math.floor(random() * 120_000);
      const dropped = index.prune(now);
      const expired = [...live].filter(([, expiresAt]) => expiresAt <= now);
      expect(dropped).to.equal(expired.length);
      for (const [gone] of expired) live.delete(gone);
    } else {
      const limit = 1 + Math.floor(random() * 40);
      expect(pages(index, limit, now), `step ${step}`).to.deep.equal(expected(live, now));
    }
    expect(index.size).to.equal(live.size);
    expect(index.has(member)).to.equal(live.has(member));
  }
  expect(pages(index, 7, now)).to.deep.equal(expected(live, now));
}

describe('the memory adapter: one sorted index', () => {
  it('lists, pages, moves, removes and prunes as a plain sort of its members would', () => {
    // Few expiries, interleaved, as sessions of a few lifetimes created in the same seconds.
    playAgainstPlainSort(
      7,
      (random, now) => now + [900, 3600, 60][Math.floor(random() * 3)]! * 1000 + Math.floor(random() * 3) * 1000,
    );
  });

  it('does the same with most members alone at their expiry, as the sessions of a quiet hour', () => {
    playAgainstPlainSort(13, (random, now) => now + Math.floor(random() * 2000) * 1000);
  });

  it("keeps each of a model's indexes apart when they share their members' places, an entry joining several at once or one", () => {
    const random = numbers(11);
    const places = new Map();
    const indexes = [new MemoryIndex(places), new MemoryIndex(places), new MemoryIndex(places)];
    const live = indexes.map(() => new Map<string, number>());
    let now = 1_000_000;
    for (let step = 0; step < 6000; step += 1) {
      const at = Math.floor(random() * indexes.length);
      const [index, members] = [indexes[at]!, live[at]!];
      const roll = random();
      const member = `m${Math.floor(random() * 300)}`;
      if (roll < 0.15) {
        // One entry for several indexes at once, as a commit's (one of them now and then named twice).
        const chosen = indexes.filter(() => random() < 0.6).concat(random() < 0.2 ? [index] : []);
        const expiresAt = now + 60_000 + Math.floor(random() * 3) * 1000;
        const unlisted = new Set(chosen.filter((each) => !live[indexes.indexOf(each)]!.has(member))).size;
        expect(MemoryIndex.addToAll(chosen, Object.freeze({ member, expiresAt }))).to.equal(unlisted);
        for (const each of chosen) live[indexes.indexOf(each)]!.set(member, expiresAt);
      } else if (roll < 0.6) {
        // The same member in several indexes, each with an expiry of its own.
        const expiresAt = now + [60, 900][Math.floor(random() * 2)]! * 1000 + Math.floor(random() * 3) * 1000;
        expect(index.add(Object.freeze({ member, expiresAt }))).to.equal(members.has(member));
        members.set(member, expiresAt);
      } else if (roll < 0.8) {
        expect(index.remove(member)).to.equal(members.delete(member));
      } else if (roll < 0.9) {
        now += Math.floor(random() * 120_000);
        indexes.forEach((each, n) => {
          const expired = [...live[n]!].filter(([, expiresAt]) => expiresAt <= now);
          expect(each.prune(now)).to.equal(expired.length);
          for (const [gone] of expired) live[n]!.delete(gone);
        });
      } else {
        expect(pages(index, 1 + Math.floor(random() * 40), now), `step ${step}`).to.deep.equal(expected(members, now));
      }
      indexes.forEach((each, n) => {
        expect(each.size).to.equal(live[n]!.size);
        expect(each.has(member)).to.equal(live[n]!.has(member));
      });
      expect(places.size).to.equal(new Set(live.flatMap((members) => [...members.keys()])).size);
      // A member's places name each index listing it once, and never grow past a pair for each index.
      const placed = (places.get(member) ?? []) as unknown[];
      expect(placed.filter((place) => place instanceof MemoryIndex)).to.have.length(
        live.filter((members) => members.has(member)).length,
      );
      expect(placed.length).to.be.at.most(indexes.length * 2);
    }
  });

  it('never lists a member past its expiry, pruned or not', () => {
    const index = new MemoryIndex();
    index.add({ member: 'a', expiresAt: 2000 });
    index.add({ member: 'b', expiresAt: 1000 });
    expect(index.range(undefined, 10, 1000)).to.deep.equal([{ member: 'a', expiresAt: 2000 }]);
    expect(index.range(undefined, 10, 2000)).to.deep.equal([]);
    expect(index.size).to.equal(2);
    expect(index.prune(2000)).to.equal(2);
    expect(index.size).to.equal(0);
  });

  it('takes a member that expires before those listed about as fast as one that expires last', function () {
    this.timeout(20_000);
    // 40,000 hour-long members listed; then, in turns, 15-minute ones (each sorting before every
    // one of them) and hour-long ones (each sorting last), a second's worth of each per expiry.
    const listed = 40_000;
    const inserted = 20_000;
    const time = (expiryOf: (n: number) => number): number => {
      const index = new MemoryIndex();
      for (let n = 0; n < listed; n += 1) index.add({ member: `listed-${n}`, expiresAt: 3_600_000 + n * 10 });
      const started = process.hrtime.bigint();
      for (let n = 0; n < inserted; n += 1) index.add({ member: `new-${n}`, expiresAt: expiryOf(n) });
      return Number(process.hrtime.bigint() - started);
    };
    const last = (n: number) => 4_000_000_000 + Math.floor(n / 1000) * 1000;
    const early = (n: number) => 900_000 + Math.floor(n / 1000) * 1000;
    // Warmed, then measured alternately: the lower of two runs each.
    time(last);
    time(early);
    const atTheEnd = Math.min(time(last), time(last));
    const beforeTheRest = Math.min(time(early), time(early));
    // One array in (expiresAt, member) order moved every listed member for each: over ten times slower.
    expect(beforeTheRest / atTheEnd).to.be.below(4);
  });
});
