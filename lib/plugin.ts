import type { EventEmitter } from 'node:events';
import type Koa from 'koa';
import type { Configuration, KoaContextWithOIDC, Provider, ResourceServer } from 'oidc-provider';
import { AccessTokens } from './access-token.js';
import { createMemoryAdapter } from './adapters/memory.js';
import { customerResourceInfo } from './customer/check.js';
import { ApprovalStore } from './approvals/store.js';
import { openPluginStore } from './adapters/plugin-store.js';
import { calledTooLate, invalidArgument, invalidCall, invalidTarget, misconfigured } from './errors.js';
import { withDelegationMetadata } from './exchange/delegation-metadata.js';
import { ExchangeClaims } from './exchange/claims.js';
import { addStepUpDetails } from './exchange/freshness.js';
import { createExchangeHandler, EXCHANGE_DUPLICATES, EXCHANGE_PARAMETERS } from './exchange/grant.js';
import { createIdJagHandler, ID_JAG_PROFILE, JWT_BEARER_GRANT } from './exchange/id-jag.js';
import { ID_JAG_TOKEN_TYPE, withIdJagMetadata } from './exchange/id-jag-issuance.js';
import { followIssuerStreams } from './exchange/id-jag-streams.js';
import { TOKEN_EXCHANGE_GRANT } from './token-claims.js';
import {
  checkStaticClients,
  MANAGEMENT_SCOPE_METADATA,
  managementScopesOf,
  withManagementMetadata,
} from './management/client-metadata.js';
import { managementApiHandler, type ManagementApiHandler } from './management/node-handler.js';
import { customerRoutes } from './customer/routes.js';
import { createManagementApi } from './management/router.js';
import { optionChecks, type OptionChecks } from './config/checks.js';
import { managementScopes, resolveOptions, type ImpersonationOptions, type ResolvedOptions } from './options.js';
import {
  assertModelInternals,
  clockToleranceOf,
  providerAdapter,
  providerConfiguration,
  providerSigningKey,
} from './provider-internals.js';
import { ssfDefaultResource } from './ssf/default-resource.js';
import { ssfDelivery } from './ssf/deliver.js';
import { ssfDiscoveryMiddleware } from './ssf/discovery.js';
import { StreamStore } from './ssf/store.js';
import { ssfSubscriber, type Transmitter } from './ssf/transmit.js';
import { endWithOrigins } from './sessions/origin-end.js';
import { SessionStore } from './sessions/store.js';
import { SubjectTokenStore } from './subject-tokens/store.js';
import type { EventBus, EventSubscriber } from './events/subscriber.js';
import { JOURNAL, type JournaledSink } from './audit/journal.js';
import { trailSubscriber } from './audit/trail.js';
import { webhookSubscriber } from './webhooks/notify.js';
import { observeProvider, timedTrail } from './telemetry/observe.js';
import { openTelemetry } from './telemetry/telemetry.js';
import { outboxView, startDelivery, type RequestsInFlight, type WebhookDelivery } from './webhooks/worker.js';

export interface InstallOptions {
  /** Whether install() mounts the Management API in the provider's middleware (default `true`); `false` leaves mounting to the deployment. */
  mountManagementApi?: boolean | undefined;
}

export interface Impersonation {
  /** The validated options, defaults filled in. */
  readonly options: Readonly<ResolvedOptions>;
  /** Returns the provider configuration with what the plugin needs added; pass it to `new Provider()`. */
  configure(configuration: Configuration): Configuration;
  /** Registers the token-exchange grant and, unless told not to, mounts the Management API; call it before the provider is mounted. */
  install(provider: Provider, installOptions?: InstallOptions): void;
  /** The Management API as a Koa middleware, for `install(provider, { mountManagementApi: false })`. */
  managementApi(): Koa.Middleware;
  /** The Management API as a Node request handler `(req, res, next?)` for Express, Fastify (middie), `node:http`. */
  managementApiHandler(): ManagementApiHandler;
  /** The webhooks' delivery: statistics, dead letters and `stop()` (docs/webhooks.md). */
  webhooks(): WebhookDelivery;
  /** The delivery of SSF streams (the webhooks' outbox and worker): statistics per `ssf:<stream_id>`, dead letters, `stop()`. */
  ssf(): WebhookDelivery;
  /** The SSF transmitter metadata at its SSF 1.0 7.2 location, as a Koa middleware for the host app's root (docs/ssf.md). */
  ssfDiscovery(): Koa.Middleware;
  /** `ssfDiscovery()` as a Node request handler `(req, res, next)`, for Express, Fastify (middie), `node:http`. */
  ssfDiscoveryHandler(): ManagementApiHandler;
  /** Stops polling the trusted issuers' SSF streams (`idJag.trustedIssuers[].ssf`) for good, a later install()'s too: their ID-JAGs are then refused. */
  stopIssuerStreams(): void;
}

