import type Koa from 'koa';
import type { Configuration, KoaContextWithOIDC, Provider, ResourceServer } from 'oidc-provider';
import { createMemoryAdapter } from './adapters/memory.js';
import { openPluginStore } from './adapters/plugin-store.js';
import { errors } from './errors.js';
import { ExchangeClaims } from './exchange/claims.js';
import { stepUpDetails } from './exchange/freshness.js';
import {
  createExchangeHandler,
  EXCHANGE_DUPLICATES,
  EXCHANGE_PARAMETERS,
  TOKEN_EXCHANGE_GRANT,
} from './exchange/grant.js';
import { createManagementRouter } from './management/router.js';
import { isolateManagementScopes } from './management/scope-isolation.js';
import { managementScopes, resolveOptions, type ImpersonationOptions, type ResolvedOptions } from './options.js';
import { providerAdapter, providerConfiguration } from './provider-internals.js';
import { endWithActor } from './sessions/actor-end.js';
import { SessionStore } from './sessions/store.js';
import { SubjectTokenStore } from './subject-tokens/store.js';

const DEFAULT_SCOPES = ['openid', 'offline_access'];

export interface InstallOptions {
  /**
   * Where to mount the Management API router. Default: the provider itself,
   * which puts it under the provider's mount path; pass the parent Koa app when
   * the provider is mounted below it (e.g. at `/oidc`) and the API should not be.
   */
  app?: Koa;
}

export interface Impersonation {
  /** The validated options, defaults filled in. */
  readonly options: Readonly<ResolvedOptions>;
  /**
   * Returns the provider configuration with what the plugin needs added:
   * resource indicators for the Management API, the `act` and custom claims in
   * `extraTokenClaims`, and, when none is set, a memory adapter for the provider
   * (which the plugin shares unless it has a `store` of its own). Pass the
   * result to `new Provider()`.
   */
  configure(configuration: Configuration): Configuration;
  /** Registers the token-exchange grant and mounts the Management API on a provider built from `configure()`. */
  install(provider: Provider, installOptions?: InstallOptions): void;
}

export function createImpersonation(input: ImpersonationOptions): Impersonation {
  const options = resolveOptions(input);
  // Opened (and checked) now, so that a store unfit for the plugin fails at start-up, naming the option.
  const ownStore = options.store && openPluginStore(options.store, 'store option');
  const claims = new ExchangeClaims();
  const configured = new WeakSet<object>();

  return {
    options,

    configure(configuration) {
      const resourceIndicators = configuration.features?.resourceIndicators ?? {};
      if (resourceIndicators.enabled === false) {
        throw new TypeError('impersonation needs features.resourceIndicators; do not disable it');
      }
      const extraTokenClaims = claims.wrap(configuration.extraTokenClaims);
      configured.add(extraTokenClaims);
      return {
        ...configuration,
        adapter: configuration.adapter ?? createMemoryAdapter(),
        // Listed so that a client's `scope` metadata may name it (that is how a client is allowed it);
        // install() keeps it out of discovery and of every end-user grant.
        scopes: [...new Set([...(configuration.scopes ?? DEFAULT_SCOPES), ...managementScopes(options)])],
        extraTokenClaims,
        features: {
          ...configuration.features,
          resourceIndicators: {
            ...resourceIndicators,
            enabled: true,
            getResourceServerInfo: managementResourceInfo(options, resourceIndicators.getResourceServerInfo),
          },
        },
      };
    },

    install(provider, { app } = {}) {
      const configuration = providerConfiguration(provider);
      if (!configured.has(configuration.extraTokenClaims as object)) {
        throw new TypeError('build the Provider from impersonation.configure(configuration) before install()');
      }
      // Without a store of its own, the plugin's records live in the provider's adapter, which must then be fit for them.
      const pluginStore = ownStore || openPluginStore(providerAdapter(provider), 'provider adapter');
      isolateManagementScopes(provider, managementScopes(options));
      const store = new SubjectTokenStore(pluginStore.subjectTokens);
      const sessions = new SessionStore(pluginStore.sessions);
      provider.registerGrantType(
        TOKEN_EXCHANGE_GRANT,
        createExchangeHandler({ options, store, sessions, claims }),
        [...EXCHANGE_PARAMETERS],
        [...EXCHANGE_DUPLICATES],
      );
      endWithActor(provider, sessions, options.auditLog);
      if (options.actorAuthentication) provider.use(stepUpDetails());
      const router = createManagementRouter(provider, options, { subjectTokens: store, sessions });
      (app ?? provider).use(router.routes()).use(router.allowedMethods());
    },
  };
}

type GetResourceServerInfo = (
  ctx: KoaContextWithOIDC,
  resource: string,
  client: NonNullable<KoaContextWithOIDC['oidc']['client']>,
) => ResourceServer | Promise<ResourceServer>;

/**
 * Answers for the Management API resource and passes every other resource to
 * the deployment's own function. The management scope is handed out only
 * through `client_credentials`, and only to clients whose `scope` metadata
 * lists it: oidc-provider checks a client's `scope` only for OIDC scopes, not
 * for resource scopes, so without this any client could mint itself one.
 */
function managementResourceInfo(
  options: ResolvedOptions,
  existing: GetResourceServerInfo | undefined,
): GetResourceServerInfo {
  return async function getResourceServerInfo(ctx, resource, client) {
    if (resource !== options.managementResource) {
      if (!existing) throw new errors.InvalidTarget();
      return existing(ctx, resource, client);
    }
    const scopes = managementScopes(options);
    const allowed = (client.scope ?? '').split(' ').filter((name) => scopes.has(name));
    if (ctx.oidc.params?.['grant_type'] !== 'client_credentials' || !allowed.length) {
      throw new errors.InvalidTarget('this client may not obtain tokens for the Management API');
    }
    // Only the management scopes the client's metadata lists.
    return {
      scope: allowed.join(' '),
      accessTokenFormat: options.managementTokenFormat,
      accessTokenTTL: options.managementTokenTTL,
    };
  };
}
