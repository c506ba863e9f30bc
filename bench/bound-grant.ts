/**
 * The exchange's bound, as a grant of the bench's own (`exchange-bound`): what
 * an impersonation with an opaque actor token cannot avoid beyond
 * `client_credentials` (docs/benchmarks.md, "The bound per store"), done with
 * the plugin's own stores and nothing else. RFC 8693's longer request is
 * parsed; the subject token found by its hash and the actor token honoured as
 * oidc-provider honours it (the token, then its session and its Grant), side
 * by side; both accounts found; the one resource and its scopes resolved; the
 * deployment's hook run; the same RS256 token signed, with the claims the
 * exchange adds (by `boundClaimsCustomizer`); one commit that redeems the
 * subject token and lists the session with its five index entries and two end
 * marks; the deployment's listeners told. Left out: every check the plugin
 * makes on what it read (bindings, freshness, the `act` chain, DPoP and mTLS
 * when absent), the policy's call, the refusal's report, telemetry. The
 * exchange's rate over this grant's, in the same run, is what the plugin's
 * own orchestration leaves of what is possible on the store.
 *
 * Registered by the bench's provider only (bench/server.ts); never part of the
 * plugin.
 */
import type { AccessToken, ClientMetadata, KoaContextWithOIDC, Provider } from 'oidc-provider';
import { errors } from 'oidc-provider';
import { publicTokenId, verifyAccessToken } from '../lib/access-token.js';
import { openPluginStore } from '../lib/adapters/plugin-store.js';
import type { CustomJwtClaimsFunction } from '../lib/core-options.js';
import { announce } from '../lib/events/publish.js';
import { exchangeSucceeded } from '../lib/exchange/report.js';
import {
  ACCESS_TOKEN_TYPE,
  EXCHANGE_DUPLICATES,
  EXCHANGE_PARAMETERS,
  grantedScopes,
  resolveSingleResource,
  TOKEN_EXCHANGE_GRANT,
} from '../lib/exchange/request.js';
import { IMPERSONATION_DEFAULTS } from '../lib/config/defaults.js';
import {
  assignTokenId,
  buildTokenResponse,
  providerAdapter,
  providerConfiguration,
  setTokenLifetime,
} from '../lib/provider-internals.js';
import { newSessionId, SESSION_CLAIM, type SessionRecord } from '../lib/sessions/record.js';
import { SessionStore } from '../lib/sessions/store.js';
import { SUBJECT_TOKEN_MODEL, SubjectTokenStore } from '../lib/subject-tokens/store.js';
import { BOUND_GRANT } from './scenarios.js';

/** The claims each bound token carries beyond oidc-provider's, by token, until it is signed. */
const BOUND_CLAIMS = new WeakMap<object, Record<string, unknown>>();

/**
 * `formats.customizers.jwt` for the bench's provider: a bound token's claims
 * (the hook's, `act`, the session), where the exchange's come from the
 * plugin's `extraTokenClaims`. Every token of the provider passes through it,
 * the baseline's too, at the cost of one call.
 */
export function boundClaimsCustomizer(_ctx: unknown, token: object, jwt: { payload: Record<string, unknown> }): void {
  const claims = BOUND_CLAIMS.get(token);
  if (claims) Object.assign(jwt.payload, claims);
}

/**
 * What the bench's provider is configured with for the bound: the support
 * console allowed its grant beside the exchange, and the customizer that adds
 * its claims. `registerBoundGrant` registers the grant once the provider is built.
 */
export function boundConfiguration(clients: readonly ClientMetadata[], console: string) {
  return {
    clients: clients.map((client) =>
      client.client_id === console ? { ...client, grant_types: [...(client.grant_types ?? []), BOUND_GRANT] } : client,
    ),
    formats: { customizers: { jwt: boundClaimsCustomizer } },
  };
}

