import type { Provider } from 'oidc-provider';

type GrantPrototype = {
  addOIDCScope(scope: string | string[] | Set<string>): void;
  getOIDCScope(): string;
  rejectOIDCScope(scope: string): void;
};

/**
 * The management scope sits in the provider's `scopes` only so that a
 * client's `scope` metadata may name it; oidc-provider would otherwise treat
 * it as an ordinary OIDC scope, advertise it, and let any end-user flow
 * (authorization code, device, CIBA, refresh) carry it into a token.
 *
 * - Discovery leaves it out of `scopes_supported`.
 * - A Grant never holds it: whatever adds it (the deployment's interaction
 *   code, `loadExistingGrant`) rejects it instead, which also settles the
 *   consent prompt, and a grant stored with it reads without it. Every
 *   end-user token's OIDC scope comes from its Grant, so none can carry it.
 *
 * `client_credentials` uses no Grant: the management scope is still obtained
 * there, for the Management API resource, as `getResourceServerInfo` allows.
 */
export function isolateManagementScopes(provider: Provider, managementScopes: ReadonlySet<string>): void {
  const Grant = provider.Grant;
  const prototype = Grant.prototype as unknown as GrantPrototype;
  const { addOIDCScope, getOIDCScope } = prototype;

  prototype.addOIDCScope = function addOIDCScopeWithoutManagement(this: GrantPrototype, scope) {
    // oidc-provider calls the same method on the grant's `rejected` record, a plain object.
    if (!(this instanceof Grant)) return addOIDCScope.call(this, scope);
    const names = typeof scope === 'string' ? scope.split(' ') : [...scope];
    const kept = names.filter((name) => !managementScopes.has(name));
    const refused = names.filter((name) => managementScopes.has(name));
    if (kept.length || !refused.length) addOIDCScope.call(this, kept.join(' '));
    if (refused.length) this.rejectOIDCScope(refused.join(' '));
  };

  prototype.getOIDCScope = function getOIDCScopeWithoutManagement(this: GrantPrototype) {
    const granted = getOIDCScope.call(this);
    if (!(this instanceof Grant) || !granted) return granted;
    return granted
      .split(' ')
      .filter((name) => !managementScopes.has(name))
      .join(' ');
  };

  provider.use(async (ctx, next) => {
    await next();
    if (ctx.oidc?.route !== 'discovery') return;
    const body = ctx.body as { scopes_supported?: unknown } | undefined;
    if (Array.isArray(body?.scopes_supported)) {
      body.scopes_supported = body.scopes_supported.filter((name) => !managementScopes.has(name as string));
    }
  });
}
