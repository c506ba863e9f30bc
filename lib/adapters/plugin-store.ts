import { APPROVAL_DOMAIN, type ApprovalAdapter } from './contracts/approvals.js';
import { lackOf, type DomainContract } from './contracts/domain.js';
import type { AdapterSource } from '../core-options.js';
import { instantiateAdapter } from './contracts/entries.js';
import { OUTBOX_DOMAIN } from './contracts/outbox.js';
import { SESSION_DOMAIN, type SessionAdapter } from './contracts/sessions.js';
import { SSF_STREAM_DOMAIN, type SsfStreamAdapter } from './contracts/ssf.js';
import { SUBJECT_TOKEN_DOMAIN, type SubjectTokenAdapter } from './contracts/subject-tokens.js';
import { APPROVAL_MODEL, OUTBOX_MODEL, SESSION_MODEL, SSF_MODEL, SUBJECT_TOKEN_MODEL } from './models.js';
import { unfitStore } from '../errors/standalone.js';
import type { OutboxStore } from '../outbox/contract.js';

/** The guide's path from an installing project's root. */
const DEPLOYMENT_GUIDE = 'node_modules/oidc-provider-impersonation/docs/adding-to-your-deployment.md';

/** The adapters the plugin keeps its records in, one per domain. */
interface PluginStore {
  subjectTokens: SubjectTokenAdapter;
  sessions: SessionAdapter;
  /** Checked for the approvals' domain only when the deployment has the `approvals` option. */
  approvals: ApprovalAdapter;
  /** Present when the deployment has the `ssf` option. */
  ssfStreams?: SsfStreamAdapter;
  /** Present when the plugin delivers webhooks or SSF pushes. */
  outbox?: OutboxStore;
}

/** Opens the plugin's models on `source` and refuses a store lacking an enabled domain's operation, naming it. */
export function openPluginStore(
  source: AdapterSource,
  owner: 'store option' | 'provider adapter',
  /** The domains beyond subject tokens and sessions (always stored) that the deployment's options enable. */
  enabled: Record<'outbox' | 'approvals' | 'ssf', boolean>,
): PluginStore {
  const where = owner === 'store option' ? 'createImpersonation: option "store"' : "the provider's adapter";
  const remedy =
    owner === 'store option'
      ? 'use createMemoryAdapter(), createRedisAdapter() or an adapter that has them'
      : 'use createMemoryAdapter(), createRedisAdapter(), add them, or keep this adapter for the provider ' +
        'and give the plugin a store of its own (the store option)';
  const open = <Store extends object>(model: string, contract: DomainContract<Store>, checked = true): Store => {
    const adapter = instantiateAdapter(source, model);
    const lacking = checked ? lackOf(contract, adapter) : undefined;
    if (lacking) {
      throw unfitStore(
        `${where} has no ${lacking.operations}: ${lacking.why} (see ${DEPLOYMENT_GUIDE}); ${lacking.remedy ?? remedy}`,
      );
    }
    return adapter as Store;
  };
  const store: PluginStore = {
    subjectTokens: open(SUBJECT_TOKEN_MODEL, SUBJECT_TOKEN_DOMAIN),
    sessions: open(SESSION_MODEL, SESSION_DOMAIN),
    // Always opened, to read the grants a subject token was issued under; checked when the option is on.
    approvals: open(APPROVAL_MODEL, APPROVAL_DOMAIN, enabled.approvals),
  };
  if (enabled.ssf) store.ssfStreams = open(SSF_MODEL, SSF_STREAM_DOMAIN);
  if (enabled.outbox) store.outbox = open(OUTBOX_MODEL, OUTBOX_DOMAIN).outbox();
  return store;
}