export function createImpersonation(input: ImpersonationOptions): Impersonation {
  const resolved = resolveOptions(input);
  const telemetry = openTelemetry(resolved.telemetry);
  // Invariant 44: the journal is read from the deployment's own trail, which the timing below wraps.
  const trail: JournaledSink | undefined = resolved.auditLog;
  const journal = trail?.[JOURNAL]?.sink === trail ? trail?.[JOURNAL] : undefined;
  // Every append the plugin makes is timed; the deployment's own trail object stays as it is.
  const options =
    telemetry && trail ? Object.freeze({ ...resolved, auditLog: timedTrail(telemetry, trail) }) : resolved;
  // Opened now: a store unfit for the plugin fails at start-up, naming the option.
  const domains = {
    outbox: options.webhooks !== undefined || options.ssf !== undefined,
    approvals: options.approvals !== undefined,
    ssf: options.ssf !== undefined,
  };
  const ownStore = options.store && openPluginStore(options.store, 'store option', domains);
  const claims = new ExchangeClaims();
  const configured = new WeakSet<object>();
  const scopes = managementScopes(options);
  let api: Koa.Middleware | undefined;
  let handler: ManagementApiHandler | undefined;
  let delivery: WebhookDelivery | undefined;
  let discovery: { middleware: Koa.Middleware; handler: ManagementApiHandler } | undefined;
  const issuerStreamsStop = new AbortController();
  // Each stream is read, and acknowledged, for one provider only: its SETs end sessions in that provider's store.
  const pollsStreams = [...(options.idJag?.trustedIssuers.values() ?? [])].some((issuer) => issuer.ssf);
  let streamsFollowed = false;

  /** Invariant 41: the requests that passed the entry install() mounted, on the providers it mounted the API on. */
  const served = new WeakSet<object>();
  const mountedOn = new WeakSet<object>();
  const witness: Koa.Middleware = (ctx, next) => {
    served.add(ctx);
    return next();
  };

  /** Invariant 41: install before mount. */
  function assertManagementApiReachable(ctx: KoaContextWithOIDC): void {
    if (mountedOn.has(ctx.oidc.provider) && !served.has(ctx)) throw misconfigured(MOUNTED_TOO_EARLY);
  }

  function discoveryOf(call: string): NonNullable<typeof discovery> {
    return made(
      discovery,
      call,
      options.ssf ? 'call impersonation.install(provider) first' : 'the "ssf" option is not set',
    );
  }

  return {
    options,

    configure(configuration) {
      const resourceIndicators = configuration.features?.resourceIndicators ?? {};
      if (resourceIndicators.enabled === false) {
        configureCheck.fail('features.resourceIndicators', 'must stay enabled: the plugin needs it');
      }
      // Without it oidc-provider knows no resource server, and an exchange must name one: every exchange would fail.
      if (typeof resourceIndicators.getResourceServerInfo !== 'function') {
        configureCheck.fail(
          'features.resourceIndicators.getResourceServerInfo',
          'must be a function that describes the resource servers impersonation tokens are for: ' +
            'without it every token exchange is refused with invalid_target',
        );
      }
      if (configuredByAnyPlugin.has(configuration.extraTokenClaims as object)) {
        throw invalidCall(
          'impersonation.configure',
          'the configuration went through configure() already, of this or another createImpersonation(): ' +
            'a provider takes one impersonation plugin',
        );
      }
      // Scopes that are no Array or Set are oidc-provider's to refuse, in its words.
      const listed = configuration.scopes;
      const clash = (Array.isArray(listed) || listed instanceof Set ? [...listed] : []).filter((name) =>
        scopes.has(name),
      );
      if (clash.length) {
        throw invalidCall(
          'impersonation.configure',
          `scopes lists ${clash.join(' ')}, a scope of the Management API: remove it; ` +
            `a client may obtain it through its ${MANAGEMENT_SCOPE_METADATA} metadata`,
        );
      }
      checkStaticClients(configuration.clients, scopes);
      const extraTokenClaims = claims.wrap(configuration.extraTokenClaims);
      configured.add(extraTokenClaims);
      configuredByAnyPlugin.add(extraTokenClaims);
      return {
        ...configuration,
        adapter: configuration.adapter ?? createMemoryAdapter({ clockTolerance: clockToleranceOf(configuration) }),
        extraClientMetadata: withIdJagMetadata(
          withDelegationMetadata(withManagementMetadata(configuration.extraClientMetadata, scopes)),
          options.idJagIssuance !== undefined,
        ),
        extraTokenClaims,
        ...((options.idJag || options.idJagIssuance) && {
          discovery: {
            ...(options.idJag && { authorization_grant_profiles_supported: [ID_JAG_PROFILE] }),
            ...(options.idJagIssuance && { identity_chaining_requested_token_types_supported: [ID_JAG_TOKEN_TYPE] }),
            ...configuration.discovery,
          },
        }),
        features: {
          ...configuration.features,
          resourceIndicators: {
            ...resourceIndicators,
            enabled: true,
            ...(options.ssf && {
              defaultResource: ssfDefaultResource(
                options.managementResource,
                options.ssf.readScopes,
                managementScopesOf,
                resourceIndicators.defaultResource,
              ),
            }),
            getResourceServerInfo: managementResourceInfo(
              options,
              resourceIndicators.getResourceServerInfo,
              assertManagementApiReachable,
            ),
          },
        },
      };
    },

    install(provider, installOptions = {}) {
      const { mountManagementApi } = checkInstallOptions(installOptions);
      if (installed.has(provider)) {
        throw invalidCall(
          'impersonation.install',
          'the plugin is installed on this provider already: call install() once per provider',
        );
      }
      const configuration = providerConfiguration(provider);
      if (!configured.has(configuration.extraTokenClaims as object)) {
        throw invalidCall(
          'impersonation.install',
          configuredByAnyPlugin.has(configuration.extraTokenClaims as object)
            ? 'the provider was built from the configure() of another createImpersonation(): install that one'
            : 'build the Provider from impersonation.configure(configuration) first',
        );
      }
      assertModelInternals(provider);
      if (pollsStreams && streamsFollowed) throw invalidCall('impersonation.install', ONE_STREAM_READER);
      // Invariant 41: Koa's `callback()` adds `app.onerror` as the `error` listener.
      if (mountManagementApi && provider.listeners('error').includes(provider.onerror))
        throw calledTooLate(MOUNTED_TOO_EARLY);
      const pluginStore = ownStore || openPluginStore(providerAdapter(provider), 'provider adapter', domains);
      const { outbox, ssfStreams } = pluginStore;
      // SETs are signed with the provider's key: one it lacks stops the start, not the first stop.
      if (options.ssf) providerSigningKey(provider);
      const store = new SubjectTokenStore(pluginStore.subjectTokens);
      const sessions = new SessionStore(pluginStore.sessions);
      // Always opened: a subject token issued under a grant is checked against it after the option is removed.
      const approvals = new ApprovalStore(pluginStore.approvals);
      // SSF transmits when the store keeps streams and an outbox.
      const transmitter: Transmitter | undefined =
        options.ssf && outbox && ssfStreams
          ? {
              provider,
              outbox,
              streams: new StreamStore(ssfStreams),
              options: options.ssf,
              wake: () => delivery?.wake(),
            }
          : undefined;
      // Invariant 42: the subscribers in the order they are told of an event, the trail first.
      const subscribers: EventSubscriber[] = [];
      if (options.auditLog) subscribers.push(trailSubscriber(options.auditLog, journal));
      if (transmitter) subscribers.push(ssfSubscriber(transmitter));
      if (options.webhooks && outbox) subscribers.push(webhookSubscriber(provider, outbox, options.webhooks));
      const bus: EventBus = { provider, subscribers };
      // Every check passed: from here on the provider is changed, and a second install() is refused.
      installed.set(provider, bus);
      observeProvider(telemetry, provider as unknown as EventEmitter, () => delivery);
      provider.registerGrantType(
        TOKEN_EXCHANGE_GRANT,
        createExchangeHandler({
          options,
          store,
          sessions,
          customerGrants: { find: (id) => approvals.findGrantWithState(id) },
          claims,
          bus,
          tokens: new AccessTokens(provider),
          telemetry,
          preflight: assertManagementApiReachable,
        }),
        [...EXCHANGE_PARAMETERS],
        [...EXCHANGE_DUPLICATES],
      );
      if (options.idJag) {
        const streams = followIssuerStreams(options.idJag, sessions, bus, issuerStreamsStop.signal);
        streamsFollowed = true;
        const idJagGrant = createIdJagHandler({ options: options.idJag, sessions, bus, claims, streams });
        // What the grant reads beside client authentication; oidc-provider strips every other parameter.
        provider.registerGrantType(JWT_BEARER_GRANT, idJagGrant, ['assertion', 'scope', 'resource']);
      }
      const requests: RequestsInFlight = { count: 0 };
      // Invariant 43: every request is counted; delivery runs in idle time.
      provider.middleware.unshift(async (_ctx, next) => {
        requests.count += 1;
        try {
          await next();
        } finally {
          requests.count -= 1;
        }
      });
      endWithOrigins(bus, sessions);
      if (options.actorAuthentication) addStepUpDetails(provider);
      if (transmitter) {
        const middleware = ssfDiscoveryMiddleware(transmitter);
        discovery = { middleware, handler: managementApiHandler(middleware, provider as unknown as EventEmitter) };
      }
      const stores = { subjectTokens: store, sessions, approvals };
      api = createManagementApi(bus, options, stores, transmitter, telemetry, customerRoutes);
      if (outbox && (options.webhooks || options.ssf)) {
        delivery = options.deliverOutbox
          ? startDelivery(provider, outbox, options.webhooks ?? ssfOnlyDelivery(options.ssf!), {
              other: transmitter && ssfDelivery(transmitter),
              requests,
              telemetry,
            })
          : outboxView(
              outbox,
              (options.webhooks?.subscriptions ?? []).map(({ id }) => id),
            );
      }
      handler = managementApiHandler(api, provider as unknown as EventEmitter);
      if (mountManagementApi) {
        mountedOn.add(provider);
        provider.use(witness).use(api);
      }
    },

    managementApi: () => made(api, 'managementApi'),

    webhooks: () =>
      made(
        delivery,
        'webhooks',
        options.webhooks ? undefined : 'the "webhooks" option is not set: there is no delivery',
      ),

    ssf: () => made(options.ssf && delivery, 'ssf', options.ssf ? undefined : 'the "ssf" option is not set'),

    ssfDiscovery: () => discoveryOf('ssfDiscovery').middleware,

    ssfDiscoveryHandler: () => discoveryOf('ssfDiscoveryHandler').handler,

    managementApiHandler: () => made(handler, 'managementApiHandler'),

    stopIssuerStreams: () => issuerStreamsStop.abort(),
  };
}

