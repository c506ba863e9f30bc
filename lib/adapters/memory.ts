import type { AdapterPayload } from 'oidc-provider';
import { optionChecks, type OptionChecks } from '../config/checks.js';
import { refuseNearMisses } from '../config/names.js';
import { invalidCall, replayShareFull, storeFull } from '../errors.js';
import { deepFreeze, jsonCopy, type JsonObject } from '../json.js';
import { entryLifetimeMs, GRANTABLE_MODELS } from './contracts/entries.js';
import type { BoundedIndexAdd, IndexEntry } from './contracts/indexes.js';
import { MemoryIndex, type Placements } from './memory-index.js';
import { Expiring } from './expiring.js';
import { OUTBOX_MODEL, PLUGIN_MODELS } from './models.js';
import { QUOTA_KIND, type CommitOutcome, type CommitWrite } from './contracts/commit.js';
import type { EveryDomainAdapter, ImpersonationAdapterClass } from './contract.js';
import { DerivedOperations } from './quotas.js';
import type { OutboxStore } from '../outbox/contract.js';
import { createMemoryOutbox, type MemoryOutbox } from '../outbox/memory.js';
import { REPLAY_MODEL, ReplayShareCounts, replayShareOf, type ReplayShare } from './replay-shares.js';

export interface MemoryAdapterOptions {
  /** Most entries of each model not named in `limits`. Default 100,000. */
  max?: number | undefined;
  /** Bounds of single models, by model name: `{ Interaction: 10_000 }`. */
  limits?: Record<string, number> | undefined;
  /** Models besides the built-in ones whose unexpired entries are never evicted: a full one refuses writes. */
  protectedModels?: string[] | undefined;
  /** Called when a model's bound pushes out an unexpired entry (a Session pushed out is a user signed out). */
  onEvict?: ((model: string, id: string) => void) | undefined;
  /** Seconds oidc-provider's own models are kept past expiry, as its memory adapter does. Default 0. */
  clockTolerance?: number | undefined;
}

export interface MemoryAdapterStats {
  /** Entries currently held, all models. */
  size: number;
  /** Entries held, and the bound, by model name. */
  models: Record<string, { size: number; max: number; protected: boolean }>;
  /** Unexpired entries pushed out because their model's bound was reached, by model name. */
  evictedUnexpired: Record<string, number>;
  /** Writes refused because a protected model was full of unexpired entries, by model name. */
  refusedFull: Record<string, number>;
}

export interface MemoryAdapterClass extends ImpersonationAdapterClass {
  /** A snapshot of the store's sizes, evictions and refusals. */
  stats(): MemoryAdapterStats;
  /** Drops every entry (tests and demos). */
  clear(): void;
  /** Seconds until `model`/`id` expires: null when it never does, undefined when it is not stored (tests, diagnostics). */
  secondsLeft(model: string, id: string): number | null | undefined;
}

const DEFAULT_MAX = 100_000;

/** oidc-provider's models and the plugin's: a limit or protection naming one nearly is a misspelling. */
const KNOWN_MODELS = [
  ...GRANTABLE_MODELS,
  ...PLUGIN_MODELS,
  ...['Session', 'Grant', 'Interaction', 'ReplayDetection', 'PushedAuthorizationRequest', 'ClientCredentials'],
  ...['Client', 'InitialAccessToken', 'RegistrationAccessToken'],
];

/** Invariant 13: what must outlive any flood: replay entries and the plugin's records (the outbox keeps none). */
const ALWAYS_PROTECTED = [REPLAY_MODEL, ...[...PLUGIN_MODELS].filter((model) => model !== OUTBOX_MODEL)];

/** How often a model's expired entries are swept out, at most: on a write, never by a timer. */
const PURGE_INTERVAL_MS = 5000;
/** A model's indexes hold at most this many members per entry its bound allows (a session sits in up to six). */
const INDEX_MEMBERS_PER_ENTRY = 8;
/** When a model is full, at most one sweep per this many milliseconds before a write evicts or is refused. */
const FULL_PURGE_INTERVAL_MS = 1000;

