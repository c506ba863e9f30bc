import type { Adapter } from 'oidc-provider';
import { hasPrincipalQuotas, type PrincipalQuotas } from './commit.js';
import { consumeOnceNeed, type AtomicConsume } from './consume.js';
import type { DomainContract } from './domain.js';

/**
 * The subject tokens' domain (`ist_…`): each is redeemed once, by
 * `consumeOnce`; an exchange redeems it inside the session's commit
 * (`commitOnce`, the sessions' domain), on the same store; each is saved
 * within its creator's share (`saveWithinQuotas`).
 */
export type SubjectTokenAdapter = Adapter & AtomicConsume & PrincipalQuotas;

export const SUBJECT_TOKEN_DOMAIN: DomainContract<SubjectTokenAdapter> = {
  domain: 'subject tokens',
  needs: [
    consumeOnceNeed('subject tokens need an atomic consume to be single-use'),
    {
      operations: 'saveWithinQuotas(write)',
      has: hasPrincipalQuotas,
      why: "a subject token is saved only within its Management API client's share, counted in the same store operation",
    },
  ],
};
