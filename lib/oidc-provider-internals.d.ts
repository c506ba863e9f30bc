// Types for the oidc-provider modules that provider-internals.ts imports.
// They are outside oidc-provider's semantic versioning and ship no types.
declare module 'oidc-provider/lib/helpers/grants.js' {
  export const resolveRequestedResources: (...args: unknown[]) => Promise<unknown[]>;
  export const validateClientScope: (...args: unknown[]) => Set<string>;
  export const validateDpop: (...args: unknown[]) => Promise<unknown>;
  export const checkDpopReplay: (...args: unknown[]) => Promise<void>;
  export const checkDpopRequired: (...args: unknown[]) => void;
  export const checkMtlsCert: (...args: unknown[]) => unknown;
}

declare module 'oidc-provider/lib/helpers/revoke.js' {
  const revoke: (ctx: unknown, grantId: string) => Promise<void>;
  export default revoke;
}

declare module 'oidc-provider/lib/helpers/weak_cache.js' {
  const instance: (provider: object) => unknown;
  export default instance;
}

declare module 'oidc-provider/lib/helpers/jwt.js' {
  export const sign: (
    payload: Record<string, unknown>,
    key: unknown,
    alg: string,
    options?: { typ?: string; fields?: Record<string, unknown>; noIat?: boolean },
  ) => Promise<string>;
}

declare module 'oidc-provider/lib/helpers/defaults.js' {
  export const defaults: { clockTolerance: number } | undefined;
}
