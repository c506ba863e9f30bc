import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Adapter, AdapterPayload } from 'oidc-provider';

/**
 * An adapter written the way most existing deployments write theirs, after
 * oidc-provider's example Redis adapter: `find`, `upsert`, `consume`,
 * `destroy` and the three lookups, each entry stored as JSON with its TTL, a
 * set of token keys per grant, and nothing atomic: `consume` sets a field on
 * whatever it finds, so find-then-consume can be won twice. Every call yields
 * to the event loop first, as a network round trip would, so that concurrent
 * requests interleave as they would against a real store.
 */
export interface TypicalAdapterClass {
  new (name: string): Adapter;
  /** How many live entries of `model` the store holds. */
  count(model: string): number;
}

const GRANTABLE = new Set([
  'AccessToken',
  'AuthorizationCode',
  'RefreshToken',
  'DeviceCode',
  'BackchannelAuthenticationRequest',
]);

interface Stored {
  json: string;
  expiresAt: number | undefined;
}

export function createTypicalAdapter(): TypicalAdapterClass {
  const entries = new Map<string, Stored>();
  const grants = new Map<string, Set<string>>();
  const pointers = new Map<string, string>();

  const live = (key: string): Stored | undefined => {
    const stored = entries.get(key);
    if (stored?.expiresAt !== undefined && stored.expiresAt <= Date.now()) {
      entries.delete(key);
      return undefined;
    }
    return stored;
  };

  return class TypicalAdapter {
    readonly name: string;

    constructor(name: string) {
      this.name = name;
    }

    static count(model: string): number {
      return [...entries.keys()].filter((key) => key.startsWith(`${model}:`) && live(key)).length;
    }

    key(id: string): string {
      return `${this.name}:${id}`;
    }

    async upsert(id: string, payload: AdapterPayload, expiresIn: number): Promise<void> {
      await nextTurn();
      const key = this.key(id);
      entries.set(key, {
        json: JSON.stringify(payload),
        expiresAt: expiresIn ? Date.now() + expiresIn * 1000 : undefined,
      });
      if (GRANTABLE.has(this.name) && payload.grantId) {
        const members = grants.get(payload.grantId) ?? new Set();
        grants.set(payload.grantId, members.add(key));
      }
      if (payload.userCode) pointers.set(`userCode:${payload.userCode}`, id);
      if (payload.uid) pointers.set(`uid:${payload.uid}`, id);
    }

    async find(id: string): Promise<AdapterPayload | undefined> {
      await nextTurn();
      const stored = live(this.key(id));
      return stored ? (JSON.parse(stored.json) as AdapterPayload) : undefined;
    }

    async findByUid(uid: string): Promise<AdapterPayload | undefined> {
      const id = pointers.get(`uid:${uid}`);
      return id === undefined ? undefined : this.find(id);
    }

    async findByUserCode(userCode: string): Promise<AdapterPayload | undefined> {
      const id = pointers.get(`userCode:${userCode}`);
      return id === undefined ? undefined : this.find(id);
    }

    /** Not compare-and-set: two callers that both found the entry unconsumed both "consume" it. */
    async consume(id: string): Promise<void> {
      await nextTurn();
      const stored = live(this.key(id));
      if (!stored) return;
      const payload = JSON.parse(stored.json) as AdapterPayload;
      stored.json = JSON.stringify({ ...payload, consumed: Math.floor(Date.now() / 1000) });
    }

    async destroy(id: string): Promise<void> {
      await nextTurn();
      entries.delete(this.key(id));
    }

    async revokeByGrantId(grantId: string): Promise<void> {
      await nextTurn();
      for (const key of grants.get(grantId) ?? []) entries.delete(key);
      grants.delete(grantId);
    }
  };
}
