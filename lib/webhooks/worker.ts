import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import type { Provider } from 'oidc-provider';
import type {
  DeadLetter,
  LeasedEntry,
  OutboxStats,
  OutboxStore,
  Settlement,
  SettledEntry,
} from '../outbox/contract.js';
import type { ResolvedWebhookOptions } from './options.js';
import { createPoster, type PostAnswer, type Poster } from './post.js';
import { emitOn, reportError } from '../report-error.js';
import { webhookHeaders } from './sign.js';
import { tracedDelivery } from '../telemetry/delivery.js';
import type { Telemetry } from '../telemetry/telemetry.js';

/** Emitted on the provider when an entry is dead-lettered: `{ subscription, id, reason, attempts }`. */
export const WEBHOOK_DEAD_LETTERED = 'impersonation.webhook.dead_lettered';
/** Emitted when a receiver answered 410 Gone: this instance stops delivering to it. `{ subscription }`. */
export const WEBHOOK_GONE = 'impersonation.webhook.gone';

/** Entries one look at the outbox leases at most. */
const BATCH = 32;
/** Invariant 46: deliveries under way per subscription. */
export const IN_FLIGHT_PER_SUBSCRIPTION = 16;
/** How long settled deliveries wait for the others, so that a batch settles in one trip to the store. */
const GATHER_MS = 20;
/** What a lease adds to the receiver's time: the settlement's round trip to the store. */
const LEASE_MARGIN_MS = 5000;
/** First retry delay; each attempt doubles it, up to `maxBackoff`. */
const FIRST_RETRY_MS = 1000;
/** Longest wait after the store failed. */
const STORE_BACKOFF_MS = 30_000;
/** Invariant 43: delivery yields to requests and to a busy event loop. */
const BUSY_UTILISATION = 0.5;
const YIELD_STEP_MS = 20;
/** A look waits for a quiet moment at most this many poll intervals. */
const MAX_YIELD_POLL_INTERVALS = 4;

const KEEPS = Symbol('provider');

/** A receiver's answer: its status (0 when none came) and any Retry-After. */
export type HttpAnswer = Pick<PostAnswer, 'status'> & Partial<Pick<PostAnswer, 'retryAfter'>>;

/** Entries of the outbox that are not webhooks (SSF streams): their subscriptions and how one is delivered. */
export interface OtherDelivery {
  owns(subscription: string): boolean;
  deliver(entry: LeasedEntry, http: DeliveryHttp, provider: Provider): Promise<Settlement | HttpAnswer>;
}

/** What a delivery POSTs with: the loop's connections, its stop signal, the receiver's time. */
export type DeliveryHttp = { post: Poster['post']; signal: AbortSignal; timeoutMs: number };

export interface WebhookDelivery {
  /** Entries waiting, dead letters kept and entries dropped, per subscription, across every instance. */
  stats(): Promise<OutboxStats>;
  /** Dead letters, latest first. */
  deadLetters(limit?: number): Promise<DeadLetter[]>;
  /** Looks at the outbox now, rather than at the next interval, unless a look is under way. */
  wake(): void;
  /** Stops looking at the outbox and abandons deliveries in flight (their leases run out; another instance takes them). */
  stop(): Promise<void>;
}

/** The outbox of an instance that delivers nothing (`deliverOutbox: false`): the store's statistics and dead letters. */
export function outboxView(outbox: OutboxStore, ids: readonly string[] = []): WebhookDelivery {
  return {
    async stats() {
      const stats = await outbox.stats();
      const idle = Object.fromEntries(ids.map((id) => [id, { pending: 0, dead: 0, dropped: 0 }]));
      return { ...stats, subscriptions: { ...idle, ...stats.subscriptions } };
    },
    deadLetters: (limit = 100) => outbox.deadLetters(limit),
    wake() {},
    async stop() {},
  };
}

/** Invariant 43: the requests the provider is answering now, counted by its first middleware. */
export type RequestsInFlight = { count: number };

/** What the loop works with beside the outbox: SSF's deliveries, the provider's requests in flight, the telemetry. */
export interface DeliveryContext {
  other?: OtherDelivery | undefined;
  requests?: RequestsInFlight;
  telemetry?: Telemetry | undefined;
}

