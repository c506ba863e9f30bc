import type { Adapter } from 'oidc-provider';
import { quotasNeed, type AtomicCommit, type PrincipalQuotas } from './commit.js';
import { consumeOnceNeed, type AtomicConsume } from './consume.js';
import { hasFunctions, type DomainContract } from './domain.js';
import { sortedIndexesNeed, type SortedIndexes } from './indexes.js';

/** The sessions' domain: sorted indexes, ended once, written by the exchange's one commit and within quotas. */
export type SessionAdapter = Adapter & AtomicConsume & SortedIndexes & AtomicCommit & PrincipalQuotas;

export const SESSION_DOMAIN: DomainContract<SessionAdapter> = {
  needs: [
    sortedIndexesNeed('impersonation sessions are listed and revoked through them'),
    consumeOnceNeed('an impersonation session is ended once, by an atomic consume'),
    {
      operations: 'commitOnce(write) and releaseConsumed(entry, by)',
      has: (adapter) => hasFunctions(adapter, 'commitOnce', 'releaseConsumed'),
      why:
        'an exchange redeems its subject token and lists its session in one store operation, ' +
        'and gives the token back when the trail cannot record it',
    },
    quotasNeed(
      "a delegation's session is written only within the bounds of its user, client and subject token, " +
        'counted in the same store operation',
    ),
  ],
};
