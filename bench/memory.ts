/**
 * Heap per outstanding subject token in the memory adapter, and what happens at
 * its bound. Run with --expose-gc (bench/run.ts spawns it so):
 *
 *   node --expose-gc build/bench/memory.js [--count 100000] [--json]
 *
 * 1. Fills a createMemoryAdapter() at its default bound (100,000 entries) with
 *    `count` subject tokens through SubjectTokenStore, as the Management API
 *    would, and reports the growth of the V8 heap and of ArrayBuffer memory,
 *    measured from before the adapter was created, so what the empty adapter
 *    takes counts too.
 * 2. Creates 1% more than the bound: subject tokens are never evicted while
 *    unexpired, so every extra one is refused (503 temporarily_unavailable,
 *    counted in stats().refusedFull) and the oldest stays redeemable (the
 *    bench checks that it is still "valid").
 */
import { createMemoryAdapter, SUBJECT_TOKEN_MODEL, type MemoryAdapterClass } from '../lib/index.js';
import { SubjectTokenStore } from '../lib/subject-tokens/store.js';
import { subjectTokenQuota } from '../lib/capacity.js';

/** The creator's share, never spent here: the bench measures the store's own bound. */
const SHARE = subjectTokenQuota('impersonation-backend', Number.MAX_SAFE_INTEGER);

export interface MemoryResult {
  count: number;
  max: number;
  heapBytes: number;
  arrayBufferBytes: number;
  /** Heap plus ArrayBuffer growth, per token: what the target (≤ 1 KiB) is checked against. */
  bytesPerToken: number;
  heapBytesPerToken: number;
  /** Of the growth, what the empty adapter took, per token. */
  preallocatedPerToken: number;
  createsPerSecond: number;
  overflow: number;
  /** Creations refused because the bound was full of unexpired tokens. */
  refusedWhenFull: number;
  evictedUnexpired: number;
  onEvictCalls: number;
  oldestTokenState: string;
}

const gc = (globalThis as { gc?: () => void }).gc;

function settle(): NodeJS.MemoryUsage {
  // Several passes: weak callbacks and finalizers free more on the next one.
  for (let pass = 0; pass < 4; pass += 1) gc!();
  return process.memoryUsage();
}

export async function measureMemory(count: number): Promise<MemoryResult> {
  if (!gc) throw new Error('run with node --expose-gc');
  const max = count;
  let evictions = 0;

  const before = settle();
  // A subject token takes two entries: its record and the pointer from its public id; its creator's share, one.
  const Adapter: MemoryAdapterClass = createMemoryAdapter({
    max: max * 2 + 1,
    onEvict: () => {
      evictions += 1;
    },
  });
  const store = new SubjectTokenStore(new Adapter(SUBJECT_TOKEN_MODEL));
  const empty = settle();

  const { first, createsPerSecond } = await fill(store, count);
  const after = settle();

  const heapBytes = after.heapUsed - before.heapUsed;
  const arrayBufferBytes = after.arrayBuffers - before.arrayBuffers;
  const preallocated = empty.heapUsed - before.heapUsed + (empty.arrayBuffers - before.arrayBuffers);

  const { overflow, refusedWhenFull } = await overfill(store, count);
  const oldestTokenState = (await store.find(first)).state;

  return {
    count,
    max,
    heapBytes,
    arrayBufferBytes,
    bytesPerToken: (heapBytes + arrayBufferBytes) / count,
    heapBytesPerToken: heapBytes / count,
    preallocatedPerToken: preallocated / count,
    createsPerSecond,
    overflow,
    refusedWhenFull,
    evictedUnexpired: Adapter.stats().evictedUnexpired[SUBJECT_TOKEN_MODEL] ?? 0,
    onEvictCalls: evictions,
    oldestTokenState,
  };
}

/** `count` subject tokens created as the Management API creates them; the first one's value and the rate. */
async function fill(store: SubjectTokenStore, count: number): Promise<{ first: string; createsPerSecond: number }> {
  let first = '';
  const started = performance.now();
  for (let i = 0; i < count; i += 1) {
    const { value } = (await store.create(
      {
        subject: `user-${i % 5000}`,
        context: { ticketId: `T-${100000 + i}`, reason: 'checkout fails' },
        createdBy: 'impersonation-backend',
        ttl: 60,
      },
      SHARE,
    ))!;
    if (i === 0) first = value;
  }
  return { first, createsPerSecond: count / ((performance.now() - started) / 1000) };
}

/** The bound: 1% more tokens than fit. None is made room for; each is refused with a 503. */
async function overfill(
  store: SubjectTokenStore,
  count: number,
): Promise<{ overflow: number; refusedWhenFull: number }> {
  const overflow = Math.max(1, Math.ceil(count / 100));
  let refusedWhenFull = 0;
  for (let i = 0; i < overflow; i += 1) {
    try {
      await store.create(
        { subject: 'bob', context: { ticketId: `T-overflow-${i}` }, createdBy: 'impersonation-backend', ttl: 60 },
        SHARE,
      );
    } catch (error) {
      if ((error as { status?: number }).status !== 503) throw error;
      refusedWhenFull += 1;
    }
  }
  return { overflow, refusedWhenFull };
}

export function describeMemory(result: MemoryResult): string[] {
  const lines = [
    `memory adapter: ${result.count.toLocaleString('en')} outstanding subject tokens (max ${result.max.toLocaleString('en')}): ` +
      `heap +${mib(result.heapBytes)}, ArrayBuffers +${mib(result.arrayBufferBytes)}; ` +
      `${Math.round(result.bytesPerToken)} B per token (${Math.round(result.heapBytesPerToken)} B of V8 heap; ` +
      `${Math.max(0, Math.round(result.preallocatedPerToken))} B of it the LRU's preallocated slots); ` +
      `${Math.round(result.createsPerSecond).toLocaleString('en')} store.create()/s in-process`,
    `memory adapter at its bound: ${result.overflow.toLocaleString('en')} creations beyond max=${result.max.toLocaleString('en')} ` +
      `-> ${result.refusedWhenFull} refused (503), evictedUnexpired.SubjectToken=${result.evictedUnexpired}, ` +
      `onEvict called ${result.onEvictCalls} times; the oldest token still finds "${result.oldestTokenState}"`,
  ];
  if (result.evictedUnexpired > 0 || result.oldestTokenState !== 'valid') {
    lines.push(
      `WARNING: the memory adapter lost ${result.evictedUnexpired} unexpired subject tokens at its bound (max=${result.max}).`,
    );
  }
  return lines;
}

function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

// Run directly: node --expose-gc build/bench/memory.js [--count N] [--json]
if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  const countIndex = process.argv.indexOf('--count');
  const count = countIndex > 0 ? Number(process.argv[countIndex + 1]) : 100_000;
  if (!Number.isSafeInteger(count) || count < 100) throw new TypeError('--count must be an integer >= 100');
  const result = await measureMemory(count);
  if (process.argv.includes('--json')) console.log(JSON.stringify(result));
  else for (const line of describeMemory(result)) console.log(line);
}
