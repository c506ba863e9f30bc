/** The jwt-bearer grant (RFC 7523) with the Identity Assertion JWT Authorization Grant profile: the redeeming side. */
import { createHash, randomBytes } from 'node:crypto';
import type { AccessToken, KoaContextWithOIDC, Provider, ResourceServerInstance } from 'oidc-provider';
import { publicTokenId, scopeSet } from '../../access-token.js';
import type { PrincipalQuotas } from '../../adapters/contracts/commit.js';
import { SUBJECT_TOKEN_MODEL } from '../../adapters/models.js';
import { redemptionQuotaRefusal, redemptionQuotas, type DelegationCharge } from '../../capacity.js';
import {
  invalidGrant,
  invalidRequest,
  invalidScope,
  invalidTarget,
  PrincipalQuotaReached,
  unauthorizedClient,
} from '../../errors.js';
import { EVENTS, type ImpersonationEvent } from '../../event-types.js';
import { publish } from '../../events/publish.js';
import type { EventBus } from '../../events/subscriber.js';
import {
  assignTokenId,
  buildTokenResponse,
  checkDpopReplay,
  checkDpopRequired,
  checkMtlsCert,
  newBackingGrant,
  setTokenLifetime,
  validateDpop,
} from '../../provider-internals.js';
import { isStorableText, storableText } from '../../storable-text.js';
import { accountExists } from '../account.js';
import { grantedScopes, resolveSingleResource } from '../request.js';
import { verifyIdJag, type IdJagClaims } from './assertion.js';
import type { ResolvedIdJagOptions } from './options.js';

export const JWT_BEARER_GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
/** `authorization_grant_profiles_supported`'s value for this profile. */
export const ID_JAG_PROFILE = 'urn:ietf:params:oauth:grant-profile:id-jag';
/** What the grant reads beside client authentication; oidc-provider strips every other parameter. */
export const ID_JAG_PARAMETERS = ['assertion', 'scope', 'resource'] as const;

/** The kind of the entry a redemption writes beside its counters. */
const REDEMPTION_KIND = 'IdJagRedemption';

export interface IdJagDependencies {
  options: ResolvedIdJagOptions;
  /** The subject tokens' store: an assertion's single use is counted there, in one store operation. */
  redemptions: PrincipalQuotas;
  bus: EventBus;
  /** The provider's clock tolerance, seconds. */
  clockTolerance: number;
}

/** What a redemption established, for its refusal's event. */
interface RedemptionProgress {
  subject?: string;
  resource?: string;
  scope?: string[];
  context?: { issuer: string; assertionId: string };
}

type Redeemed = ImpersonationEvent<typeof EVENTS.idJagRedeemed>;

/** The grant handler: checks the assertion, takes its `jti` once, issues an access token; each refusal reported. */
export function createIdJagHandler(dependencies: IdJagDependencies) {
  return async function idJagGrant(ctx: KoaContextWithOIDC): Promise<void> {
    const progress: RedemptionProgress = {};
    let event: Redeemed;
    try {
      event = await redeem(ctx, dependencies, progress);
    } catch (error) {
      if (error instanceof PrincipalQuotaReached) ctx.set('Retry-After', String(error.retryAfter));
      await publish(dependencies.bus, refusal(ctx, progress, error), ctx, { record: false });
      throw error;
    }
    await publish(dependencies.bus, event, ctx);
  };
}

async function redeem(
  ctx: KoaContextWithOIDC,
  { options, redemptions, clockTolerance }: IdJagDependencies,
  progress: RedemptionProgress,
): Promise<Redeemed> {
  const client = ctx.oidc.client!;
  // The draft's Security Considerations: only confidential clients redeem assertions.
  if (client.clientAuthMethod === 'none') throw unauthorizedClient('the jwt-bearer grant is for confidential clients');
  const { assertion, scope } = ctx.oidc.params as { assertion?: unknown; scope?: string };
  if (typeof assertion !== 'string' || !assertion) throw invalidRequest('missing required parameter: assertion');
  const dpop = await validateDpop(ctx);
  checkDpopRequired(ctx, dpop);

  const claims = await verifyIdJag(assertion, ctx.oidc.issuer, options, clockTolerance);
  progress.context = { issuer: claims.iss, assertionId: claims.jti };
  progress.subject = claims.sub;
  if (claims.client_id !== client.clientId) throw invalidGrant('the assertion was issued for another client');
  const resourceServer = await assertedResource(ctx, claims.resource);
  progress.resource = resourceServer.identifier();
  const granted = assertedScopes(ctx, scope, claims.scope, resourceServer);
  progress.scope = granted;
  if (!(await accountExists(ctx, claims.sub))) throw invalidGrant('the assertion names no account of this server');

  const provider: Provider = ctx.oidc.provider;
  const token = new provider.AccessToken({
    accountId: claims.sub,
    client,
    gty: JWT_BEARER_GRANT,
    scope: granted.join(' ') || undefined,
    resourceServer,
  } as ConstructorParameters<Provider['AccessToken']>[0]);
  const certificate = checkMtlsCert(ctx);
  if (certificate) token.setThumbprint('x5t', certificate);
  if (dpop) {
    await checkDpopReplay(ctx, dpop);
    token.setThumbprint('jkt', dpop.thumbprint);
  }
  // The token never outlives the assertion it came from.
  setTokenLifetime(token, Math.max(1, Math.min(token.expiration, claims.exp - Math.floor(Date.now() / 1000))));

  await redeemOnce(redemptions, options, claims, client.clientId, clockTolerance);
  const value = await issue(provider, token, claims.sub, granted);
  ctx.body = buildTokenResponse(ctx, {
    accessToken: value,
    expiresIn: token.expiration,
    scope: token.scope ?? '',
    tokenType: token.tokenType,
  });
  return {
    name: EVENTS.idJagRedeemed,
    subject: claims.sub,
    clientId: client.clientId,
    resource: progress.resource,
    scope: granted.join(' '),
    context: progress.context,
    accessTokenId: publicTokenId(token.format, assignTokenId(token)),
    expiresAt: Math.floor(Date.now() / 1000) + token.expiration,
  };
}

