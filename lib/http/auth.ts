/** Who calls: the bearer token of a request, the caller an authenticator finds in it, and a refusal's challenge. */
import type Koa from 'koa';
import { unauthorized, type ManagementError } from '../errors.js';
import type { VerifiedAccessToken } from '../access-token.js';
import type { CoreOptions, ManagementAuthResult, ManagementCaller } from '../core-options.js';
import { storeCall } from '../store-call.js';

export type Authenticate = NonNullable<CoreOptions['authenticateManagementRequest']>;

/** The caller of one of `scopes`, tried in turn, or a 401/403 with its `WWW-Authenticate` challenge. */
export async function authorize(
  ctx: Koa.Context,
  authenticate: Authenticate,
  ...scopes: string[]
): Promise<ManagementCaller> {
  let refusal: { error?: unknown; description?: unknown } = {};
  for (const scope of scopes) {
    const result = await storeCall(() => authenticate(ctx, { scope }));
    if ('clientId' in result && typeof result.clientId === 'string') return result;
    refusal = result as typeof refusal;
    if (refusal.error !== 'insufficient_scope') break;
  }
  throw refuseToken(ctx, refusal, scopes.join(' '));
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

/** A token otherwise accepted refused: sender-constrained, or without `scope`; undefined when it is neither. */
export function constraintRefusal(token: VerifiedAccessToken, scope: string): ManagementAuthResult | undefined {
  if (token.cnf) return invalidToken('sender-constrained access tokens are not accepted here');
  if (token.scopes.has(scope)) return undefined;
  return { error: 'insufficient_scope', description: `the access token lacks the ${scope} scope` };
}

/** An authenticator's answer for a token that is not accepted (401 `invalid_token`). */
export function invalidToken(description: string): { error: 'invalid_token'; description: string } {
  return { error: 'invalid_token', description };
}

/** The token of an `Authorization: Bearer` header, when it holds one token and nothing else. */
export function bearerToken(header: string): string | undefined {
  return /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(header)?.[1];
}

/** A description fit for a `WWW-Authenticate` quoted-string: printable ASCII only (CR or LF would split the header). */
function quoted(value: string): string {
  return value
    .replace(/[^\x20-\x7E]+/g, ' ')
    .replace(/["\\]/g, '')
    .trim();
}
