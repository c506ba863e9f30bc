import type { Adapter } from 'oidc-provider';
import type { DomainContract } from './domain.js';
import { sortedIndexesNeed, type SortedIndexes } from './indexes.js';

/**
 * The SSF streams' domain: the streams and the SETs awaiting a poll, listed
 * through sorted indexes. Needed only when the deployment has the `ssf`
 * option, which needs the outbox's domain too.
 */
export type SsfStreamAdapter = Adapter & SortedIndexes;

export const SSF_STREAM_DOMAIN: DomainContract<SsfStreamAdapter> = {
  domain: 'SSF streams',
  needs: [sortedIndexesNeed('SSF streams and the SETs awaiting a poll are listed through them')],
};
