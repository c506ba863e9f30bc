/** The only module reaching into oidc-provider beyond its public API (pinned peer range; test/plugin/provider-internals.test.ts). */
import { createHash } from 'node:crypto';
import * as grants from 'oidc-provider/lib/helpers/grants.js';
import * as providerDefaults from 'oidc-provider/lib/helpers/defaults.js';
import instance from 'oidc-provider/lib/helpers/weak_cache.js';
import revoke from 'oidc-provider/lib/helpers/revoke.js';
import { sign as signJwt } from 'oidc-provider/lib/helpers/jwt.js';
import { errors } from 'oidc-provider';
import type {
  AccessToken,
  AdapterConstructor,
  AdapterPayload,
  AdapterFactory,
  Configuration,
  JWKS,
  KoaContextWithOIDC,
  Provider,
  ResourceServerInstance,
} from 'oidc-provider';
import { noSigningKey, notAProvider, unsupportedProvider } from './errors/standalone.js';

/** Checked at load: a release that moved one stops the start, naming it, rather than failing requests. */
function assertInternals(): void {
  const missing = [
    ...(
      [
        'resolveRequestedResources',
        'validateClientScope',
        'validateDpop',
        'checkDpopReplay',
        'checkDpopRequired',
        'checkMtlsCert',
      ] as const
    )
      .filter((name) => typeof grants[name] !== 'function')
      .map((name) => `helpers/grants.js ${name}`),
    ...(typeof instance === 'function' ? [] : ['helpers/weak_cache.js (default export)']),
    ...(typeof revoke === 'function' ? [] : ['helpers/revoke.js (default export)']),
    ...(typeof signJwt === 'function' ? [] : ['helpers/jwt.js sign']),
    ...(typeof providerDefaults.defaults?.clockTolerance === 'number' ? [] : ['helpers/defaults.js clockTolerance']),
  ];
  if (missing.length) throw unsupportedProvider(missing);
}
assertInternals();

/** Checked at install(): the model fields the exchange uses that no export names; writes nothing. */
export function assertModelInternals(provider: Provider): void {
  const missing: string[] = [];
  const token = new provider.AccessToken({ accountId: 'probe' } as ConstructorParameters<Provider['AccessToken']>[0]);
  setTokenLifetime(token, 7);
  if (token.expiration !== 7) missing.push('AccessToken expiresIn');
  const inPayload = (provider.AccessToken as unknown as { IN_PAYLOAD?: unknown }).IN_PAYLOAD;
  if (!Array.isArray(inPayload) || !inPayload.includes('x5t#S256')) missing.push("AccessToken 'x5t#S256'");
  const grant = newBackingGrant(provider, {
    jti: 'probe',
    accountId: 'probe',
    clientId: 'probe',
    resource: 'urn:probe',
    scope: [],
    expiresIn: 7,
  });
  if (grant.jti !== 'probe') missing.push('Grant jti');
  if (missing.length) throw unsupportedProvider(missing);
}

export interface DpopProof {
  thumbprint: string;
  jti: string;
  iat: number;
}

interface ProviderKeystore {
  selectForSign(options: { alg: string; use: 'sig' }): Array<{ kid?: string }>;
  getKeyObject(key: object): unknown;
}

interface ProviderInternals {
  configuration: Configuration & { findAccount: NonNullable<Configuration['findAccount']> };
  jwks: JWKS;
  keystore: ProviderKeystore;
  Adapter: AdapterConstructor | AdapterFactory;
}

function internals(provider: Provider): ProviderInternals {
  const found = instance(provider) as ProviderInternals | undefined;
  if (!found?.configuration) throw notAProvider();
  return found;
}

export function providerConfiguration(provider: Provider): ProviderInternals['configuration'] {
  return internals(provider).configuration;
}

/** The provider's public signing keys, as its jwks_uri serves them. */
export function providerJwks(provider: Provider): JWKS {
  return internals(provider).jwks;
}

/** The provider's key for its default ID token algorithm; throws, naming the algorithm, when it has none. */
export function providerSigningKey(provider: Provider): { alg: string; key: { kid?: string } } {
  const { keystore, configuration } = internals(provider);
  const alg = (configuration.clientDefaults as { id_token_signed_response_alg?: string } | undefined)
    ?.id_token_signed_response_alg;
  const [key] = alg && !alg.startsWith('HS') && alg !== 'none' ? keystore.selectForSign({ alg, use: 'sig' }) : [];
  if (!alg || !key) throw noSigningKey(alg);
  return { alg, key };
}

/** Signs `payload` as a JWT with the provider's default ID-token key; the private key never leaves its keystore. */
export async function signWithProviderKey(
  provider: Provider,
  payload: Record<string, unknown>,
  typ: string,
): Promise<string> {
  const { keystore } = internals(provider);
  const { alg, key } = providerSigningKey(provider);
  return signJwt({ ...payload }, keystore.getKeyObject(key), alg, {
    typ,
    noIat: true,
    ...(key.kid === undefined ? {} : { fields: { kid: key.kid } }),
  });
}

/** The clock tolerance (seconds) of a provider built from `configuration`: its own, or oidc-provider's default. */
export function clockToleranceOf(configuration: Configuration): number {
  const seconds = configuration.clockTolerance ?? providerDefaults.defaults!.clockTolerance;
  return Number.isFinite(seconds) && seconds > 0 ? seconds : 0;
}

/** The adapter the provider itself stores its models with. */
export function providerAdapter(provider: Provider): AdapterConstructor | AdapterFactory {
  return internals(provider).Adapter;
}