/** An entry as kept: the plugin's records JSON-plain and frozen (what a read hands out cannot change the store), oidc-provider's as saved. */
interface Entry {
  payload: JsonObject;
  /** A replay entry's client share, released when the entry leaves. */
  share?: ReplayShare | undefined;
}

/** One model's entries and the pointers to them (uid, user code), each bounded by the model's bound. */
interface ModelStore {
  readonly name: string;
  readonly max: number;
  readonly protected: boolean;
  /** One of the plugin's models: copied, kept to its expiry exactly. */
  readonly plugin: boolean;
  readonly entries: Expiring<Entry>;
  readonly pointers: Expiring<string>;
  /** Sorted indexes by name; never evicted, bounded in all by INDEX_MEMBERS_PER_ENTRY × `max` members. */
  readonly indexes: Map<string, MemoryIndex>;
  readonly places: Placements;
  indexedMembers: number;
  nextPurge: number;
  lastFullPurge: number;
}

/** Replaces `entry`'s payload by one with `changes`: the one handed out by earlier reads stays as it was. */
function changePayload(store: ModelStore, entry: Entry, changes: JsonObject): void {
  const payload = { ...entry.payload, ...changes };
  entry.payload = store.plugin ? Object.freeze(payload) : payload;
}

/** A grant's tokens, as `model` and `id`, for revokeByGrantId. */
type GrantMembers = Array<[model: string, id: string]>;

const check: OptionChecks = optionChecks('createMemoryAdapter');

const MEMORY_OPTION_NAMES = Object.keys({
  max: true,
  limits: true,
  protectedModels: true,
  onEvict: true,
  clockTolerance: true,
} satisfies Record<keyof MemoryAdapterOptions, true>);

/** The options' values, checked: every one names its option when refused. */
function checkedOptions(options: MemoryAdapterOptions) {
  check.known(options, MEMORY_OPTION_NAMES);
  const max = options.max ?? DEFAULT_MAX;
  check.positive('max', max);
  const limits = { ...options.limits };
  for (const [model, limit] of Object.entries(limits)) check.positive(`limits.${model}`, limit);
  const named = options.protectedModels === undefined ? [] : options.protectedModels;
  if (!Array.isArray(named) || named.some((model) => typeof model !== 'string'))
    check.fail('protectedModels', 'must be an array of model names');
  refuseNearMisses('createMemoryAdapter', 'limits', Object.keys(limits), KNOWN_MODELS);
  refuseNearMisses('createMemoryAdapter', 'protectedModels', named, KNOWN_MODELS);
  const protectedModels = new Set([...ALWAYS_PROTECTED, ...named]);
  const tolerance = options.clockTolerance ?? 0;
  if (!(Number.isFinite(tolerance) && tolerance >= 0))
    check.fail('clockTolerance', 'must be a number of seconds, 0 or more');
  return { max, limits, protectedModels, tolerance };
}

