import type Router from '@koa/router';
import type { Provider } from 'oidc-provider';
import { emit, EVENTS, type ImpersonationEvent } from '../audit/events.js';
import { record as recordEvent } from '../audit/record.js';
import { accessDenied, alreadyRedeemed, managementUnavailable, notFound, requestTooLarge } from '../errors.js';
import { TOKEN_EXCHANGE_GRANT } from '../exchange/grant.js';
import { refusalReason, type JsonObject, type ResolvedOptions } from '../options.js';
import { providerConfiguration } from '../provider-internals.js';
import { storableText } from '../storable-text.js';
import type { SubjectTokenStore } from '../subject-tokens/store.js';
import { isJsonObject, readJsonObject } from './body.js';
import { authorize, badRequest, isIdentifier, storeCall, type Authenticate } from './http.js';

const BODY_FIELDS = new Set(['userId', 'context', 'clientId', 'actorId']);
/** Room for `userId` and the bindings on top of the context cap. */
const BODY_OVERHEAD = 4096;

interface CreationRequest {
  userId: string;
  context: JsonObject;
  clientId?: string;
  actorId?: string;
}

/**
 * `POST {managementPath}`: creates a subject token for a user, for a trusted backend.
 * `DELETE {managementPath}/{id}`: withdraws one that was not redeemed yet.
 */
export function subjectTokenRoutes(
  router: Router,
  provider: Provider,
  options: ResolvedOptions,
  store: SubjectTokenStore,
  authenticate: Authenticate,
): void {
  router.post(options.managementPath, async (ctx) => {
    const caller = await authorize(ctx, authenticate, options.managementScope);
    const request = parseCreation(await readJsonObject(ctx, options.maxContextBytes + BODY_OVERHEAD), options);
    const account = await storeCall(() => providerConfiguration(provider).findAccount(ctx as never, request.userId));
    if (!account) throw notFound('user_not_found', 'no user has this userId');
    if (request.clientId !== undefined) await assertExchangeClient(provider, request.clientId);

    if (options.canImpersonate) {
      const refused = refusalReason(
        await options.canImpersonate({
          subject: request.userId,
          account,
          caller,
          context: request.context,
        }),
        'this user may not be impersonated',
      );
      if (refused) {
        const event: ImpersonationEvent<typeof EVENTS.subjectTokenRefused> = {
          name: EVENTS.subjectTokenRefused,
          subject: request.userId,
          createdBy: caller.clientId,
          context: request.context,
          ...(request.clientId === undefined ? {} : { clientId: request.clientId }),
          ...(request.actorId === undefined ? {} : { actor: request.actorId }),
          error: 'access_denied',
          // The policy's words are recorded as given, but never in a form that would keep the record from being written.
          reason: storableText(refused),
        };
        await recordEvent(provider, options.auditLog, event, ctx);
        throw accessDenied(refused);
      }
    }

    const { value, record } = await storeCall(() =>
      store.create({
        subject: request.userId,
        context: request.context,
        createdBy: caller.clientId,
        ...(request.clientId === undefined ? {} : { clientId: request.clientId }),
        ...(request.actorId === undefined ? {} : { actor: request.actorId }),
        ttl: options.subjectTokenTTL,
      }),
    );

    const created: ImpersonationEvent<typeof EVENTS.subjectTokenCreated> = {
      name: EVENTS.subjectTokenCreated,
      subjectTokenId: record.id,
      subject: record.subject,
      createdBy: record.createdBy,
      context: record.context,
      expiresAt: record.exp,
    };
    if (record.clientId !== undefined) created.clientId = record.clientId;
    if (record.actor !== undefined) created.actor = record.actor;
    // No subject token without its record: one whose record cannot be written is withdrawn, never handed out.
    if (options.auditLog) {
      try {
        await options.auditLog.append(created.name, Object.freeze({ ...created }));
      } catch (error) {
        await store.withdraw(record.id).catch(() => {});
        throw managementUnavailable('the audit trail cannot be written; no subject token was issued', error);
      }
    }
    ctx.status = 201;
    ctx.body = { subjectToken: value, expiresIn: options.subjectTokenTTL, id: record.id };
    emit(provider, created, ctx);
  });

  router.delete(`${options.managementPath}/:id`, async (ctx) => {
    const caller = await authorize(ctx, authenticate, options.revokeScope);
    const id = ctx.params['id']!;
    const outcome = /^stid_[A-Za-z0-9_-]{16}$/.test(id) ? await storeCall(() => store.withdraw(id)) : 'unknown';
    if (outcome === 'unknown') throw notFound('not_found', 'no subject token has this id (or it expired)');
    if (outcome === 'redeemed') {
      throw alreadyRedeemed('the subject token was already exchanged; revoke its impersonation session instead');
    }
    ctx.status = 204;
    await recordEvent(
      provider,
      options.auditLog,
      { name: EVENTS.subjectTokenWithdrawn, subjectTokenId: id, revokedBy: caller.clientId },
      ctx,
    );
  });
}

function parseCreation(body: JsonObject, options: ResolvedOptions): CreationRequest {
  const unknown = Object.keys(body).filter((field) => !BODY_FIELDS.has(field));
  if (unknown.length) throw badRequest(`unknown field: ${unknown.join(', ')}`);

  const { userId, context = {}, clientId, actorId } = body;
  if (!isIdentifier(userId)) throw badRequest('userId must be a non-empty string');
  if (!isJsonObject(context)) throw badRequest('context must be a JSON object');
  if (Buffer.byteLength(JSON.stringify(context)) > options.maxContextBytes) {
    throw requestTooLarge(`context exceeds ${options.maxContextBytes} bytes of JSON`);
  }
  if (clientId !== undefined && !isIdentifier(clientId)) throw badRequest('clientId must be a non-empty string');
  if (actorId !== undefined && !isIdentifier(actorId)) throw badRequest('actorId must be a non-empty string');
  return {
    userId,
    context,
    ...(clientId === undefined ? {} : { clientId }),
    ...(actorId === undefined ? {} : { actorId }),
  };
}

async function assertExchangeClient(provider: Provider, clientId: string): Promise<void> {
  const client = await storeCall(() => provider.Client.find(clientId));
  if (!client?.grantTypeAllowed(TOKEN_EXCHANGE_GRANT)) {
    throw badRequest('clientId does not name a client allowed to use token exchange');
  }
}