/** Gives a token its id (and format) before `save()`, so records naming it can be written beside it. */
export function assignTokenId(token: AccessToken): string {
  const model = token as unknown as { jti?: string; generateTokenId(): string };
  model.jti ??= model.generateTokenId();
  return model.jti;
}

/** Sets an access token's lifetime in seconds, as its constructor's `expiresIn` would. */
export function setTokenLifetime(token: AccessToken, seconds: number): void {
  (token as unknown as { expiresIn?: number }).expiresIn = seconds;
}

/** The `x5t#S256` thumbprint `setThumbprint('x5t', …)` gave the token, if any. */
export function certificateThumbprintOf(token: AccessToken): string | undefined {
  return (token as unknown as { 'x5t#S256'?: string })['x5t#S256'];
}

interface BackingGrantInput {
  /** Chosen by the caller, so that a record can name the Grant before either is written. */
  jti: string;
  accountId: string;
  clientId: string;
  resource: string;
  scope: readonly string[];
  expiresIn: number;
}

/** A Grant for one resource and its scopes, which lives `expiresIn` seconds. */
export function newBackingGrant(provider: Provider, input: BackingGrantInput): InstanceType<Provider['Grant']> {
  const grant = new provider.Grant({
    jti: input.jti,
    accountId: input.accountId,
    clientId: input.clientId,
  } as ConstructorParameters<Provider['Grant']>[0] & { jti: string });
  if (input.scope.length) grant.addResourceScope(input.resource, input.scope.join(' '));
  (grant as unknown as { expiresIn?: number }).expiresIn = input.expiresIn;
  return grant;
}

/** `AccessToken.find` without its session check (an option oidc-provider's typings do not declare). */
export function findAccessTokenUnbound(provider: Provider, value: string): Promise<AccessToken | undefined> {
  return provider.AccessToken.find(value, { ignoreSessionBinding: true } as { ignoreExpiration?: boolean });
}

/** An opaque user token's sign-in and Grant as stored, checked as the models' `find` would; the sign-in read, or false. */
export function tokenOriginsHold(provider: Provider, token: AccessToken): Promise<AdapterPayload | undefined | false> {
  const { expiresWithSession, sessionUid, grantId, clientId, accountId } = token as AccessToken & { clientId: string };
  const reads = Promise.all([
    expiresWithSession ? provider.Session.adapter.findByUid(sessionUid!) : undefined,
    provider.Grant.adapter.find(grantId!),
  ]);
  return reads.then(([session, grant]) => {
    const now = Math.floor(Date.now() / 1000);
    const authorizations = session?.['authorizations'] as Record<string, { grantId?: unknown }> | undefined;
    const bound =
      !expiresWithSession ||
      (isLive(session, 'Session', now - clockToleranceOf(internals(provider).configuration)) &&
        session.accountId === accountId &&
        authorizations?.[clientId]?.grantId === grantId);
    const held = bound && isLive(grant, 'Grant', now) && grant.clientId === clientId && grant.accountId === accountId;
    return held && (session ?? undefined);
  });
}

function isLive(entry: AdapterPayload | undefined | void, kind: string, after: number): entry is AdapterPayload {
  return entry?.kind === kind && (entry.exp === undefined || (typeof entry.exp === 'number' && entry.exp > after));
}

export function resolveRequestedResources(ctx: KoaContextWithOIDC): Promise<ResourceServerInstance[]> {
  return grants.resolveRequestedResources(ctx.oidc.provider, ctx) as Promise<ResourceServerInstance[]>;
}

/** Refuses scopes the client's own `scope` metadata does not allow. */
export function validateClientScope(ctx: KoaContextWithOIDC, scopes: Iterable<string>): void {
  grants.validateClientScope(ctx.oidc.provider, ctx, new Set(scopes));
}

/** oidc-provider's revocation of a grant: its tokens, the Grant as `revokeGrantPolicy` says, `grant.revoked` emitted. */
export const revokeGrant = (ctx: KoaContextWithOIDC, grantId: string): Promise<void> => revoke(ctx, grantId);

export function validateDpop(ctx: KoaContextWithOIDC): Promise<DpopProof | undefined> {
  return grants.validateDpop(ctx.oidc.provider, ctx) as Promise<DpopProof | undefined>;
}

/** A replayed proof is an invalid proof (RFC 9449 `invalid_dpop_proof`), not an invalid grant. */
export function checkDpopReplay(ctx: KoaContextWithOIDC, proof: DpopProof): Promise<void> {
  return grants.checkDpopReplay(ctx.oidc.provider, ctx, proof, ctx.oidc.client!.clientId, errors.InvalidDpopProof);
}

/** Takes back a proof `checkDpopReplay` spent, for a request refused before it issued anything. */
export async function releaseDpopProof(ctx: KoaContextWithOIDC, proof: DpopProof): Promise<void> {
  const { ReplayDetection } = ctx.oidc.provider;
  const id = createHash('sha256').update(`${ctx.oidc.client!.clientId}${proof.jti}`).digest('base64url');
  await (await ReplayDetection.find(id))?.destroy();
}

export function checkDpopRequired(ctx: KoaContextWithOIDC, proof: DpopProof | undefined): void {
  grants.checkDpopRequired(ctx.oidc.provider, ctx, proof, errors.InvalidRequest);
}

/** The client certificate, when the client uses certificate-bound access tokens. */
export function checkMtlsCert(ctx: KoaContextWithOIDC): string | undefined {
  return grants.checkMtlsCert(ctx.oidc.provider, ctx, errors.InvalidRequest) as string | undefined;
}