/** What install() made, or the refusal of `impersonation.<call>()` made before it, or without the option it needs (`unset`). */
function made<T>(value: T | undefined, call: string, unset?: string): T {
  if (value === undefined) {
    throw invalidCall(`impersonation.${call}`, unset ?? `call impersonation.install(provider) before ${call}()`);
  }
  return value;
}

/** The delivery's timing when SSF streams are its only receivers (webhooks, when set, bring their own). */
function ssfOnlyDelivery(ssf: NonNullable<ResolvedOptions['ssf']>): NonNullable<ResolvedOptions['webhooks']> {
  return {
    subscriptions: [],
    maxPending: ssf.maxPending,
    maxAttempts: ssf.maxAttempts,
    maxAgeMs: ssf.retentionSeconds * 1000,
    deadLetterRetentionMs: ssf.retentionSeconds * 1000,
    timeoutMs: ssf.timeoutMs,
    pollIntervalMs: ssf.pollIntervalMs,
    maxBackoffMs: 3600 * 1000,
  };
}

const ONE_STREAM_READER =
  'idJag.trustedIssuers[].ssf is set: a stream is read, and acknowledged, for one provider only; install() once, ' +
  'or make a createImpersonation() per provider, each with a stream of its own';

/** The providers install() ran on, each with its event bus. */
const installed = new WeakMap<object, EventBus>();

