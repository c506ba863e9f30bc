// Run by memory-session-heap.test.ts under node --expose-gc: prints one JSON line of what it measured.
import { createMemoryAdapter } from '../../lib/adapters/memory.js';
import { SESSION_MODEL, SessionStore } from '../../lib/sessions/store.js';
import type { SessionRecord } from '../../lib/sessions/record.js';

const gc = (globalThis as { gc?: () => void }).gc!;
const SESSIONS = 20_000;

/** Sessions as a quiet deployment commits them: each its own second of expiry, one actor, its Grant and sign-in. */
async function retainedPerSession(): Promise<number> {
  const Adapter = createMemoryAdapter();
  const store = new SessionStore(new Adapter(SESSION_MODEL));
  const now = Math.floor(Date.now() / 1000);
  const ids = Array.from({ length: SESSIONS }, (_, n) => `imp_${String(n).padStart(22, '0')}`);
  gc();
  const before = process.memoryUsage().heapUsed;
  for (const [n, id] of ids.entries()) {
    const record: SessionRecord = {
      id,
      subject: `customer-${n % 1000}`,
      actor: 'alice',
      clientId: 'console',
      resource: 'https://api.example',
      scope: ['read'],
      context: {},
      subjectTokenId: 'stid_1',
      accessTokenId: 'jti',
      createdAt: now,
      expiresAt: now + 900 + n,
      actorGrantId: 'grant-alice',
      actorSessionUid: 'sign-in-alice',
    };
    const { outcome } = await store.commit(record, undefined);
    if (outcome !== 'committed') throw new Error(outcome);
  }
  gc();
  const bytes = (process.memoryUsage().heapUsed - before) / SESSIONS;
  // The store and what it holds stay reachable until measured.
  if ((await store.find(ids[0]!)) === undefined) throw new Error('the first session is gone');
  return bytes;
}

process.stdout.write(`${JSON.stringify({ bytes: await retainedPerSession() })}\n`);
