import { LRUCache } from 'lru-cache';
import type { Adapter, AdapterPayload } from 'oidc-provider';
import type { AtomicConsume } from './contract.js';

export interface MemoryAdapterOptions {
  /** Most entries kept across all models; the least recently used go first. Default 100,000. */
  max?: number;
  /**
   * Called when an unexpired entry is pushed out by the bound. For a subject
   * token this means a token that was handed out can no longer be redeemed.
   */
  onEvict?: (model: string, id: string) => void;
}

export interface MemoryAdapterStats {
  /** Entries currently held. */
  size: number;
  /** Unexpired entries pushed out because `max` was reached, by model name. */
  evictedUnexpired: Record<string, number>;
}

export interface MemoryAdapterClass {
  new (name: string): Adapter & AtomicConsume;
  /** A snapshot of the shared store's size and evictions. */
  stats(): MemoryAdapterStats;
  /** Drops every entry (tests and demos). */
  clear(): void;
}

const DEFAULT_MAX = 100_000;

/**
 * An entry as kept: the payload after a JSON round trip, so that it holds what
 * the Redis adapter would give back (no `undefined`, no Date, nothing shared
 * with the caller), and that nobody else ever holds. Every find returns a copy:
 * oidc-provider changes the objects it loads. `consumed` lives beside it.
 */
interface Entry {
  payload: JsonPayload;
  exp: number | undefined;
  consumed?: unknown;
}

type JsonValue = string | number | boolean | null | JsonValue[] | JsonPayload;
interface JsonPayload { [key: string]: JsonValue }

/** The models revokeByGrantId removes, as in oidc-provider's own adapter (never an Interaction or Session). */
const GRANTABLE = new Set(['AccessToken', 'AuthorizationCode', 'RefreshToken', 'DeviceCode', 'BackchannelAuthenticationRequest']);

/**
 * An oidc-provider adapter kept in this process, bounded and TTL-aware, with
 * the atomic `consumeOnce` the subject-token store needs. Every model shares
 * one LRU, so the bound is a bound on the process. One instance per provider:
 * several processes need a shared store (see the Redis adapter).
 */
export function createMemoryAdapter(options: MemoryAdapterOptions = {}): MemoryAdapterClass {
  const max = options.max ?? DEFAULT_MAX;
  if (!Number.isSafeInteger(max) || max < 1) {
    throw new TypeError('createMemoryAdapter: max must be a positive integer');
  }
  const evictedUnexpired: Record<string, number> = {};
  const storage: LRUCache<string, Entry | string[] | string> = new LRUCache({
    max,
    ttlAutopurge: false,
    // Read the clock on each check; the default caches it for 1 ms with a timer armed every millisecond.
    ttlResolution: 0,
    dispose(value, key, reason) {
      if (reason !== 'evict' || isExpired(value)) return;
      const separator = key.indexOf(':');
      const model = key.slice(0, separator);
      // Index entries (grant, uid, user code) carry no secret state of their own.
      if (model === 'grant' || model === 'uid' || model === 'userCode') return;
      evictedUnexpired[model] = (evictedUnexpired[model] ?? 0) + 1;
      options.onEvict?.(model, key.slice(separator + 1));
    },
  });

  class MemoryAdapter implements Adapter, AtomicConsume {
    readonly #name: string;

    constructor(name: string) {
      this.#name = name;
    }

    static stats(): MemoryAdapterStats {
      return { size: storage.size, evictedUnexpired: { ...evictedUnexpired } };
    }

    static clear(): void {
      storage.clear();
    }

    #key(id: string): string {
      return `${this.#name}:${id}`;
    }

    async upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void> {
      const key = this.#key(id);
      const ttl = expiresIn ? expiresIn * 1000 : undefined;
      if (payload.grantId && GRANTABLE.has(this.#name)) {
        const grantKey = `grant:${payload.grantId}`;
        const keys = storage.get(grantKey);
        const list = Array.isArray(keys) ? keys : [];
        list.push(key);
        // The index must outlive every entry it lists, or revokeByGrantId would miss live tokens.
        const remaining = storage.getRemainingTTL(grantKey);
        const indexTtl = ttl === undefined || remaining === Infinity ? undefined : Math.max(ttl, remaining);
        storage.set(grantKey, list, indexTtl === undefined ? {} : { ttl: indexTtl });
      }
      if (payload.userCode) {
        storage.set(`userCode:${payload.userCode}`, id, { ttl });
      }
      if (payload.uid) {
        storage.set(`uid:${payload.uid}`, id, { ttl });
      }
      const { consumed, ...stored } = payload;
      const entry: Entry = {
        payload: JSON.parse(JSON.stringify(stored)) as JsonPayload,
        exp: typeof payload.exp === 'number' ? payload.exp : undefined,
      };
      if (consumed) entry.consumed = consumed;
      storage.set(key, entry, { ttl });
    }

    async find(id: string): Promise<AdapterPayload | undefined> {
      const found = storage.get(this.#key(id));
      if (!isEntry(found)) return undefined;
      const payload = copyJson(found.payload) as AdapterPayload;
      if (found.consumed) payload.consumed = found.consumed;
      return payload;
    }

    async findByUid(uid: string): Promise<AdapterPayload | undefined> {
      const id = storage.get(`uid:${uid}`);
      return typeof id === 'string' ? this.find(id) : undefined;
    }

    async findByUserCode(userCode: string): Promise<AdapterPayload | undefined> {
      const id = storage.get(`userCode:${userCode}`);
      return typeof id === 'string' ? this.find(id) : undefined;
    }

    async consume(id: string): Promise<void> {
      await this.consumeOnce(id);
    }

    // JavaScript runs this body without yielding, so check and set are one step.
    async consumeOnce(id: string): Promise<boolean> {
      const key = this.#key(id);
      const found = storage.get(key, { updateAgeOnGet: false });
      if (!isEntry(found) || found.consumed) return false;
      found.consumed = Math.floor(Date.now() / 1000);
      return true;
    }

    async destroy(id: string): Promise<void> {
      storage.delete(this.#key(id));
    }

    async revokeByGrantId(grantId: string): Promise<void> {
      const grantKey = `grant:${grantId}`;
      const keys = storage.get(grantKey);
      if (Array.isArray(keys)) {
        for (const key of keys) storage.delete(key);
      }
      storage.delete(grantKey);
    }
  }

  return MemoryAdapter;
}

/** A deep copy of what JSON.parse made: three times faster than parsing the text again. */
function copyJson<T extends JsonValue>(value: T): T {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map(copyJson) as T;
  const copy: JsonPayload = {};
  for (const key of Object.keys(value)) {
    // JSON.parse makes "__proto__" an own property; an assignment would set the prototype instead.
    if (key === '__proto__') Object.defineProperty(copy, key, { value: copyJson(value[key]!), enumerable: true, writable: true, configurable: true });
    else copy[key] = copyJson(value[key]!);
  }
  return copy as T;
}

function isEntry(value: unknown): value is Entry {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isExpired(value: unknown): boolean {
  return isEntry(value) && value.exp !== undefined && value.exp * 1000 <= Date.now();
}
