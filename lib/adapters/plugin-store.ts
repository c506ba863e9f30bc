import type { AdapterSource, AtomicAdapter, BoundedIndexes, ImpersonationAdapter } from './contract.js';
import {
  hasAtomicCommit,
  hasAtomicConsume,
  hasBoundedIndexes,
  hasPrincipalQuotas,
  hasSortedIndexes,
  instantiateAdapter,
} from './contract.js';
import { APPROVAL_MODEL, OUTBOX_MODEL, SESSION_MODEL, SUBJECT_TOKEN_MODEL } from './models.js';
import { unfitStore } from '../errors/standalone.js';
import { hasOutbox, type OutboxStore } from '../outbox/contract.js';

/**
 * Where the guide is for someone who installed the package: the path from
 * their project's root, since `docs/` alone would name a folder of their own.
 */
const DEPLOYMENT_GUIDE = 'node_modules/oidc-provider-impersonation/docs/adding-to-your-deployment.md';

/** The adapters the plugin keeps its own records in: subject tokens, impersonation sessions, the customer's grants and approval requests. */
export interface PluginStore {
  subjectTokens: AtomicAdapter;
  sessions: ImpersonationAdapter;
  /** With bounded indexes too when the deployment has the `approvals` option (checked then only). */
  approvals: ImpersonationAdapter & BoundedIndexes;
  /** Present when the plugin delivers webhooks. */
  outbox?: OutboxStore;
}

export { OUTBOX_MODEL } from './models.js';

/**
 * Opens the plugin's models on `source` and refuses a store that could not
 * keep them safely: without `consumeOnce`, a subject token could be redeemed
 * twice; without sorted indexes, sessions could be neither listed nor revoked.
 * `owner` names where the store came from, for the error.
 */
export function openPluginStore(
  source: AdapterSource,
  owner: 'store option' | 'provider adapter',
  withOutbox = false,
  withApprovals = false,
): PluginStore {
  const where = owner === 'store option' ? 'createImpersonation: option "store"' : "the provider's adapter";
  const remedy =
    owner === 'store option'
      ? 'use createMemoryAdapter(), createRedisAdapter() or an adapter that has them'
      : 'use createMemoryAdapter(), createRedisAdapter(), add them, or keep this adapter for the provider ' +
        'and give the plugin a store of its own (the store option)';
  const subjectTokens = instantiateAdapter(source, SUBJECT_TOKEN_MODEL);
  if (!hasAtomicConsume(subjectTokens)) {
    throw unfitStore(
      `${where} has no consumeOnce(id): subject tokens need an atomic consume to be single-use ` +
        `(see ${DEPLOYMENT_GUIDE}); ${remedy}`,
    );
  }
  const sessions = instantiateAdapter(source, SESSION_MODEL);
  if (!hasAtomicConsume(sessions) || !hasSortedIndexes(sessions)) {
    throw unfitStore(
      `${where} has no sorted indexes (indexAdd, indexRemove, indexRange): impersonation sessions ` +
        `are listed and revoked through them (see ${DEPLOYMENT_GUIDE}); ${remedy}`,
    );
  }
  if (!hasAtomicCommit(sessions)) {
    throw unfitStore(
      `${where} has no commitOnce(write): an exchange redeems its subject token and lists its session ` +
        `in one store operation (see ${DEPLOYMENT_GUIDE}); ${remedy}`,
    );
  }
  if (!hasPrincipalQuotas(sessions)) {
    throw unfitStore(
      `${where} has no saveWithinQuotas(write): a delegation's session is written only within the ` +
        `bounds of its user, client and subject token, counted in the same store operation ` +
        `(see ${DEPLOYMENT_GUIDE}); ${remedy}`,
    );
  }
  // The same adapter source as the sessions, so it has what they were just checked for.
  const approvals = instantiateAdapter(source, APPROVAL_MODEL) as ImpersonationAdapter & BoundedIndexes;
  if (withApprovals && !hasBoundedIndexes(approvals)) {
    throw unfitStore(
      `${where} has no indexAddWithin(adds, member): a customer's grants and approval requests are bounded ` +
        `by one atomic count-and-add (see ${DEPLOYMENT_GUIDE}); ${remedy}`,
    );
  }
  if (!withOutbox) return { subjectTokens, sessions, approvals };
  const outboxAdapter = instantiateAdapter(source, OUTBOX_MODEL);
  if (!hasOutbox(outboxAdapter)) {
    throw unfitStore(
      `${where} has no outbox(): webhooks are kept in the store until delivered (see ${DEPLOYMENT_GUIDE}); ` +
        'use createMemoryAdapter(), createRedisAdapter() or createPostgresAdapter()',
    );
  }
  return { subjectTokens, sessions, approvals, outbox: outboxAdapter.outbox() };
}
