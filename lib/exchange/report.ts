import type { KoaContextWithOIDC } from 'oidc-provider';
import { announce, publish } from '../events/publish.js';
import { EVENTS, type ImpersonationEvent } from '../event-types.js';
import type { SessionRecord } from '../sessions/record.js';
import { storableText } from '../storable-text.js';
import { keptUntil, type SubjectTokenRecord } from '../subject-tokens/store.js';
import { RefusalBudget } from './refusals.js';

/** What an exchange has established so far; the event that reports it is built from this alone. */
export interface ExchangeProgress {
  subjectToken?: SubjectTokenRecord;
  resource?: string;
  scope?: readonly string[];
  /** The acting user, from the actor token. */
  actor?: string;
  session?: SessionRecord;
}

/** The issuance, as listeners and the trail get it; built once the session names its token. */
export function exchangeSucceeded(
  clientId: string,
  record: SubjectTokenRecord,
  session: SessionRecord,
): ImpersonationEvent<typeof EVENTS.exchangeSucceeded> {
  const event: ImpersonationEvent<typeof EVENTS.exchangeSucceeded> = {
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
  };
  if (session.actor !== undefined) event.actor = session.actor;
  if (record.accessGrantId !== undefined) event.accessGrantId = record.accessGrantId;
  return event;
}

/** A refusal names what the exchange had established when it stopped. */
function exchangeRefused(
  clientId: string,
  progress: ExchangeProgress,
  error: unknown,
): ImpersonationEvent<typeof EVENTS.exchangeRefused> {
  const described = error as { error?: string; error_description?: string };
  const event: ImpersonationEvent<typeof EVENTS.exchangeRefused> = {
    name: EVENTS.exchangeRefused,
    clientId,
    error: described.error ?? 'server_error',
    // The description may quote the request or a policy: recorded in a form every store can hold.
    reason: storableText(described.error_description ?? 'internal error'),
  };
  const { subjectToken: record, session } = progress;
  if (record) {
    event.subjectTokenId = record.id;
    event.subject = record.subject;
    event.createdBy = record.createdBy;
    event.context = record.context;
    if (record.accessGrantId !== undefined) event.accessGrantId = record.accessGrantId;
  }
  const actor = progress.actor ?? record?.actor;
  if (actor !== undefined) event.actor = actor;
  if (progress.resource !== undefined) event.resource = progress.resource;
  if (progress.scope !== undefined) event.scope = progress.scope.join(' ');
  if (session) event.sessionId = session.id;
  return event;
}

/** Reports an exchange's outcome: to listeners always, to the trail as the rules for refusals allow. */
export class ExchangeReport {
  readonly #refusals = new RefusalBudget();

  succeeded(ctx: KoaContextWithOIDC, event: ImpersonationEvent<typeof EVENTS.exchangeSucceeded>): void {
    announce(ctx.oidc.provider, event, ctx);
  }

  // Invariant 25: refusals on the trail are bounded.
  async refused(ctx: KoaContextWithOIDC, progress: ExchangeProgress, error: unknown): Promise<void> {
    const event = exchangeRefused(ctx.oidc.client!.clientId, progress, error);
    const record = progress.subjectToken;
    const recorded = record !== undefined && this.#refusals.take(record.id, keptUntil(record));
    await publish(ctx.oidc.provider, event, ctx, { record: recorded });
  }
}