/** The one resource: the request's, which the assertion's `resource` must list if it has one; else the assertion's only one. */
async function assertedResource(ctx: KoaContextWithOIDC, asserted: unknown): Promise<ResourceServerInstance> {
  const listed = asserted === undefined ? undefined : [asserted].flat();
  if (listed?.some((resource) => typeof resource !== 'string')) {
    throw invalidGrant(`the assertion's "resource" claim must be a URI or an array of URIs`);
  }
  const params = ctx.oidc.params as { resource?: string };
  if (params.resource !== undefined && !isStorableText(params.resource)) throw invalidTarget('resource is malformed');
  if (params.resource !== undefined && listed && !listed.includes(params.resource)) {
    throw invalidTarget('resource is not one the assertion allows');
  }
  if (params.resource === undefined && listed) {
    if (listed.length !== 1) throw invalidTarget('the assertion allows several resources: name one with resource');
    params.resource = listed[0] as string;
  }
  return resolveSingleResource(ctx);
}

/** RFC 6749 3.3 within the assertion's `scope`: asked for, each must be in it; else what it holds that the resource defines. */
function assertedScopes(
  ctx: KoaContextWithOIDC,
  requested: string | undefined,
  asserted: unknown,
  resourceServer: ResourceServerInstance,
): string[] {
  if (asserted !== undefined && typeof asserted !== 'string') {
    throw invalidGrant(`the assertion's "scope" claim must be a string`);
  }
  const allowed = scopeSet(asserted as string | undefined);
  if (requested === undefined) {
    return grantedScopes(ctx, [...allowed].filter((name) => resourceServer.scopes.has(name)).join(' '), resourceServer);
  }
  const wider = [...scopeSet(requested)].filter((name) => !allowed.has(name));
  if (wider.length) throw invalidScope(`scope is wider than the assertion's: ${wider.join(' ')}`, wider.join(' '));
  return grantedScopes(ctx, requested, resourceServer);
}

/** Invariant 37: the assertion's `jti` is a share of one, charged with its issuer's and client's in one store operation. */
async function redeemOnce(
  redemptions: PrincipalQuotas,
  options: ResolvedIdJagOptions,
  claims: IdJagClaims,
  clientId: string,
  clockTolerance: number,
): Promise<void> {
  const assertionKey = createHash('sha256').update(`${claims.iss}\n${claims.jti}`).digest('base64url');
  const keptUntil = claims.exp + clockTolerance;
  const [once, ...shares] = redemptionQuotas(
    { perIssuer: options.maxRedemptionsPerIssuer, perClient: options.maxRedemptionsPerClient },
    { issuer: claims.iss, clientId, assertionKey, keptUntil },
  );
  const outcome = await redemptions.saveWithinQuotas({
    write: {
      model: SUBJECT_TOKEN_MODEL,
      id: `id-jag:${assertionKey}`,
      payload: { kind: REDEMPTION_KIND, exp: keptUntil },
      expiresIn: Math.max(1, keptUntil - Math.floor(Date.now() / 1000)),
    },
    indexes: [],
    expiresAt: keptUntil * 1000,
    quotas: [once, ...shares],
  });
  if (outcome.outcome === 'saved') return;
  if (outcome.key === once.key) throw invalidGrant('the assertion was redeemed already: its jti is single use');
  throw redemptionQuotaRefusal(shares.find((share) => share.key === outcome.key) as DelegationCharge);
}

/** The token and, when opaque, a Grant behind it, so that introspection and revocation treat it as any of the provider's. */
async function issue(provider: Provider, token: AccessToken, subject: string, scope: string[]): Promise<string> {
  if (token.format !== 'opaque') return token.save();
  const grant = newBackingGrant(provider, {
    jti: randomBytes(32).toString('base64url'),
    accountId: subject,
    clientId: token.clientId!,
    resource: token.resourceServer!.identifier(),
    scope,
    expiresIn: token.expiration,
  });
  token.grantId = grant.jti;
  const [value] = await Promise.all([token.save(), grant.save()]);
  return value;
}

/** A refusal's event: the client, the error, and what the assertion was shown to state. */
function refusal(
  ctx: KoaContextWithOIDC,
  progress: RedemptionProgress,
  error: unknown,
): ImpersonationEvent<typeof EVENTS.idJagRefused> {
  const described = error as { error?: string; error_description?: string };
  const event: ImpersonationEvent<typeof EVENTS.idJagRefused> = {
    name: EVENTS.idJagRefused,
    clientId: ctx.oidc.client!.clientId,
    error: described.error ?? 'server_error',
    reason: storableText(described.error_description ?? 'internal error'),
  };
  if (progress.subject !== undefined) event.subject = progress.subject;
  if (progress.resource !== undefined) event.resource = progress.resource;
  if (progress.scope !== undefined) event.scope = progress.scope.join(' ');
  if (progress.context !== undefined) event.context = progress.context;
  return event;
}
