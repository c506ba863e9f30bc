import { resolveDelegationLimits, type DelegationLimits } from '../capacity.js';
import { optionChecks, type OptionChecks } from '../config/checks.js';
import type { ExchangeDecision } from '../config/decisions.js';
import { DELEGATION_DEFAULTS, DELEGATION_MAXIMA } from '../config/defaults.js';

/** What a subject token establishes, whatever its type: who it is about, what it allows, until when. */
export interface DelegationSubject {
  /** A non-secret name of the subject token, for the session, the events and the trail. Never its value. */
  id: string;
  /** The user (or client) the subject token is about; the issued token's `sub`. */
  sub: string;
  /** The scopes the subject token carries: the issued token's can only be fewer. */
  scope: readonly string[];
  /** Expiry, seconds since the epoch: the issued token expires no later. */
  exp: number;
  /** The client the subject token was issued to, when it names one. */
  clientId?: string | undefined;
  /** The audiences (resource indicators) the subject token is for, when it names them. */
  audience?: readonly string[] | undefined;
  /** Its `act` chain (RFC 8693 4.1), nested below the new actor. */
  act?: Record<string, unknown> | undefined;
  /** Its `may_act` (RFC 8693 4.4): only the party it names may act. */
  mayAct?: Record<string, unknown> | undefined;
}

export interface SubjectTokenResolverInput {
  /** The subject_token as sent: the resolver's own to verify. */
  token: string;
  tokenType: string;
  /** The authenticated client that asks for the delegation. */
  clientId: string;
}

/** Verifies a deployment's own subject token type: `undefined` refuses it, a throw is a 5xx. */
export type SubjectTokenResolver = (
  input: SubjectTokenResolverInput,
) => DelegationSubject | undefined | Promise<DelegationSubject | undefined>;

export interface DelegationPolicyInput {
  clientId: string;
  subject: string;
  /** Who acts: the actor token's subject, or the client itself. */
  actor: string;
  /** `client` when `actor` is a client (the exchanging one, or one whose client-credentials token was the actor token). */
  actorType: 'client' | 'user';
  /** The whole `act` claim the token would carry, the new actor first. */
  act: Readonly<Record<string, unknown>>;
  resource: string;
  scope: string[];
  subjectTokenType: string;
  /** The session of the subject token, when it came from an impersonation or an earlier delegation. */
  parentSessionId?: string | undefined;
  /** The customer's access grant (`agr_…`) the originating impersonation started under, if any. */
  accessGrantId?: string | undefined;
}

export interface DelegationOptions {
  /** Decides each delegation: allow, refuse, or narrow the scopes (never widen). Default: allow. */
  canDelegate?: ((input: DelegationPolicyInput) => ExchangeDecision | Promise<ExchangeDecision>) | undefined;
  /** Maps an `audience` (RFC 8693 2.1) to a resource indicator; `undefined` refuses. Default: `audience` refused. */
  resolveAudience?:
    ((audience: string, client: { clientId: string }) => string | undefined | Promise<string | undefined>) | undefined;
  /** Most actors an `act` chain may name, the new one included. Default 3; at most 10. */
  maxChainDepth?: number | undefined;
  /** Cap on a delegated token's lifetime, seconds; the subject token's and the resource's, if lower, win. Default 300. */
  accessTokenTTL?: number | undefined;
  /** Subject token types of the deployment's own, by their URI, and how each is verified. */
  subjectTokenTypes?: Record<string, SubjectTokenResolver> | undefined;
  /** New delegation sessions per hour, per principal (lib/capacity.ts); beyond them, 429. */
  limits?: Partial<DelegationLimits> | undefined;
}

export type ResolvedDelegationOptions = Readonly<{
  canDelegate: DelegationOptions['canDelegate'];
  resolveAudience: DelegationOptions['resolveAudience'];
  maxChainDepth: number;
  accessTokenTTL: number;
  subjectTokenTypes: ReadonlyMap<string, SubjectTokenResolver>;
  limits: Readonly<DelegationLimits>;
}>;

const NAMES = Object.keys({
  canDelegate: true,
  resolveAudience: true,
  maxChainDepth: true,
  accessTokenTTL: true,
  subjectTokenTypes: true,
  limits: true,
} satisfies Record<keyof DelegationOptions, true>);

/** The token types the plugin itself verifies: no resolver may take their place. */
export const BUILT_IN_TYPES: ReadonlySet<string> = new Set([
  'urn:ietf:params:oauth:token-type:access_token',
  'urn:ietf:params:oauth:token-type:jwt',
  'urn:ietf:params:oauth:token-type:refresh_token',
  'urn:ietf:params:oauth:token-type:id_token',
]);

const check: OptionChecks = optionChecks('createImpersonation');
const fail: OptionChecks['fail'] = check.fail;

export function resolveDelegationOptions(input: DelegationOptions | undefined): ResolvedDelegationOptions {
  const given = input ?? {};
  if (typeof given !== 'object' || given === null) fail('delegation', 'must be an object');
  check.known(given, NAMES, 'delegation.');
  const {
    canDelegate,
    resolveAudience,
    maxChainDepth = DELEGATION_DEFAULTS.maxChainDepth,
    accessTokenTTL = DELEGATION_DEFAULTS.accessTokenTTL,
    subjectTokenTypes = {},
    limits,
  } = given;
  check.optionalFunction('delegation.canDelegate', canDelegate);
  check.optionalFunction('delegation.resolveAudience', resolveAudience);
  check.integer('delegation.maxChainDepth', maxChainDepth, DELEGATION_MAXIMA.maxChainDepth);
  check.integer('delegation.accessTokenTTL', accessTokenTTL, DELEGATION_MAXIMA.accessTokenTTL);
  if (typeof subjectTokenTypes !== 'object' || subjectTokenTypes === null) {
    fail('delegation.subjectTokenTypes', 'must be an object of functions by token type URI');
  }
  const types = new Map<string, SubjectTokenResolver>();
  for (const [type, resolver] of Object.entries(subjectTokenTypes)) {
    if (!URL.canParse(type) || BUILT_IN_TYPES.has(type)) {
      fail('delegation.subjectTokenTypes', 'must name absolute URIs other than the RFC 8693 token types');
    }
    if (typeof resolver !== 'function') fail('delegation.subjectTokenTypes', 'must map each type to a function');
    types.set(type, resolver);
  }
  return Object.freeze({
    canDelegate,
    resolveAudience,
    maxChainDepth,
    accessTokenTTL,
    subjectTokenTypes: types,
    limits: resolveDelegationLimits(limits),
  });
}
