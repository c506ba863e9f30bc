import type Koa from 'koa';
import type { ApprovalPolicyInput, ResolvedApprovalOptions } from '../approvals/options.js';
import { secondsUntilRenewed, subjectTokenQuota } from '../capacity.js';
import { refusalReason } from '../config/decisions.js';
import type { ManagementCaller, ResolvedCoreOptions } from '../core-options.js';
import { deniedByPolicy, invalidInput, serviceUnavailable, unknownRecord } from '../errors.js';
import { EVENTS, type ImpersonationEvent } from '../event-types.js';
import { publish, publishRecorded } from '../events/publish.js';
import type { EventBus } from '../events/subscriber.js';
import { definedMembers, type JsonObject } from '../json.js';
import { providerConfiguration } from '../provider-internals.js';
import { storableText } from '../storable-text.js';
import { storeCall } from '../store-call.js';
import { TOKEN_EXCHANGE_GRANT } from '../token-claims.js';
import type { SubjectTokenRecord, SubjectTokenStore } from './store.js';

const BREAK_GLASS_REFUSED = "this client may not bypass the customer's approval";
const CLIENT_SUBJECT = 'userId names a client: only users are impersonated';

/** A subject token as a trusted backend asks for it (the Management API's `userId` is `subject`, `actorId` is `actor`). */
export interface SubjectTokenAsk {
  subject: string;
  context: JsonObject;
  clientId?: string;
  actor?: string;
  /** The ceiling asked of the customer. */
  scope?: string[];
  resource?: string;
  breakGlass?: { reason: string };
}

/** What the customer's approval (approvals/creation.ts) allows: issue as without it, under a grant, or wait for the customer. */
export type CustomerSay<Pending> =
  { kind: 'none' } | { kind: 'grant'; grant: { id: string } } | { kind: 'pending'; request: Pending };

export interface SubjectTokenCreation<Pending> {
  bus: EventBus;
  options: Pick<ResolvedCoreOptions, 'canImpersonate' | 'maxSubjectTokensPerClient' | 'subjectTokenTTL'> & {
    approvals?: Pick<ResolvedApprovalOptions, 'breakGlassClients'> | undefined;
  };
  store: SubjectTokenStore;
  /** The customer's say, when the deployment has the customer in the loop (the `approvals` option). */
  approve?: ((ask: ApprovalPolicyInput, ctx: Koa.Context | undefined) => Promise<CustomerSay<Pending>>) | undefined;
}

/** Waiting for the customer, over the caller's share (until `retryAfter` seconds from now), or issued. */
export type SubjectTokenOutcome<Pending> =
  { kind: 'pending'; request: Pending } | { kind: 'spent'; max: number; retryAfter: number } | { kind: 'created' };

/**
 * Issues a subject token after the policy and the customer's approval, charged to the caller's share;
 * `issued` answers before the creation is recorded, and a token whose record fails is withdrawn.
 */
export async function createSubjectToken<Pending>(
  deps: SubjectTokenCreation<Pending>,
  caller: ManagementCaller,
  ask: SubjectTokenAsk,
  ctx: Koa.Context | undefined,
  issued: (token: { value: string; record: SubjectTokenRecord }) => void,
): Promise<SubjectTokenOutcome<Pending>> {
  const { bus, options, store } = deps;
  const { provider } = bus;
  const { breakGlass, scope, resource, ...named } = ask;
  const { clientId } = named;
  // Only the clients the deployment names may bypass the customer; an attempt by another is recorded.
  if (breakGlass && !options.approvals?.breakGlassClients.includes(caller.clientId)) {
    await publish(bus, creationRefused(ask, caller, BREAK_GLASS_REFUSED), ctx);
    throw deniedByPolicy(BREAK_GLASS_REFUSED);
  }

  const account = await storeCall(() => providerConfiguration(provider).findAccount(ctx as never, ask.subject));
  if (!account) throw unknownRecord('user_not_found', 'no user has this userId');
  if (clientId !== undefined) {
    const client = await storeCall(() => provider.Client.find(clientId));
    if (!client?.grantTypeAllowed(TOKEN_EXCHANGE_GRANT)) {
      throw invalidInput('clientId does not name a client allowed to use token exchange');
    }
  }

  // A client is no user, whatever findAccount answers: a token naming one in `sub` would read as its own.
  const refused = (await storeCall(() => provider.Client.find(ask.subject)))
    ? CLIENT_SUBJECT
    : options.canImpersonate &&
      refusalReason(
        await options.canImpersonate({
          subject: ask.subject,
          account,
          caller,
          context: ask.context,
          ...definedMembers({ actor: ask.actor, clientId, breakGlass: breakGlass && { ...breakGlass } }),
        }),
        'this user may not be impersonated',
      );
  if (refused) {
    // The policy's words are recorded as given, but always in a storable form.
    await publish(bus, creationRefused(ask, caller, storableText(refused)), ctx);
    throw deniedByPolicy(refused);
  }

  // The customer's say, unless the caller may and does bypass it (break-glass).
  let accessGrantId: string | undefined;
  if (deps.approve && !breakGlass) {
    const approval = await deps.approve({ ...named, account, caller, ...definedMembers({ resource, scope }) }, ctx);
    if (approval.kind === 'pending') return approval;
    if (approval.kind === 'grant') accessGrantId = approval.grant.id;
  }

  const quota = subjectTokenQuota(caller.clientId, options.maxSubjectTokensPerClient);
  const asked = { ...named, ...definedMembers({ accessGrantId, breakGlass }), createdBy: caller.clientId };
  const saved = await storeCall(() => store.create({ ...asked, ttl: options.subjectTokenTTL }, quota));
  if (!saved) return { kind: 'spent', max: quota.max, retryAfter: secondsUntilRenewed(quota) };
  const { record } = saved;
  const token = {
    subjectTokenId: record.id,
    subject: record.subject,
    createdBy: record.createdBy,
    context: record.context,
    expiresAt: record.exp,
    ...definedMembers({ clientId: record.clientId, actor: record.actor }),
  };
  const created = { name: EVENTS.subjectTokenCreated, ...token, ...definedMembers({ accessGrantId }) };
  const emergency = breakGlass && { name: EVENTS.breakGlassUsed, ...token, reason: breakGlass.reason };
  // No subject token without its record; the creation is recorded before the bypass.
  issued(saved);
  try {
    await publishRecorded(bus, emergency ? [created, emergency] : [created], ctx);
  } catch (error) {
    await store.withdraw(record.id).catch(() => {});
    throw serviceUnavailable('the audit trail cannot be written; no subject token was issued', error);
  }
  return { kind: 'created' };
}

/** A creation refused (by the policy, or a break-glass from a client not named), as the trail records it. */
function creationRefused(
  ask: SubjectTokenAsk,
  caller: ManagementCaller,
  reason: string,
): ImpersonationEvent<typeof EVENTS.subjectTokenRefused> {
  return {
    name: EVENTS.subjectTokenRefused,
    subject: ask.subject,
    createdBy: caller.clientId,
    context: ask.context,
    ...definedMembers({ clientId: ask.clientId, actor: ask.actor }),
    error: 'access_denied',
    reason,
  };
}
