import type Koa from 'koa';
import { ManagementError, managementServerError, managementUnavailable, unauthorized } from '../errors.js';
import type { ManagementAuthResult, ManagementCaller } from '../options.js';

/** Every Management API answer is an OAuth-style error or a success, never cached. */
export async function renderErrors(ctx: Koa.Context, next: Koa.Next): Promise<void> {
  try {
    await next();
  } catch (caught) {
    const error = caught instanceof ManagementError ? caught : managementServerError(caught);
    if (error.status >= 500) ctx.app.emit('error', error.cause ?? error, ctx);
    ctx.status = error.status;
    ctx.body = error.toJSON();
  }
  ctx.set('Cache-Control', 'no-store');
}

export type Authenticate = (
  ctx: Koa.Context,
  required: { scope: string },
) => ManagementAuthResult | Promise<ManagementAuthResult>;

/** The caller, or a 401/403 with its `WWW-Authenticate` challenge. */
export async function authorize(
  ctx: Koa.Context,
  authenticate: Authenticate,
  scope: string,
): Promise<ManagementCaller> {
  const result = await storeCall(() => authenticate(ctx, { scope }));
  if ('clientId' in result && typeof result.clientId === 'string') return result;
  throw refuseToken(ctx, result as { error?: unknown; description?: unknown }, scope);
}

/** The 401 `invalid_token` or 403 `insufficient_scope` of a refused bearer token, its challenge set on `ctx`. */
export function refuseToken(
  ctx: Koa.Context,
  refusal: { error?: unknown; description?: unknown },
  scope: string,
): ManagementError {
  const code = refusal.error === 'insufficient_scope' ? 'insufficient_scope' : 'invalid_token';
  const description =
    (typeof refusal.description === 'string' && refusal.description) ||
    (code === 'invalid_token' ? 'the access token is invalid' : 'the access token lacks the required scope');
  const challenge =
    code === 'invalid_token'
      ? `Bearer error="invalid_token", error_description="${quoted(description)}"`
      : `Bearer error="insufficient_scope", scope="${scope}"`;
  // A request without any credentials gets a bare challenge (RFC 6750 3.1).
  ctx.set('WWW-Authenticate', ctx.get('authorization') ? challenge : 'Bearer');
  return unauthorized(code, description);
}

/** A failure of the store behind a call is an outage (503), not a bug (500), and never a half-done write. */
export async function storeCall<T>(call: () => T | Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof ManagementError) throw error;
    // A store that is full says so (storeFull); any other failure is an outage.
    const full = error as { statusCode?: unknown; error?: unknown; error_description?: unknown };
    const description =
      full.statusCode === 503 && full.error === 'temporarily_unavailable' && typeof full.error_description === 'string'
        ? full.error_description
        : 'the identity service cannot reach its store; retry shortly';
    throw managementUnavailable(description, error);
  }
}

export { badRequest } from '../errors.js';

export const MAX_ID_LENGTH = 1024;

export function isIdentifier(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0 && value.length <= MAX_ID_LENGTH && value.trim() === value;
}

/**
 * A description fit for a quoted-string of `WWW-Authenticate`: printable
 * ASCII only. CR or LF would split the header (Node refuses to send it: a 500),
 * and non-Latin-1 text cannot be sent at all.
 */
function quoted(value: string): string {
  return value
    .replace(/[^\x20-\x7E]+/g, ' ')
    .replace(/["\\]/g, '')
    .trim();
}
