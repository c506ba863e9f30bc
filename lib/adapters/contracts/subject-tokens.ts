import type { Adapter } from 'oidc-provider';
import { quotasNeed, type PrincipalQuotas } from './commit.js';
import { consumeOnceNeed, type AtomicConsume } from './consume.js';
import type { DomainContract } from './domain.js';

/** The subject tokens' domain: redeemed once, inside the session's commit on the same store, saved within quotas. */
export type SubjectTokenAdapter = Adapter & AtomicConsume & PrincipalQuotas;

export const SUBJECT_TOKEN_DOMAIN: DomainContract<SubjectTokenAdapter> = {
  needs: [
    consumeOnceNeed('subject tokens need an atomic consume to be single-use'),
    quotasNeed(
      "a subject token is saved only within its Management API client's share, counted in the same store operation",
    ),
  ],
};
