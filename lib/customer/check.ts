import type Koa from 'koa';
import type { KoaContextWithOIDC, Provider, ResourceServer } from 'oidc-provider';
import { AccessTokens } from '../access-token.js';
import type { ManagementAuthResult } from '../core-options.js';
import { invalidTarget } from '../errors.js';
import type { ResolvedApprovalOptions } from '../approvals/options.js';
import { authorize, bearerToken, constraintRefusal, invalidToken } from '../http/auth.js';

/** Who calls the customer's API: the customer (an account id), never a client and never an actor. */
export interface Customer {
  accountId: string;
  /** The client the customer signed in to. */
  clientId: string;
}

/** The customer's API caller: an end-user token for `customerResource` with `customerScope`; never an exchange's, nor sender-constrained. */
export function createCustomerCheck(provider: Provider, approvals: ResolvedApprovalOptions) {
  const tokens = new AccessTokens(provider);
  async function check(ctx: Koa.Context): Promise<Customer | ManagementAuthResult> {
    const value = bearerToken(ctx.get('authorization'));
    if (!value) return invalidToken('a Bearer access token is required');

    const token = await tokens.verify(value, 'AccessToken');
    if (!token) return invalidToken('the access token is invalid or expired');
    // Before the audience: an impersonation token is named as such, whatever it is for.
    if (token.act || token.impersonationSession !== undefined)
      return invalidToken('an impersonation token cannot act for the customer it impersonates');
    // A client_credentials JWT names its client as `sub`; an opaque one is not an AccessToken at all.
    if (token.sub === token.clientId) return invalidToken("the customer's own access token is required");
    if (!token.audience.includes(approvals.customerResource))
      return invalidToken("the access token is not for the customer's support-access API");
    return constraintRefusal(token, approvals.customerScope) ?? { accountId: token.sub, clientId: token.clientId };
  }

  /** The customer (as a caller, who has a client), or a 401/403 with its `WWW-Authenticate` challenge. */
  return (ctx: Koa.Context) => authorize(ctx, check, approvals.customerScope) as Promise<Customer>;
}

/** The routes at which oidc-provider resolves a resource for a user's sign-in, and the grants that redeem it. */
const SIGN_IN_ROUTES = new Set(['authorization', 'resume', 'pushed_authorization_request']);
const CUSTOMER_GRANTS = new Set(['authorization_code', 'refresh_token']);

/** The customer token's lifetime, seconds: short, as it may grant access to the customer's whole account. */
const CUSTOMER_TOKEN_TTL = 600;

/** `getResourceServerInfo` for `customerResource`: a short-lived JWT for a user's own sign-in (code flow and refresh) only. */
export function customerResourceInfo(
  ctx: KoaContextWithOIDC,
  approvals: ResolvedApprovalOptions,
  client: { subjectType?: string },
): ResourceServer {
  // A pairwise client's tokens name the customer by an identifier of that client's, not by their account.
  if (client.subjectType === 'pairwise')
    throw invalidTarget('a client with pairwise subject identifiers may not obtain tokens for the support-access API');
  const { route } = ctx.oidc;
  const grantType = ctx.oidc.params?.['grant_type'];
  const allowed =
    SIGN_IN_ROUTES.has(route) || (route === 'token' && typeof grantType === 'string' && CUSTOMER_GRANTS.has(grantType));
  if (!allowed) throw invalidTarget("only a customer's own sign-in may obtain tokens for the support-access API");
  return { scope: approvals.customerScope, accessTokenFormat: 'jwt', accessTokenTTL: CUSTOMER_TOKEN_TTL };
}