/** The event bus install() made for `provider`, for the tests and benchmarks that run the customer's operations on it. */
export function installedEventBus(provider: object): EventBus | undefined {
  return installed.get(provider);
}

const configuredByAnyPlugin = new WeakSet<object>();

const configureCheck: OptionChecks = optionChecks('impersonation.configure');
const installCheck: OptionChecks = optionChecks('impersonation.install');
const INSTALL_OPTION_NAMES = Object.keys({ mountManagementApi: true } satisfies Record<keyof InstallOptions, true>);

/** `install()`'s second argument: a plain object, never a host app passed in its place. */
function checkInstallOptions(installOptions: unknown): Required<InstallOptions> {
  if (!isPlainObject(installOptions)) {
    throw invalidArgument(
      'impersonation.install',
      'installOptions',
      'must be a plain object of install options, not an app; to serve the Management API from a host app, call ' +
        'install(provider, { mountManagementApi: false }), then app.use(impersonation.managementApi()) on a Koa app ' +
        'or app.use(impersonation.managementApiHandler()) on Express or Fastify',
    );
  }
  installCheck.known(installOptions, INSTALL_OPTION_NAMES);
  const { mountManagementApi = true } = installOptions as InstallOptions;
  if (typeof mountManagementApi !== 'boolean') installCheck.fail('mountManagementApi', 'must be true or false');
  return { mountManagementApi };
}

