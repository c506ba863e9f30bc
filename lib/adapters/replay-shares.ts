/** Replay entries counted per client in two pools, anonymous and credentialed (Invariant 13). */
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

/** Routes where a proof is spent only after a presented credential checked out. */
const CREDENTIALED_ROUTES: ReadonlySet<string> = new Set(['token', 'userinfo', 'credential']);

/** Anonymous writes hold at most this fraction of the model's bound; the credentialed ones the rest. */
const ANONYMOUS_FRACTION = 1 / 4;
/** One client's share of a pool. */
const CLIENT_FRACTION = 1 / 4;

/** The shares of a replay model bounded at `bound`: a quarter for anonymous writes, a quarter of each pool per client. */
export function replayShareBounds(bound: number) {
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

/** The share a replay entry takes, by its `iss` and the request; outside any request it counts as credentialed. */
export function replayShareOf(payload: AdapterPayload): ReplayShare {
  const client = typeof payload['iss'] === 'string' ? payload['iss'] : '';
  const ctx = Provider.ctx;
  if (ctx === undefined || CREDENTIALED_ROUTES.has(ctx.oidc.route)) return { pool: 'credentialed', client };
  const authenticated = (ctx.oidc.client?.clientAuthMethod ?? 'none') !== 'none';
  return { pool: authenticated ? 'credentialed' : 'anonymous', client };
}

/** The entries held, by pool and by client share, against the bounds of one replay model. */
export class ReplayShareCounts {
  readonly #bounds: ReturnType<typeof replayShareBounds>;
  readonly #pools: Record<ReplayPool, number> = { anonymous: 0, credentialed: 0 };
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
