/**
 * Who a replay entry's place is counted against, in a store that bounds
 * oidc-provider's `ReplayDetection` model (the memory adapter): the rule, and
 * the counts that apply it.
 *
 * oidc-provider writes a replay entry for every DPoP proof and client
 * assertion it accepts, and a public client's pushed authorization request
 * carries no credential: anyone can send one with a fresh proof, and each
 * writes an entry that lives 300 s. Unshared, a full model refuses every
 * proof, the exchange's included. So each entry is counted against the client
 * it names (`iss`), in one of two pools: entries that no credential stood
 * behind, and all the others (written only after a client authentication, a
 * code, a refresh token, an access token or a redeemable subject token
 * checked out). Anonymous traffic fills at most its own pool, one client's
 * share of it at a time; it never takes the place of a proof at the token
 * endpoint, the userinfo endpoint or the exchange.
 */
import Provider from 'oidc-provider';
import type { AdapterPayload } from 'oidc-provider';

/** The model oidc-provider keeps its spent DPoP proofs and client assertions in. */
export const REPLAY_MODEL = 'ReplayDetection';

type ReplayPool = 'anonymous' | 'credentialed';

/** The share an entry takes a place of: a client's, in one pool. */
export interface ReplayShare {
  readonly pool: ReplayPool;
  readonly client: string;
}

/**
 * Routes at which oidc-provider (and the plugin's exchange) spends a proof
 * only once a credential the request presented checked out: a grant's code,
 * refresh token or subject token at `token`, an access token at `userinfo`
 * and `credential`. Elsewhere (a pushed authorization request) a public
 * client's proof follows no credential at all.
 */
const CREDENTIALED_ROUTES: ReadonlySet<string> = new Set(['token', 'userinfo', 'credential']);

/** Anonymous writes hold at most this fraction of the model's bound; the credentialed ones the rest. */
const ANONYMOUS_FRACTION = 1 / 4;
/** One client's share of a pool. */
const CLIENT_FRACTION = 1 / 4;

interface ReplayShareBounds {
  /** Most entries each pool holds; together they make the model's bound. */
  pool: Record<ReplayPool, number>;
  /** Most entries one client holds in each pool. */
  perClient: Record<ReplayPool, number>;
}

/**
 * The shares of a replay model bounded at `bound` entries: a quarter for
 * anonymous writes, the rest for credentialed ones, and a quarter of each
 * pool per client (each at least one entry; meant for bounds of 16 or more).
 */
export function replayShareBounds(bound: number): ReplayShareBounds {
  const anonymous = Math.max(1, Math.floor(bound * ANONYMOUS_FRACTION));
  const credentialed = Math.max(1, bound - anonymous);
  return {
    pool: { anonymous, credentialed },
    perClient: {
      anonymous: Math.max(1, Math.floor(anonymous * CLIENT_FRACTION)),
      credentialed: Math.max(1, Math.floor(credentialed * CLIENT_FRACTION)),
    },
  };
}

/**
 * The share a replay entry being written takes, from the payload's `iss`
 * (the client, as oidc-provider writes it for proofs and assertions alike)
 * and the request being served. A write outside any request of the provider
 * (the deployment's own code) counts as credentialed.
 */
export function replayShareOf(payload: AdapterPayload): ReplayShare {
  const client = typeof payload['iss'] === 'string' ? payload['iss'] : '';
  const ctx = Provider.ctx;
  if (ctx === undefined || CREDENTIALED_ROUTES.has(ctx.oidc.route)) return { pool: 'credentialed', client };
  const authenticated = (ctx.oidc.client?.clientAuthMethod ?? 'none') !== 'none';
  return { pool: authenticated ? 'credentialed' : 'anonymous', client };
}

/** The entries held, by pool and by client share, against the bounds of one replay model. */
export class ReplayShareCounts {
  readonly #bounds: ReplayShareBounds;
  readonly #pools: Record<ReplayPool, number> = { anonymous: 0, credentialed: 0 };
  /** Only shares that hold an entry are listed, so there are never more than the model's entries. */
  readonly #shares = new Map<string, number>();

  constructor(bound: number) {
    this.#bounds = replayShareBounds(bound);
  }

  /** Whether `share` and its pool can take one more entry. */
  hasRoom(share: ReplayShare): boolean {
    return (
      this.#pools[share.pool] < this.#bounds.pool[share.pool] &&
      (this.#shares.get(shareKey(share)) ?? 0) < this.#bounds.perClient[share.pool]
    );
  }

  take(share: ReplayShare): void {
    const key = shareKey(share);
    this.#shares.set(key, (this.#shares.get(key) ?? 0) + 1);
    this.#pools[share.pool] += 1;
  }

  release(share: ReplayShare): void {
    const key = shareKey(share);
    const held = (this.#shares.get(key) ?? 0) - 1;
    if (held > 0) this.#shares.set(key, held);
    else this.#shares.delete(key);
    this.#pools[share.pool] -= 1;
  }
}

function shareKey({ pool, client }: ReplayShare): string {
  return `${pool}\n${client}`;
}