/** Delivers what the outbox holds: leases, POSTs signed, settles with backoff or dead-letters; Invariants 43, 46, 47, 48. */
export function startDelivery(
  provider: Provider,
  outbox: OutboxStore,
  options: ResolvedWebhookOptions,
  { other, requests = { count: 0 }, telemetry }: DeliveryContext = {},
): WebhookDelivery {
  // Invariant 48: no timer holds the provider, nor the telemetry (its gauges and grant handler lead back to it).
  const held = new WeakRef(provider);
  const heldTelemetry = telemetry && new WeakRef(telemetry);
  const leaseMs = options.timeoutMs + LEASE_MARGIN_MS;
  const stopping = new AbortController();
  const poster = createPoster();
  const http: DeliveryHttp = { post: poster.post, signal: stopping.signal, timeoutMs: options.timeoutMs };
  const deliver = entryDelivery(options, other, http);
  const settler = batchSettler(held, outbox, wake);
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let storeFailures = 0;
  let wokenMeanwhile = false;
  /** Deliveries under way, per subscription: what a claim must leave room for. */
  const out = new Map<string, number>();
  const underWay = new Set<Promise<void>>();

  const maxYieldMs = MAX_YIELD_POLL_INTERVALS * options.pollIntervalMs;
  let loopSample: EventLoopUtilization = performance.eventLoopUtilization();
  /** Since when the look that is due has been waiting for a quiet moment. */
  let yieldingSince: number | undefined;

  function schedule(delay: number): void {
    if (stopping.signal.aborted) return;
    timer = setTimeout(lookWhenQuiet, delay);
    timer.unref();
  }

  /** Invariant 43: looks at the outbox unless the process was busy serving. */
  function lookWhenQuiet(): void {
    const sample = performance.eventLoopUtilization();
    const busy =
      requests.count > 0 || performance.eventLoopUtilization(sample, loopSample).utilization > BUSY_UTILISATION;
    loopSample = sample;
    const now = Date.now();
    if (busy && now - (yieldingSince ??= now) < maxYieldMs) return schedule(YIELD_STEP_MS);
    yieldingSince = undefined;
    running = look().finally(() => {
      running = undefined;
    });
  }

  function wake(): void {
    if (stopping.signal.aborted) return;
    if (running) {
      wokenMeanwhile = true;
      return;
    }
    clearTimeout(timer);
    schedule(0);
  }

  async function look(): Promise<void> {
    const provider = held.deref();
    if (!provider) return end();
    wokenMeanwhile = false;
    const now = Date.now();
    const claimed = await outbox
      .claim(BATCH, leaseMs, now, now - options.deadLetterRetentionMs, { each: IN_FLIGHT_PER_SUBSCRIPTION, out })
      .catch((error: unknown) => reportError(provider, error));
    if (!claimed) {
      storeFailures += 1;
      return schedule(jitter(Math.min(STORE_BACKOFF_MS, options.pollIntervalMs * 2 ** storeFailures)));
    }
    storeFailures = 0;
    for (const entry of claimed) start(entry, provider);
    // A full batch means more may be due at once; otherwise the next look waits (or a settlement wakes it).
    schedule(claimed.length === BATCH || wokenMeanwhile ? 0 : jitter(options.pollIntervalMs));
  }

  /** Delivers an entry beside the others under way, and hands its settlement on. */
  function start(entry: LeasedEntry, provider: Provider): void {
    out.set(entry.subscription, (out.get(entry.subscription) ?? 0) + 1);
    settler.delivering();
    const delivery = tracedDelivery(heldTelemetry?.deref(), entry, () => deliver(entry, provider)).then(
      settler.answered,
      (error: unknown) => {
        settler.answered(undefined);
        reportError(provider, error);
      },
    );
    underWay.add(delivery);
    void delivery.finally(() => {
      underWay.delete(delivery);
      const left = (out.get(entry.subscription) ?? 1) - 1;
      if (left > 0) out.set(entry.subscription, left);
      else out.delete(entry.subscription);
    });
  }

  function end(): void {
    stopping.abort();
    clearTimeout(timer);
    poster.close();
  }

  schedule(0);
  const ids = options.subscriptions.map(({ id }) => id);
  // Invariant 48: the handle keeps the provider, and with it the loop; the loop's own closures do not.
  const handle = {
    [KEEPS]: provider,
    ...outboxView(outbox, ids),
    wake,
    async stop() {
      end();
      await running;
      await Promise.all(underWay);
      await settler.settling;
    },
  };
  return handle;
}

