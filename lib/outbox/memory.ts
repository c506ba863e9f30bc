import { randomUUID } from 'node:crypto';
import { streamOf, type DeadLetter, type LeasedEntry, type NewOutboxEntry } from './contract.js';
import type { OutboxStats, OutboxStore } from './contract.js';

interface Waiting extends Omit<LeasedEntry, 'lease'> {
  nextAt: number;
  lease?: string;
}

/** The outbox in memory: every operation is synchronous, so instances sharing the adapter never claim twice. */
export interface MemoryOutbox extends OutboxStore {
  /** `append`, done before it returns: the memory adapter's commit appends in its one synchronous step. */
  appendNow(entries: readonly NewOutboxEntry[], maxPending: number, now: number): string[];
}

export function createMemoryOutbox(): MemoryOutbox {
  const streams = new Map<string, Waiting[]>();
  const dropped = new Map<string, number>();
  const dead = new Map<string, DeadLetter>();
  // Per subscription, its waiting entries (leased ones included) in the order appended: the first is the oldest.
  const order = new Map<string, Set<Waiting>>();

  function appendNow(entries: readonly NewOutboxEntry[], maxPending: number, now: number): string[] {
    const refused: string[] = [];
    for (const entry of entries) {
      if ((order.get(entry.subscription)?.size ?? 0) >= maxPending) {
        dropped.set(entry.subscription, (dropped.get(entry.subscription) ?? 0) + 1);
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
    }
    return refused;
  }

  return {
    appendNow,
    append: async (entries, maxPending, now) => appendNow(entries, maxPending, now),

    async claim(limit, leaseMs, now, deadBefore, bound) {
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
      return claimed;
    },

    async settle(entry, settlement, now) {
      const queue = streams.get(streamOf(entry));
      const head = queue?.[0];
      if (!queue || !head || head.id !== entry.id || head.lease !== entry.lease) return false;
      if (settlement.outcome === 'retry') {
        head.lease = undefined;
        head.leaseUntil = 0;
        head.nextAt = settlement.at;
        return true;
      }
      queue.shift();
      if (!queue.length) streams.delete(streamOf(entry));
      const appended = order.get(entry.subscription)!;
      appended.delete(head);
      if (!appended.size) order.delete(entry.subscription);
      if (settlement.outcome === 'dead') {
        const { nextAt: _nextAt, lease: _lease, leaseUntil: _leaseUntil, ...letter } = head;
        dead.set(`${head.subscription}\n${head.id}`, { ...letter, deadAt: now, reason: settlement.reason });
      }
      return true;
    },

    waits: async (subscription) => order.has(subscription),

    async stats() {
      const subscriptions: OutboxStats['subscriptions'] = {};
      const of = (name: string) => (subscriptions[name] ??= { pending: 0, dead: 0, dropped: 0 });
      const oldest: OutboxStats['oldest'] = {};
      for (const [name, appended] of order) {
        of(name).pending = appended.size;
        oldest[name] = appended.values().next().value!.createdAt;
      }
      for (const [name, count] of dropped) of(name).dropped = count;
      for (const letter of dead.values()) of(letter.subscription).dead += 1;
      return { subscriptions, oldest };
    },

    async forget(subscription) {
      for (const stream of streams.keys()) if (stream.startsWith(`${subscription}\n`)) streams.delete(stream);
      for (const [key, letter] of dead) if (letter.subscription === subscription) dead.delete(key);
      for (const counts of [dropped, order]) counts.delete(subscription);
    },

    deadLetters: async (limit) => [...dead.values()].sort((a, b) => b.deadAt - a.deadAt).slice(0, limit),
  };
}
