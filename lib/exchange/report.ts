import type { KoaContextWithOIDC } from 'oidc-provider';
import { emit, EVENTS, type ImpersonationEvent } from '../audit/events.js';
import { record as recordEvent } from '../audit/record.js';
import type { ResolvedOptions } from '../options.js';
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
  /**
   * The trail holds this exchange's success row: a refusal after it (a lost
   * race, the actor's sign-out) corrects it, names the same token, and is
   * always recorded.
   */
  successRecorded?: boolean;
}

export function eventOf(
  clientId: string,
  progress: ExchangeProgress,
  outcome: 'success' | 'refusal',
): ImpersonationEvent {
  const { subjectToken: record, session } = progress;
  const event: ImpersonationEvent = { clientId };
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
  if (session) {
    event.sessionId = session.id;
    // A token is named by the success, and by a refusal that corrects its row; never by a
    // refusal of a token no row names.
    if (session.accessTokenId && (outcome === 'success' || progress.successRecorded)) {
      event.accessTokenId = session.accessTokenId;
      event.expiresAt = session.expiresAt;
    }
  }
  return event;
}

/** Reports an exchange's outcome: to listeners always, to the trail as the rules for refusals allow. */
export class ExchangeReport {
  readonly #options: ResolvedOptions;
  readonly #refusals = new RefusalBudget();

  constructor(options: ResolvedOptions) {
    this.#options = options;
  }

  succeeded(ctx: KoaContextWithOIDC, progress: ExchangeProgress): void {
    emit(ctx.oidc.provider, EVENTS.exchangeSucceeded, eventOf(ctx.oidc.client!.clientId, progress, 'success'), ctx);
  }

  /**
   * A refusal reaches the trail only once its subject token is found (see
   * refusals.ts); its description may quote the request or a policy, so it is
   * recorded in a form every store can hold.
   */
  async refused(ctx: KoaContextWithOIDC, progress: ExchangeProgress, error: unknown): Promise<void> {
    const event = eventOf(ctx.oidc.client!.clientId, progress, 'refusal');
    const described = error as { error?: string; error_description?: string };
    event.error = described.error ?? 'server_error';
    event.reason = storableText(described.error_description ?? 'internal error');
    const record = progress.subjectToken;
    const recorded =
      progress.successRecorded === true || (record !== undefined && this.#refusals.take(record.id, keptUntil(record)));
    const sink = recorded ? this.#options.auditLog : undefined;
    await recordEvent(ctx.oidc.provider, sink, EVENTS.exchangeRefused, event, ctx);
  }
}
