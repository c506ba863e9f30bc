import type { KoaContextWithOIDC } from 'oidc-provider';
import { publish } from '../events/publish.js';
import { EVENTS, type ImpersonationEvent } from '../event-types.js';
import type { EventBus } from '../events/subscriber.js';
import { PrincipalQuotaReached } from '../errors.js';
import type { SessionRecord } from '../sessions/record.js';
import { definedMembers } from '../json.js';
import { storableText } from '../storable-text.js';
import { keptUntil, type SubjectTokenRecord } from '../subject-tokens/store.js';
import type { RefusalBudget } from './refusals.js';

/** What an exchange has established so far; the event that reports it is built from this alone. */
export interface ExchangeProgress {
  /** An impersonation's subject token, once found. */
  subjectToken?: SubjectTokenRecord;
  /** A delegation's subject token: its type, its non-secret name, its expiry and subject, once verified. */
  subjectTokenType?: string;
  subjectTokenId?: string;
  subject?: string;
  /** The session the delegated token belongs to, and, under an impersonation, when that one expires. */
  parentSessionId?: string;
  underImpersonation?: { parentExpiresAt: number };
  depth?: number;
  resource?: string;
  scope?: readonly string[];
  /** The acting user (or client). */
  actor?: string;
  session?: SessionRecord;
}

/** An impersonation's issuance, as listeners and the trail get it; built once the session names its token. */
export function exchangeSucceeded(
  clientId: string,
  record: SubjectTokenRecord,
  session: SessionRecord,
): ImpersonationEvent<typeof EVENTS.exchangeSucceeded> {
  return {
    name: EVENTS.exchangeSucceeded,
    clientId,
    subjectTokenId: record.id,
    subject: record.subject,
    createdBy: record.createdBy,
    context: record.context,
    resource: session.resource,
    scope: session.scope.join(' '),
    sessionId: session.id,
    accessTokenId: session.accessTokenId,
    expiresAt: session.expiresAt,
    ...definedMembers({ actor: session.actor, accessGrantId: record.accessGrantId }),
  };
}

export function delegationSucceeded(
  session: SessionRecord,
  subjectTokenType: string,
  depth: number,
): ImpersonationEvent<typeof EVENTS.delegationSucceeded> {
  return {
    name: EVENTS.delegationSucceeded,
    sessionId: session.id,
    subject: session.subject,
    actor: session.actor!,
    clientId: session.clientId,
    resource: session.resource,
    scope: session.scope.join(' '),
    subjectTokenId: session.subjectTokenId,
    subjectTokenType: storableText(subjectTokenType),
    accessTokenId: session.accessTokenId,
    expiresAt: session.expiresAt,
    depth,
    ...definedMembers({ parentSessionId: session.parentSessionId }),
  };
}

/** What every refusal says: the client, the error and its description, in a form every store can hold. */
function refusal(ctx: KoaContextWithOIDC, error: unknown) {
  const described = error as { error?: string; error_description?: string };
  return {
    clientId: ctx.oidc.client!.clientId,
    error: described.error ?? 'server_error',
    reason: storableText(described.error_description ?? 'internal error'),
  };
}

/** An impersonation's refusal names what it had established; on the trail within its budget (Invariant 25). */
export async function reportImpersonationRefusal(
  ctx: KoaContextWithOIDC,
  bus: EventBus,
  budget: RefusalBudget,
  progress: ExchangeProgress,
  error: unknown,
): Promise<void> {
  const { subjectToken: record, session } = progress;
  const event: ImpersonationEvent<typeof EVENTS.exchangeRefused> = {
    name: EVENTS.exchangeRefused,
    ...refusal(ctx, error),
    ...definedMembers({
      subjectTokenId: record?.id,
      subject: record?.subject,
      createdBy: record?.createdBy,
      context: record?.context,
      accessGrantId: record?.accessGrantId,
      actor: progress.actor ?? record?.actor,
      resource: progress.resource,
      scope: progress.scope?.join(' '),
      sessionId: session?.id,
    }),
  };
  const recorded = record !== undefined && budget.take(record.id, keptUntil(record));
  await publish(bus, event, ctx, { record: recorded });
}

/** A delegation's refusal: on the trail only under an impersonation, counted per session (Invariant 25). */
export async function reportDelegationRefusal(
  ctx: KoaContextWithOIDC,
  bus: EventBus,
  budget: RefusalBudget,
  progress: ExchangeProgress,
  error: unknown,
): Promise<void> {
  const event: ImpersonationEvent<typeof EVENTS.delegationRefused> = {
    name: EVENTS.delegationRefused,
    ...refusal(ctx, error),
    ...definedMembers({
      subjectTokenType: progress.subjectTokenType === undefined ? undefined : storableText(progress.subjectTokenType),
      subjectTokenId: progress.subjectTokenId,
      subject: progress.subject,
      actor: progress.actor,
      resource: progress.resource,
      scope: progress.scope?.join(' '),
      parentSessionId: progress.parentSessionId,
      depth: progress.depth,
    }),
  };
  const recorded =
    !(error instanceof PrincipalQuotaReached) &&
    progress.underImpersonation !== undefined &&
    progress.parentSessionId !== undefined &&
    budget.take(progress.parentSessionId, progress.underImpersonation.parentExpiresAt * 1000);
  await publish(bus, event, ctx, { record: recorded });
}
