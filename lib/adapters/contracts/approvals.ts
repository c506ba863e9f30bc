import type { Adapter } from 'oidc-provider';
import { consumeOnceNeed, type AtomicConsume } from './consume.js';
import { hasFunctions, type DomainContract } from './domain.js';
import { sortedIndexesNeed, type BoundedIndexes, type SortedIndexes } from './indexes.js';

/** The approvals' domain: grants and requests in bounded sorted indexes, each ended once; with the `approvals` option. */
export type ApprovalAdapter = Adapter & AtomicConsume & SortedIndexes & BoundedIndexes;

export const APPROVAL_DOMAIN: DomainContract<ApprovalAdapter> = {
  needs: [
    {
      operations: 'indexAddWithin(adds, member)',
      has: (adapter) => hasFunctions(adapter, 'indexAddWithin'),
      why: "a customer's grants and approval requests are bounded by one atomic count-and-add",
    },
    sortedIndexesNeed("a customer's grants and approval requests are listed through them"),
    consumeOnceNeed('a grant or an approval request is ended once, by an atomic consume'),
  ],
};
