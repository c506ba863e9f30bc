import type { Adapter } from 'oidc-provider';
import type { DomainContract } from './domain.js';
import { sortedIndexesNeed, type SortedIndexes } from './indexes.js';

/** The SSF streams' domain: streams and SETs awaiting a poll, in sorted indexes; with the `ssf` option. */
export type SsfStreamAdapter = Adapter & SortedIndexes;

export const SSF_STREAM_DOMAIN: DomainContract<SsfStreamAdapter> = {
  needs: [sortedIndexesNeed('SSF streams and the SETs awaiting a poll are listed through them')],
};