/** An oidc-provider adapter in this process, each model bounded on its own (Invariant 13); one per provider. */
export function createMemoryAdapter(options: MemoryAdapterOptions = {}): MemoryAdapterClass {
  const { max, limits, protectedModels, tolerance } = checkedOptions(options);
  const evictedUnexpired: Record<string, number> = {};
  const refusedFull: Record<string, number> = {};
  const models = new Map<string, ModelStore>();
  let replayShares: ReplayShareCounts | undefined;

  // Invariant 7: whatever pushes a grant's index out takes its tokens with it.
  const grants = new Expiring<GrantMembers>(limits['Grant'] ?? max, (members, _grantId, evicted) => {
    if (evicted) for (const [model, id] of members) models.get(model)?.entries.delete(id);
  });

  function modelStore(name: string): ModelStore {
    let store = models.get(name);
    if (store) return store;
    const bound = limits[name] ?? max;
    const isProtected = protectedModels.has(name);
    const shares = name === REPLAY_MODEL ? (replayShares = new ReplayShareCounts(bound)) : undefined;
    store = {
      name,
      max: bound,
      protected: isProtected,
      plugin: PLUGIN_MODELS.has(name),
      entries: new Expiring<Entry>(isProtected ? Infinity : bound, (value, id, evicted) => {
        if (value.share) shares?.release(value.share);
        const exp = value.payload['exp'];
        if (!evicted || (typeof exp === 'number' && exp * 1000 <= Date.now())) return;
        evictedUnexpired[name] = (evictedUnexpired[name] ?? 0) + 1;
        options.onEvict?.(name, id);
      }),
      pointers: new Expiring<string>(bound),
      indexes: new Map(),
      places: new Map(),
      indexedMembers: 0,
      nextPurge: 0,
      lastFullPurge: 0,
    };
    models.set(name, store);
    return store;
  }

  /** Makes room for new entries: sweeps expired ones when due; a protected model that is still full refuses. */
  function admit(store: ModelStore, ...ids: string[]): void {
    const now = Date.now();
    if (now >= store.nextPurge) {
      store.entries.purge();
      store.pointers.purge();
      for (const [name, index] of store.indexes) {
        store.indexedMembers -= index.prune(now);
        if (!index.size) store.indexes.delete(name);
      }
      store.nextPurge = now + PURGE_INTERVAL_MS;
    }
    // Every one of them must fit: this is a protected model's bound (its entries are never pushed out).
    const fits = () =>
      store.entries.size + ids.length <= store.max ||
      store.entries.size + ids.filter((id) => store.entries.expiresAt(id) === undefined).length <= store.max;
    if (fitsAfterPurge(store, now, fits) || !store.protected) return;
    throw refused(store, storeFull(store.name));
  }

  /** Whether `fits` holds, sweeping expired entries first when it does not (at most once per FULL_PURGE_INTERVAL_MS). */
  function fitsAfterPurge(store: ModelStore, now: number, fits: () => boolean): boolean {
    if (fits()) return true;
    if (now - store.lastFullPurge < FULL_PURGE_INTERVAL_MS) return false;
    store.lastFullPurge = now;
    store.entries.purge();
    return fits();
  }

  /** `error`, a write to `store` refused for want of room: counted. */
  function refused(store: ModelStore, error: Error): Error {
    refusedFull[store.name] = (refusedFull[store.name] ?? 0) + 1;
    return error;
  }

  /** Takes a new replay entry's client share (replay-shares.ts), sweeping when full; refuses when it stays full. */
  function admitReplay(store: ModelStore, shares: ReplayShareCounts, id: string, payload: AdapterPayload): ReplayShare {
    const share = replayShareOf(payload);
    if (store.entries.expiresAt(id) !== undefined || fitsAfterPurge(store, Date.now(), () => shares.hasRoom(share)))
      return share;
    throw refused(store, replayShareFull(share.pool === 'anonymous'));
  }

  /** How long `store` keeps an entry saved with `expiresIn`: oidc-provider's models, the clock tolerance longer. */
  function lifetimeMs(store: ModelStore, expiresIn: number | undefined): number | undefined {
    return entryLifetimeMs(typeof expiresIn === 'number' && !store.plugin ? expiresIn + tolerance : expiresIn);
  }

  /** Stores an entry the model has room for (see admit), with its grant and pointers, for `ttl` ms (forever without). */
  function put(
    store: ModelStore,
    id: string,
    payload: AdapterPayload,
    ttl?: number,
    share?: ReplayShare,
    handedOver = false,
  ): void {
    if (payload.grantId && GRANTABLE_MODELS.has(store.name)) {
      const members = grants.get(payload.grantId) ?? [];
      members.push([store.name, id]);
      // Invariant 7.
      const until = grants.expiresAt(payload.grantId) ?? 0;
      grants.set(payload.grantId, members, ttl === undefined ? undefined : Math.max(ttl, until - Date.now()));
    }
    if (payload.userCode) store.pointers.set(`userCode:${payload.userCode}`, id, ttl);
    if (payload.uid) store.pointers.set(`uid:${payload.uid}`, id, ttl);
    const stored = store.plugin ? deepFreeze((handedOver ? payload : jsonCopy(payload)) as JsonObject) : payload;
    store.entries.set(id, { payload: stored as JsonObject, share }, ttl);
    // After the set, whose overwrite released the earlier version's share.
    if (share) replayShares?.take(share);
  }

  /** The indexes `member` joins, created; refuses, changing no member, when they lack room once pruned (else `admit` prunes). */
  function roomInIndexes(store: ModelStore, names: readonly string[], member: string): MemoryIndex[] {
    const indexes = names.map((name) => {
      let index = store.indexes.get(name);
      if (!index) store.indexes.set(name, (index = new MemoryIndex(store.places)));
      return index;
    });
    const lacking = (room = store.max * INDEX_MEMBERS_PER_ENTRY - store.indexedMembers) =>
      indexes.length > room && indexes.filter((index) => !index.has(member)).length > room;
    if (lacking()) for (const index of indexes) store.indexedMembers -= index.prune(Date.now());
    if (lacking()) throw refused(store, storeFull(store.name));
    return indexes;
  }

  function insertMember(store: ModelStore, indexes: MemoryIndex[], member: string, expiresAt: number): void {
    store.indexedMembers += MemoryIndex.addToAll(indexes, Object.freeze({ member, expiresAt }));
  }

  let outbox: MemoryOutbox | undefined;

  /** The charges a quota counter took, while it lives. */
  function chargesOf(store: ModelStore, key: string): number {
    const count = store.entries.get(key)?.payload['count'];
    return typeof count === 'number' ? count : 0;
  }

  class MemoryAdapter extends DerivedOperations implements EveryDomainAdapter {
    readonly #store: ModelStore;

    constructor(name: string) {
      super();
      this.#store = modelStore(name);
    }

    /** The webhooks' outbox, one per createMemoryAdapter(): instances sharing the class share it. */
    outbox(): OutboxStore {
      return (outbox ??= createMemoryOutbox());
    }

    static stats(): MemoryAdapterStats {
      let size = 0;
      const perModel: MemoryAdapterStats['models'] = {};
      for (const store of models.values()) {
        size += store.entries.size;
        perModel[store.name] = { size: store.entries.size, max: store.max, protected: store.protected };
      }
      return { size, models: perModel, evictedUnexpired: { ...evictedUnexpired }, refusedFull: { ...refusedFull } };
    }

    static secondsLeft(model: string, id: string): number | null | undefined {
      const entries = models.get(model)?.entries;
      if (!entries?.get(id, false)) return undefined;
      const expiresAt = entries.expiresAt(id)!;
      return expiresAt === Infinity ? null : (expiresAt - Date.now()) / 1000;
    }

    static clear(): void {
      for (const store of models.values()) {
        store.entries.clear();
        store.pointers.clear();
        store.indexes.clear();
        store.places.clear();
        store.indexedMembers = 0;
      }
      grants.clear();
    }

    async upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void> {
      const store = this.#store;
      const ttl = lifetimeMs(store, expiresIn);
      if (ttl === 0) {
        // Already expired: the earlier version goes, and nothing takes a place or joins a grant.
        store.entries.delete(id);
        return;
      }
      const shares = store.name === REPLAY_MODEL ? replayShares : undefined;
      const share = shares && admitReplay(store, shares, id, payload);
      admit(store, id);
      put(store, id, payload, ttl, share);
    }

    async find(id: string): Promise<AdapterPayload | undefined> {
      return this.#read(id);
    }

    #read(id: string): AdapterPayload | undefined {
      return this.#store.entries.get(id)?.payload as AdapterPayload | undefined;
    }

    async findByUid(uid: string): Promise<AdapterPayload | undefined> {
      return this.#byPointer('uid', uid);
    }

    async findByUserCode(userCode: string): Promise<AdapterPayload | undefined> {
      return this.#byPointer('userCode', userCode);
    }

    /** The entry `kind` points to, checked against it (Invariant 8). */
    #byPointer(kind: 'uid' | 'userCode', value: string): AdapterPayload | undefined {
      const id = this.#store.pointers.get(`${kind}:${value}`);
      const entry = id === undefined ? undefined : this.#read(id);
      return entry?.[kind] === value ? entry : undefined;
    }

    // Invariant 1: no await between check and set.
    async consumeOnce(id: string): Promise<boolean> {
      const found = this.#store.entries.get(id);
      if (!found || found.payload['consumed']) return false;
      changePayload(this.#store, found, { consumed: Math.floor(Date.now() / 1000) });
      return true;
    }

    async destroy(id: string): Promise<void> {
      this.#store.entries.delete(id);
    }

    async indexAdd(names: readonly string[], member: string, expiresAt: number): Promise<void> {
      const store = this.#store;
      insertMember(store, roomInIndexes(store, names, member), member, expiresAt);
    }

    // Invariant 6: no await between count and add.
    async indexAddWithin(adds: readonly BoundedIndexAdd[], member: string): Promise<string | undefined> {
      const store = this.#store;
      const names = adds.map((add) => add.index);
      const indexes = roomInIndexes(store, names, member);
      for (const index of indexes) store.indexedMembers -= index.prune(Date.now()); // bounds count live members
      const full = adds.find((add, at) => {
        const index = indexes[at]!;
        return !index.has(member) && index.size >= add.bound;
      });
      if (full) return full.index;
      adds.forEach((add, at) => insertMember(store, [indexes[at]!], member, add.expiresAt));
      return undefined;
    }

    // Invariant 2: no await; every check comes before the first change.
    async commitOnce(commit: CommitWrite): Promise<CommitOutcome> {
      const { consume, write, indexes, expiresAt, guards, quotas = [], outbox: notes } = commit;
      const store = modelStore(write.model);
      const guard = guards.find((id) => store.entries.get(id)?.payload['ended'] !== undefined);
      if (guard !== undefined) return { outcome: 'guarded', guard };
      const consumed = consume && modelStore(consume.model).entries.get(consume.id);
      if (consume && (!consumed || consumed.payload['consumed'])) return { outcome: 'consumed' };
      const spent = quotas.find((quota) => chargesOf(store, quota.key) >= quota.max);
      if (spent) return { outcome: 'spent', key: spent.key };
      const ttl = entryLifetimeMs(write.expiresIn);
      if (ttl === undefined || ttl === 0) throw invalidCall('commitOnce', 'the entry to write needs a lifetime');
      admit(store, write.id, ...quotas.map((quota) => quota.key));
      const opened = roomInIndexes(store, indexes, write.id);
      if (consumed) changePayload(modelStore(consume!.model), consumed, { consumed: write.id });
      const now = Date.now();
      for (const quota of quotas) {
        const counter = store.entries.get(quota.key);
        // The same entry, so that the counter keeps the expiry its first charge gave it.
        if (counter) changePayload(store, counter, { count: (counter.payload['count'] as number) + 1 });
        else put(store, quota.key, { kind: QUOTA_KIND, count: 1 }, Math.max(1, quota.expiresAt - now));
      }
      // A commit's payload is the store's from then on (contracts/commit.ts): frozen as it is, not copied.
      put(store, write.id, write.payload, ttl, undefined, true);
      insertMember(store, opened, write.id, expiresAt);
      if (!notes) return { outcome: 'committed' };
      const dropped = (outbox ??= createMemoryOutbox()).appendNow(notes.entries, notes.maxPending, notes.now);
      return { outcome: 'committed', dropped };
    }

    async releaseConsumed({ model, id }: { model: string; id: string }, by: string): Promise<boolean> {
      const found = modelStore(model).entries.get(id);
      if (found?.payload['consumed'] !== by) return false;
      const { consumed: _released, ...payload } = found.payload;
      found.payload = modelStore(model).plugin ? Object.freeze(payload) : payload;
      return true;
    }

    async indexRemove(names: readonly string[], member: string): Promise<void> {
      for (const name of names) {
        const index = this.#store.indexes.get(name);
        if (!index) continue;
        if (index.remove(member)) this.#store.indexedMembers -= 1;
        if (!index.size) this.#store.indexes.delete(name);
      }
    }

    async indexRange(name: string, after: IndexEntry | undefined, limit: number): Promise<IndexEntry[]> {
      // Entries are frozen (insertMember): handed out as they are.
      return this.#store.indexes.get(name)?.range(after, limit, Date.now()) ?? [];
    }

    async revokeByGrantId(grantId: string): Promise<void> {
      const members = grants.get(grantId);
      grants.delete(grantId);
      for (const [model, id] of members ?? []) models.get(model)?.entries.delete(id);
    }
  }

  return MemoryAdapter;
}
