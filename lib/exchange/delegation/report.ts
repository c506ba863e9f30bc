import type { KoaContextWithOIDC } from 'oidc-provider';
import { announce, publish } from '../../events/publish.js';
import { EVENTS, type ImpersonationEvent } from '../../event-types.js';
import { PrincipalQuotaReached } from '../../errors.js';
import { RefusalBudget } from '../refusals.js';
import type { SessionRecord } from '../../sessions/record.js';
import { storableText } from '../../storable-text.js';

/** What a delegation has established so far; its events are built from this alone. */
export interface DelegationProgress {
  subjectTokenType?: string;
  /** The non-secret name of the subject token, once verified. */
  subjectTokenId?: string;
  subjectExpiresAt?: number;
  subject?: string;
  actor?: string;
  resource?: string;
  scope?: readonly string[];
  parentSessionId?: string;
  /** Set, with its session's expiry, when the subject token descends from an impersonation. */
  underImpersonation?: { parentExpiresAt: number };
  depth?: number;
}

export type DelegationSucceeded = ImpersonationEvent<typeof EVENTS.delegationSucceeded>;

export function delegationSucceeded(
  session: SessionRecord,
  subjectTokenType: string,
  depth: number,
): DelegationSucceeded {
  const event: DelegationSucceeded = {
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
  };
  if (session.parentSessionId !== undefined) event.parentSessionId = session.parentSessionId;
  return event;
}

/** Refusals go to listeners, and to the trail only under an impersonation (Invariant 25). */
export class DelegationReport {
  readonly #refusals = new RefusalBudget();

  succeeded(ctx: KoaContextWithOIDC, event: DelegationSucceeded): void {
    announce(ctx.oidc.provider, event, ctx);
  }

  async refused(ctx: KoaContextWithOIDC, progress: DelegationProgress, error: unknown): Promise<void> {
    const described = error as { error?: string; error_description?: string };
    const event: ImpersonationEvent<typeof EVENTS.delegationRefused> = {
      name: EVENTS.delegationRefused,
      clientId: ctx.oidc.client!.clientId,
      error: described.error ?? 'server_error',
      reason: storableText(described.error_description ?? 'internal error'),
    };
    if (progress.subjectTokenType !== undefined) event.subjectTokenType = storableText(progress.subjectTokenType);
    if (progress.subjectTokenId !== undefined) event.subjectTokenId = progress.subjectTokenId;
    if (progress.subject !== undefined) event.subject = progress.subject;
    if (progress.actor !== undefined) event.actor = progress.actor;
    if (progress.resource !== undefined) event.resource = progress.resource;
    if (progress.scope !== undefined) event.scope = progress.scope.join(' ');
    if (progress.parentSessionId !== undefined) event.parentSessionId = progress.parentSessionId;
    if (progress.depth !== undefined) event.depth = progress.depth;
    // Counted per session: a live delegation's session issues a token per request.
    const recorded =
      !(error instanceof PrincipalQuotaReached) &&
      progress.underImpersonation !== undefined &&
      progress.parentSessionId !== undefined &&
      this.#refusals.take(progress.parentSessionId, progress.underImpersonation.parentExpiresAt * 1000);
    await publish(ctx.oidc.provider, event, ctx, { record: recorded });
  }
}
