import { randomUUID } from 'node:crypto';
import { streamOf, type DeadLetter, type LeasedEntry, type NewOutboxEntry, type Settlement } from './contract.js';
import type { OutboxStats, OutboxStore } from './contract.js';

interface Waiting extends NewOutboxEntry {
  createdAt: number;
  attempts: number;
  nextAt: number;
  lease?: string;
  leaseUntil: number;
}

/** The outbox in memory: every operation is synchronous, so instances sharing the adapter never claim twice. */
export interface MemoryOutbox extends OutboxStore {
  /** `append`, done before it returns: the memory adapter's commit appends in its one synchronous step. */
  appendNow(entries: readonly NewOutboxEntry[], maxPending: number, now: number): string[];
}

export function createMemoryOutbox(): MemoryOutbox {
  const streams = new Map<string, Waiting[]>();
  const pending = new Map<string, number>();
  const dropped = new Map<string, number>();
  const dead = new Map<string, DeadLetter>();
  // Per subscription, its waiting entries in the order appended: the first is the oldest.
  const order = new Map<string, Set<Waiting>>();

  const add = (counts: Map<string, number>, key: string, by: number): void => {
    counts.set(key, (counts.get(key) ?? 0) + by);
  };

  function appendNow(entries: readonly NewOutboxEntry[], maxPending: number, now: number): string[] {
    const refused: string[] = [];
    for (const entry of entries) {
      if ((pending.get(entry.subscription) ?? 0) >= maxPending) {
        add(dropped, entry.subscription, 1);
        refused.push(entry.subscription);
        continue;
      }
      const stream = streamOf(entry);
      const queue = streams.get(stream) ?? [];
      const waiting: Waiting = { ...entry, createdAt: now, attempts: 0, nextAt: now, leaseUntil: 0 };
      queue.push(waiting);
      streams.set(stream, queue);
      const appended = order.get(entry.subscription) ?? new Set();
      appended.add(waiting);
      order.set(entry.subscription, appended);
      add(pending, entry.subscription, 1);
    }
    return refused;
  }

  return {
    appendNow,
    append(entries, maxPending, now) {
      return Promise.resolve(appendNow(entries, maxPending, now));
    },

    claim(limit, leaseMs, now, deadBefore, bound) {
      for (const [id, letter] of dead) if (letter.deadAt < deadBefore) dead.delete(id);
      const claimed: LeasedEntry[] = [];
      const out = new Map(bound?.out);
      for (const queue of streams.values()) {
        if (claimed.length >= limit) break;
        const head = queue[0];
        if (!head || head.nextAt > now || head.leaseUntil > now) continue;
        if (bound) {
          const already = out.get(head.subscription) ?? 0;
          if (already >= bound.each) continue;
          out.set(head.subscription, already + 1);
        }
        head.lease = randomUUID();
        head.leaseUntil = now + leaseMs;
        head.attempts += 1;
        const { nextAt: _nextAt, ...leased } = head;
        claimed.push({ ...leased, lease: head.lease });
      }
      return Promise.resolve(claimed);
    },

    settle(entry, settlement: Settlement, now) {
      const queue = streams.get(streamOf(entry));
      const head = queue?.[0];
      if (!queue || !head || head.id !== entry.id || head.lease !== entry.lease) return Promise.resolve(false);
      if (settlement.outcome === 'retry') {
        head.lease = undefined;
        head.leaseUntil = 0;
        head.nextAt = settlement.at;
        return Promise.resolve(true);
      }
      queue.shift();
      if (!queue.length) streams.delete(streamOf(entry));
      const appended = order.get(entry.subscription)!;
      appended.delete(head);
      if (!appended.size) order.delete(entry.subscription);
      add(pending, entry.subscription, -1);
      if (settlement.outcome === 'dead') {
        const { id, subscription, subject, body, createdAt, attempts } = head;
        const letter = { id, subscription, subject, body, createdAt, attempts, deadAt: now, reason: settlement.reason };
        dead.set(`${subscription}\n${id}`, letter);
      }
      return Promise.resolve(true);
    },

    waits(subscription) {
      return Promise.resolve((pending.get(subscription) ?? 0) > 0);
    },

    stats() {
      const subscriptions: OutboxStats['subscriptions'] = {};
      const of = (name: string) => (subscriptions[name] ??= { pending: 0, dead: 0, dropped: 0 });
      for (const [name, count] of pending) if (count) of(name).pending = count;
      for (const [name, count] of dropped) of(name).dropped = count;
      for (const letter of dead.values()) of(letter.subscription).dead += 1;
      const oldest: OutboxStats['oldest'] = {};
      for (const [name, appended] of order) {
        const first = appended.values().next().value;
        if (first) oldest[name] = first.createdAt;
      }
      return Promise.resolve({ subscriptions, oldest });
    },

    forget(subscription) {
      for (const stream of streams.keys()) if (stream.startsWith(`${subscription}\n`)) streams.delete(stream);
      for (const [key, letter] of dead) if (letter.subscription === subscription) dead.delete(key);
      for (const counts of [pending, dropped, order]) counts.delete(subscription);
      return Promise.resolve();
    },

    deadLetters(limit) {
      return Promise.resolve([...dead.values()].sort((a, b) => b.deadAt - a.deadAt).slice(0, limit));
    },
  };
}