/** Delivers an entry; undefined leaves it leased, to be delivered again (Invariant 47). */
function entryDelivery(options: ResolvedWebhookOptions, other: OtherDelivery | undefined, http: DeliveryHttp) {
  const subscriptions = new Map(options.subscriptions.map((subscription) => [subscription.id, subscription]));
  const gone = new Set<string>();
  return async (entry: LeasedEntry, provider: Provider) => {
    const subscription = subscriptions.get(entry.subscription);
    let answer: Settlement | HttpAnswer;
    if (other?.owns(entry.subscription)) {
      const delivered = await other
        .deliver(entry, http, provider)
        .catch((error: unknown) => reportError(provider, error));
      if (!delivered || http.signal.aborted) return undefined;
      answer = delivered;
    } else if (!subscription) answer = { outcome: 'dead', reason: 'subscription_removed' };
    else if (gone.has(subscription.id)) answer = { outcome: 'dead', reason: 'gone' };
    else {
      const headers = webhookHeaders(subscription.key, entry.id, Math.floor(Date.now() / 1000), entry.body);
      answer = await http.post(subscription.url, headers, entry.body, http);
      if (http.signal.aborted) return undefined;
      if (answer.status === 410 && !gone.has(subscription.id)) {
        gone.add(subscription.id);
        emitOn(provider, WEBHOOK_GONE, { subscription: subscription.id });
      }
    }
    return { entry, settlement: 'outcome' in answer ? answer : settlementOf(options, entry, answer) };
  };
}

/** A receiver's answer as a settlement: delivered, retried with backoff (or as Retry-After asks), or dead. */
function settlementOf(options: ResolvedWebhookOptions, entry: LeasedEntry, answer: HttpAnswer): Settlement {
  if (answer.status >= 200 && answer.status < 300) return { outcome: 'delivered' };
  if (answer.status === 410) return { outcome: 'dead', reason: 'gone' };
  const now = Date.now();
  if (entry.attempts >= options.maxAttempts) return { outcome: 'dead', reason: 'attempts' };
  const backoff = Math.min(options.maxBackoffMs, FIRST_RETRY_MS * 2 ** (entry.attempts - 1));
  const at = now + Math.min(options.maxBackoffMs, Math.max(jitter(backoff), retryAfterMs(answer.retryAfter, now) ?? 0));
  if (at - entry.createdAt > options.maxAgeMs) return { outcome: 'dead', reason: 'age' };
  return { outcome: 'retry', at };
}

/** Settles deliveries as they are answered, those answered close together in one trip to the store; then calls `then`. */
function batchSettler(held: WeakRef<Provider>, outbox: OutboxStore, then: () => void) {
  /** Deliveries done and not yet settled. */
  const done: SettledEntry[] = [];
  let settling: Promise<void> | undefined;
  /** Deliveries whose answer has not come yet, and what wakes a settlement waiting for them. */
  let delivering = 0;
  let allAnswered: (() => void) | undefined;

  function gathered(): Promise<void> {
    if (delivering === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const finish = (): void => {
        clearTimeout(timeout);
        allAnswered = undefined;
        resolve();
      };
      const timeout = setTimeout(finish, GATHER_MS);
      allAnswered = finish;
    });
  }

  async function settleDone(): Promise<void> {
    while (done.length) {
      await gathered();
      await settleAll(held, outbox, done.splice(0));
    }
    // Synchronously after the last check: a delivery done from now on starts a settlement of its own.
    settling = undefined;
    then();
  }

  return {
    delivering(): void {
      delivering += 1;
    },
    answered(outcome: SettledEntry | undefined): void {
      delivering -= 1;
      if (delivering === 0) allAnswered?.();
      if (!outcome) return;
      done.push(outcome);
      settling ??= settleDone();
    },
    get settling() {
      return settling;
    },
  };
}

/** Settles deliveries, together where the store can (one transaction on PostgreSQL). */
async function settleAll(held: WeakRef<Provider>, outbox: OutboxStore, outcomes: readonly SettledEntry[]) {
  let settled: boolean[];
  try {
    settled = outbox.settleAll
      ? await outbox.settleAll(outcomes, Date.now())
      : await Promise.all(outcomes.map(({ entry, settlement }) => outbox.settle(entry, settlement, Date.now())));
  } catch (error) {
    // Invariant 47: delivered at least once.
    const provider = held.deref();
    if (provider) reportError(provider, error);
    return;
  }
  outcomes.forEach(({ entry, settlement }, index) => {
    if (!settled[index] || settlement.outcome !== 'dead') return;
    const { subscription, id, attempts } = entry;
    emitOn(held.deref(), WEBHOOK_DEAD_LETTERED, { subscription, id, reason: settlement.reason, attempts });
  });
}

/** Between 75% and 100% of `ms`, so that instances started together drift apart. */
function jitter(ms: number): number {
  return Math.round(ms * (0.75 + Math.random() * 0.25));
}

/** Retry-After in seconds or as an HTTP date, in ms from `now`. */
function retryAfterMs(value: string | null | undefined, now: number): number | undefined {
  if (!value) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
