import Router from '@koa/router';
import type Koa from 'koa';
import type { Provider } from 'oidc-provider';
import { emit, EVENTS, type ImpersonationEvent } from '../audit.js';
import { ManagementError } from '../errors.js';
import { TOKEN_EXCHANGE_GRANT } from '../exchange/grant.js';
import { refusalReason, type JsonObject, type ManagementAuthResult, type ResolvedOptions } from '../options.js';
import { providerConfiguration } from '../provider-internals.js';
import type { SubjectTokenStore } from '../subject-tokens/store.js';
import { isJsonObject, readJsonObject } from './body.js';
import { createCallerCheck } from './caller.js';

const BODY_FIELDS = new Set(['userId', 'context', 'clientId', 'actorId']);
const MAX_ID_LENGTH = 1024;
/** Room for `userId` and the bindings on top of the context cap. */
const BODY_OVERHEAD = 4096;

interface CreationRequest {
  userId: string;
  context: JsonObject;
  clientId?: string;
  actorId?: string;
}

/** `POST {managementPath}`: creates a subject token for a user, for a trusted backend. */
export function createManagementRouter(provider: Provider, options: ResolvedOptions, store: SubjectTokenStore): Router {
  const authenticate = options.authenticateManagementRequest ?? createCallerCheck(provider, options);
  // Exact paths, as a proxy's exact-path rule would match them: no case folding, no trailing slash.
  const router = new Router({ sensitive: true, strict: true });

  router.post(options.managementPath, renderErrors, async (ctx) => {
    const caller = await storeCall(() => authenticate(ctx));
    assertAuthenticated(ctx, caller, options.managementScope);

    const request = parseCreation(await readJsonObject(ctx, options.maxContextBytes + BODY_OVERHEAD), options);
    const audit: ImpersonationEvent = {
      subject: request.userId,
      createdBy: caller.clientId,
      context: request.context,
      ...(request.clientId === undefined ? {} : { clientId: request.clientId }),
      ...(request.actorId === undefined ? {} : { actor: request.actorId }),
    };

    const account = await storeCall(() => providerConfiguration(provider).findAccount(ctx as never, request.userId));
    if (!account) throw new ManagementError(404, 'user_not_found', 'no user has this userId');
    if (request.clientId !== undefined) await assertExchangeClient(provider, request.clientId);

    if (options.canImpersonate) {
      const refused = refusalReason(await options.canImpersonate({
        subject: request.userId, account, caller, context: request.context,
      }), 'this user may not be impersonated');
      if (refused) {
        Object.assign(audit, { error: 'access_denied', reason: refused });
        emit(provider, EVENTS.subjectTokenRefused, audit, ctx);
        throw new ManagementError(403, 'access_denied', refused);
      }
    }

    const { value, record } = await storeCall(() => store.create({
      subject: request.userId,
      context: request.context,
      createdBy: caller.clientId,
      ...(request.clientId === undefined ? {} : { clientId: request.clientId }),
      ...(request.actorId === undefined ? {} : { actor: request.actorId }),
      ttl: options.subjectTokenTTL,
    }));

    ctx.status = 201;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { subjectToken: value, expiresIn: options.subjectTokenTTL };
    audit.subjectTokenId = record.id;
    audit.expiresAt = record.exp;
    emit(provider, EVENTS.subjectTokenCreated, audit, ctx);
  });

  return router;
}

async function renderErrors(ctx: Koa.Context, next: Koa.Next): Promise<void> {
  try {
    await next();
  } catch (caught) {
    const error = caught instanceof ManagementError
      ? caught
      : new ManagementError(500, 'server_error', 'the subject token could not be created', { cause: caught });
    if (error.status >= 500) ctx.app.emit('error', error.cause ?? error, ctx);
    ctx.status = error.status;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = error.toJSON();
  }
}

function assertAuthenticated(
  ctx: Koa.Context,
  result: ManagementAuthResult,
  scope: string,
): asserts result is Extract<ManagementAuthResult, { clientId: string }> {
  if ('clientId' in result && typeof result.clientId === 'string') return;
  const code = 'error' in result && result.error === 'insufficient_scope' ? 'insufficient_scope' : 'invalid_token';
  const description = ('description' in result && result.description) || (code === 'invalid_token'
    ? 'the access token is invalid'
    : 'the access token lacks the required scope');
  const challenge = code === 'invalid_token'
    ? `Bearer error="invalid_token", error_description="${quoted(description)}"`
    : `Bearer error="insufficient_scope", scope="${scope}"`;
  // A request without any credentials gets a bare challenge (RFC 6750 3.1).
  ctx.set('WWW-Authenticate', ctx.get('authorization') ? challenge : 'Bearer');
  throw new ManagementError(code === 'invalid_token' ? 401 : 403, code, description);
}

function parseCreation(body: JsonObject, options: ResolvedOptions): CreationRequest {
  const unknown = Object.keys(body).filter((field) => !BODY_FIELDS.has(field));
  if (unknown.length) throw badRequest(`unknown field: ${unknown.join(', ')}`);

  const { userId, context = {}, clientId, actorId } = body;
  if (!isIdentifier(userId)) throw badRequest('userId must be a non-empty string');
  if (!isJsonObject(context)) throw badRequest('context must be a JSON object');
  if (Buffer.byteLength(JSON.stringify(context)) > options.maxContextBytes) {
    throw new ManagementError(413, 'request_too_large', `context exceeds ${options.maxContextBytes} bytes of JSON`);
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

/** A failure of the store behind a call is an outage (503), not a bug (500), and never a half-done write. */
async function storeCall<T>(call: () => T | Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof ManagementError) throw error;
    throw new ManagementError(503, 'temporarily_unavailable', 'the identity service cannot reach its store; retry shortly', { cause: error });
  }
}

function isIdentifier(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0 && value.length <= MAX_ID_LENGTH && value.trim() === value;
}

function badRequest(description: string): ManagementError {
  return new ManagementError(400, 'invalid_request', description);
}

/**
 * A description fit for a quoted-string of `WWW-Authenticate`: printable
 * ASCII only. CR or LF would split the header (Node refuses to send it: a 500),
 * and non-Latin-1 text cannot be sent at all.
 */
function quoted(value: string): string {
  return value.replace(/[^\x20-\x7E]+/g, ' ').replace(/["\\]/g, '').trim();
}