/** An object literal (or made by Object.create(null)): not an array, a function, nor an instance of a class. */
function isPlainObject(value: unknown): value is object {
  if (typeof value !== 'object' || value === null) return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

const MOUNTED_TOO_EARLY =
  "impersonation.install() ran after the provider's middleware was composed (provider.callback(), " +
  'provider.listen() or a mount such as koa-mount), so the Management API it adds would never be reached: ' +
  'call install() right after new Provider(), before mounting the provider; or call ' +
  'install(provider, { mountManagementApi: false }) and mount impersonation.managementApi() yourself';

type GetResourceServerInfo = (
  ctx: KoaContextWithOIDC,
  resource: string,
  client: NonNullable<KoaContextWithOIDC['oidc']['client']>,
) => ResourceServer | Promise<ResourceServer>;

/** Invariant 40: management scopes only through client_credentials and the client's metadata. */
function managementResourceInfo(
  options: ResolvedOptions,
  existing: GetResourceServerInfo,
  assertReachable: (ctx: KoaContextWithOIDC) => void,
): GetResourceServerInfo {
  return async function getResourceServerInfo(ctx, resource, client) {
    if (options.approvals && resource === options.approvals.customerResource) {
      const info = customerResourceInfo(ctx, options.approvals, client);
      assertReachable(ctx);
      return info;
    }
    if (resource !== options.managementResource) return existing(ctx, resource, client);
    const allowed = managementScopesOf(client);
    if (ctx.oidc.params?.['grant_type'] !== 'client_credentials' || !allowed.length) {
      throw invalidTarget('this client may not obtain tokens for the Management API');
    }
    assertReachable(ctx);
    return {
      scope: allowed.join(' '),
      accessTokenFormat: options.managementTokenFormat,
      accessTokenTTL: options.managementTokenTTL,
    };
  };
}
