import { unavailable } from '../errors/standalone.js';
import { requestSignal, type RevocationSource } from './source.js';

/** The identity service's revocation feed, paged; each complete read replaces what was known. */
export function feedSource(uri: string | URL, timeout: number): RevocationSource {
  const feed = new URL(uri);
  let revoked = new Map<string, number>();
  return {
    async read(signal) {
      const next = new Map<string, number>();
      let cursor: string | null = null;
      do {
        const url = new URL(feed);
        if (cursor) url.searchParams.set('cursor', cursor);
        const response = await fetch(url, {
          signal: requestSignal(signal, timeout),
          headers: { accept: 'application/json' },
        });
        const hint =
          response.status === 404
            ? ': check "revocationsUri" ({sessionsPath}/revocations where the API is served)'
            : '';
        if (!response.ok) throw unavailable(`the revocation feed answered ${response.status}${hint}`);
        const page = (await response.json()) as {
          revoked?: Array<{ id?: unknown; expiresAt?: unknown }>;
          nextCursor?: unknown;
        };
        if (!Array.isArray(page.revoked)) throw unavailable('the revocation feed sent no list');
        for (const entry of page.revoked) {
          if (typeof entry.id === 'string' && typeof entry.expiresAt === 'number') next.set(entry.id, entry.expiresAt);
        }
        cursor = typeof page.nextCursor === 'string' ? page.nextCursor : null;
      } while (cursor);
      revoked = next;
    },
    isRevoked: (sessionId) => revoked.has(sessionId),
    size: () => revoked.size,
  };
}
