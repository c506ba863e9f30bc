import type { Adapter } from 'oidc-provider';
import { consumeOnceNeed, type AtomicConsume } from './consume.js';
import type { DomainContract } from './domain.js';

/**
 * The subject tokens' domain (`ist_…`): each is redeemed once, by
 * `consumeOnce`; an exchange redeems it inside the session's commit
 * (`commitOnce`, the sessions' domain), on the same store.
 */
export type SubjectTokenAdapter = Adapter & AtomicConsume;

export const SUBJECT_TOKEN_DOMAIN: DomainContract<SubjectTokenAdapter> = {
  domain: 'subject tokens',
  needs: [consumeOnceNeed('subject tokens need an atomic consume to be single-use')],
};
