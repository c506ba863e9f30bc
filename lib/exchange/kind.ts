import type { AccessToken, CanBePromise, KoaContextWithOIDC, ResourceServerInstance } from 'oidc-provider';
import type { AccessTokens } from '../access-token.js';
import type { ImpersonationEvent } from '../event-types.js';
import type { ResolvedCoreOptions } from '../core-options.js';
import type { EventBus } from '../events/subscriber.js';
import type { DpopProof } from '../provider-internals.js';
import type { SessionStore } from '../sessions/store.js';
import type { SubjectTokenStore } from '../subject-tokens/store.js';
import type { ExchangeStep } from '../telemetry/exchange.js';
import type { Telemetry } from '../telemetry/telemetry.js';
import type { ActorProof } from './actor.js';
import type { ExchangeClaims } from './claims.js';
import type { Commit } from './commit.js';
import type { CustomerGrants } from './customer-grant.js';
import type { ResolvedDelegationOptions } from './delegation-options.js';
import type { ResolvedIdJagIssuanceOptions } from './id-jag-options.js';
import type { ExchangeProgress } from './report.js';
import type { ExchangeParams } from './request.js';
import type { Issued } from './respond.js';

export interface ExchangeDependencies {
  options: ResolvedCoreOptions & {
    delegation: ResolvedDelegationOptions;
    idJagIssuance?: ResolvedIdJagIssuanceOptions | undefined;
  };
  /** The subject tokens the Management API created: an impersonation's subjects. */
  store: SubjectTokenStore;
  sessions: SessionStore;
  /** The customers' access grants, which subject tokens issued under one are checked against. */
  customerGrants: CustomerGrants;
  claims: ExchangeClaims;
  /** Where the exchange's events go. */
  bus: EventBus;
  tokens: AccessTokens;
  telemetry: Telemetry | undefined;
  /** Runs first: refuses an exchange through a provider mounted in a way the plugin cannot work in. */
  preflight?: ((ctx: KoaContextWithOIDC) => void) | undefined;
}

/** What an exchange issued, and its success event (none for a token issued under a live delegation, which had its own). */
export interface Exchanged extends Issued {
  event?: (() => ImpersonationEvent) | undefined;
}

/** What a kind established of the subject: whose token it issues, and whether the request's DPoP proof is spent now. */
export interface Subject {
  sub: string;
  spendsProof: boolean;
}

/** Where a token goes: a resource server of this provider, or another authorization server's issuer (an ID-JAG). */
export type Destination = ResourceServerInstance | string;

/** The requested target, as the ceiling and the policy see it. */
export interface Target {
  resource: string;
  scope: string[];
}

/**
 * What a kind made ready: the commit the route runs, with what to answer after a failed one (a raced delegation's
 * session), or a token already issued under a live delegation.
 */
export type Prepared =
  | {
      commit: Commit;
      issuedTokenType: string;
      /** How a token the kind minted itself is answered (an ID-JAG); none for an access token. */
      minted?: Issued['minted'];
      recover?: ((error: unknown) => Promise<Exchanged | undefined>) | undefined;
    }
  | { issued: Exchanged };

/** What the route hands a kind to finish with: the token to issue and everything the steps established. */
export interface Issue<S extends Subject, A, D extends Destination = ResourceServerInstance> {
  params: ExchangeParams;
  dpop: DpopProof | undefined;
  /** The access token to issue; none for a destination elsewhere, whose kind mints its own. */
  token: D extends string ? undefined : AccessToken;
  subject: S;
  actor: A;
  resource: string;
  scope: string[];
  expiresIn: number;
  startedAt: number;
  progress: ExchangeProgress;
  step: ExchangeStep;
}

/**
 * One kind of exchange (impersonation, delegation): what differs at each step of the one route
 * (lib/exchange/grant.ts), which runs the steps in order.
 */
export interface ExchangeKind<S extends Subject, A, D extends Destination = ResourceServerInstance> {
  /** Whether the request is this kind's. */
  handles(ctx: KoaContextWithOIDC): boolean;
  parameters(ctx: KoaContextWithOIDC, progress: ExchangeProgress): ExchangeParams;
  subject(ctx: KoaContextWithOIDC, params: ExchangeParams, progress: ExchangeProgress, dpop?: DpopProof): Promise<S>;
  target(ctx: KoaContextWithOIDC, params: ExchangeParams): Promise<D>;
  scopes(ctx: KoaContextWithOIDC, params: ExchangeParams, subject: S, destination: D): string[];
  actor(
    ctx: KoaContextWithOIDC,
    params: ExchangeParams,
    subject: S,
    proof: Omit<ActorProof, 'actorClients'>,
    progress: ExchangeProgress,
  ): Promise<A>;
  /** The customer's grant behind the subject, if any: the scopes it allows, and the seconds it has left. */
  ceiling(subject: S, actor: A, target: Target): CanBePromise<{ scope: string[]; secondsLeft: number }>;
  /** The deployment's policy: the scopes it allows. */
  decide(ctx: KoaContextWithOIDC, subject: S, actor: A, target: Target, params: ExchangeParams): CanBePromise<string[]>;
  /** The token's lifetime in seconds, at most `bound`. */
  lifetime(subject: S, actor: A, bound: number): number;
  /** Claims and session: what the route commits. */
  prepare(ctx: KoaContextWithOIDC, issue: Issue<S, A, D>): CanBePromise<Prepared>;
  /** Reports a refusal from what `progress` established (to listeners, and to the trail as its rules allow). */
  refused(ctx: KoaContextWithOIDC, progress: ExchangeProgress, error: unknown): Promise<void>;
}