export function registerBoundGrant(provider: Provider, hook: CustomJwtClaimsFunction | undefined): void {
  const store = openPluginStore(providerAdapter(provider), 'provider adapter', {
    outbox: false,
    approvals: false,
    ssf: false,
  });
  const subjectTokens = new SubjectTokenStore(store.subjectTokens);
  const sessions = new SessionStore(store.sessions);

  async function boundExchange(ctx: KoaContextWithOIDC): Promise<void> {
    const { provider } = ctx.oidc;
    const client = ctx.oidc.client!;
    const params = ctx.oidc.params as Record<string, string | undefined>;
    // The actor token first, as the exchange asks for them.
    const [actor, found] = await Promise.all([
      verifyAccessToken(provider, params['actor_token'] ?? '', 'AccessToken'),
      subjectTokens.find(params['subject_token'] ?? ''),
    ]);
    if (found.state !== 'valid' || !actor) throw new errors.InvalidGrant('no usable subject or actor token');
    const { record, key } = found;
    const { findAccount } = providerConfiguration(provider);
    const accounts = await Promise.all([findAccount(ctx, record.subject), findAccount(ctx, actor.sub)]);
    if (!accounts[0] || !accounts[1]) throw new errors.InvalidGrant('an account is gone');

    const resourceServer = await resolveSingleResource(ctx);
    const scope = grantedScopes(ctx, params['scope'], resourceServer);
    const token: AccessToken = new provider.AccessToken({
      accountId: record.subject,
      client,
      gty: TOKEN_EXCHANGE_GRANT,
      scope: scope.join(' ') || undefined,
      resourceServer,
    } as ConstructorParameters<Provider['AccessToken']>[0]);
    const act = { sub: actor.sub };
    const custom = hook
      ? await hook({
          token: { sub: record.subject, aud: token.aud, client_id: client.clientId, scope: token.scope, act },
          context: {
            grant: { type: TOKEN_EXCHANGE_GRANT, subjectTokenContext: record.context },
            client: { id: client.clientId },
            user: { id: record.subject },
            actor: { id: actor.sub },
          },
          environmentVariables: {},
        })
      : {};

    // The exchange's lifetime (its cap, the resource server's): a session that expires as the exchange's
    // does joins the indexes where the exchange's do.
    const expiresIn = Math.min(IMPERSONATION_DEFAULTS.accessTokenTTL, token.expiration);
    setTokenLifetime(token, expiresIn);
    const createdAt = Math.floor(Date.now() / 1000);
    const session: SessionRecord = {
      id: newSessionId(),
      subject: record.subject,
      actor: actor.sub,
      clientId: client.clientId,
      resource: resourceServer.identifier(),
      scope,
      context: record.context,
      subjectTokenId: record.id,
      accessTokenId: publicTokenId(token.format, assignTokenId(token)),
      ...(actor.grantId === undefined ? {} : { actorGrantId: actor.grantId }),
      ...(actor.sessionUid === undefined ? {} : { actorSessionUid: actor.sessionUid }),
      createdAt,
      expiresAt: createdAt + expiresIn,
    };
    BOUND_CLAIMS.set(token, { ...custom, act, [SESSION_CLAIM]: session.id });
    const value = await token.save();
    const outcome = await sessions.commit(session, { model: SUBJECT_TOKEN_MODEL, id: key }, {});
    if (outcome.outcome !== 'committed') throw new errors.InvalidGrant('not committed');

    // As oidc-provider answers its own grants.
    ctx.body = buildTokenResponse(ctx, {
      accessToken: value,
      expiresIn: token.expiration,
      scope: token.scope ?? '',
      tokenType: token.tokenType,
      issuedTokenType: ACCESS_TOKEN_TYPE,
    });
    announce(provider, exchangeSucceeded(client.clientId, record, session), ctx);
  }

  provider.registerGrantType(BOUND_GRANT, boundExchange, [...EXCHANGE_PARAMETERS], [...EXCHANGE_DUPLICATES]);
}
