import { EVENTS } from '../event-types.js';
import { optionChecks, type OptionChecks } from '../config/checks.js';
import { WEBHOOK_DEFAULTS, WEBHOOK_MAXIMA } from '../config/defaults.js';

/** The events a webhook can carry: state changes only authenticated callers cause, never a refusal. */
export const WEBHOOK_EVENTS = [
  EVENTS.exchangeSucceeded,
  EVENTS.sessionRevoked,
  EVENTS.sessionEnded,
  EVENTS.approvalRequested,
  EVENTS.approvalApproved,
  EVENTS.approvalDenied,
  EVENTS.approvalExpired,
  EVENTS.accessGrantCreated,
  EVENTS.accessGrantEnded,
  EVENTS.breakGlassUsed,
] as const;

export type WebhookEventName = (typeof WEBHOOK_EVENTS)[number];

export interface WebhookSubscription {
  /** Names the subscription in statistics and dead letters: letters, digits, `.`, `_`, `-`, at most 64. */
  id: string;
  /** Where deliveries are POSTed: `https:`, or `http:` on a loopback address (127.0.0.1, [::1], localhost). */
  url: string;
  /** The events it receives, at least one, of `WEBHOOK_EVENTS`. */
  events: readonly WebhookEventName[];
  /** The signing secret, `whsec_` and base64 of 24 to 64 random bytes (the Standard Webhooks form). */
  secret: string;
}

export interface WebhookOptions {
  subscriptions: readonly WebhookSubscription[];
  /** Most entries waiting per subscription; past it new ones are dropped and counted. Default 100,000. */
  maxPending?: number | undefined;
  /** Deliveries tried before an entry is dead-lettered. Default 15. */
  maxAttempts?: number | undefined;
  /** Seconds after which an undelivered entry is dead-lettered. Default 259,200 (3 days). */
  maxAge?: number | undefined;
  /** Seconds a dead letter is kept for inspection. Default 604,800 (7 days). */
  deadLetterRetention?: number | undefined;
  /** Milliseconds a receiver has to answer. Default 10,000. */
  timeout?: number | undefined;
  /** Milliseconds between looks at the outbox when it had nothing due. Default 1,000. */
  pollInterval?: number | undefined;
  /** Longest wait between two attempts of one entry, seconds. Default 3,600. */
  maxBackoff?: number | undefined;
}

/** The options resolved: each count and duration (ms) given or defaulted, each subscription with its key. */
export interface ResolvedWebhookOptions
  extends
    Record<'maxPending' | 'maxAttempts' | 'maxAgeMs' | 'deadLetterRetentionMs' | 'timeoutMs', number>,
    Record<'pollIntervalMs' | 'maxBackoffMs', number> {
  subscriptions: readonly Readonly<WebhookSubscription & { key: Buffer }>[];
}

const OPTIONS: Record<keyof WebhookOptions, unknown> = { subscriptions: true, ...WEBHOOK_DEFAULTS };
const OPTION_NAMES = Object.keys(OPTIONS);

const SUBSCRIPTION_KEYS: Record<keyof WebhookSubscription, true> = { id: true, url: true, events: true, secret: true };
const SUBSCRIPTION_NAMES = Object.keys(SUBSCRIPTION_KEYS);

const isWebhookEvent = (event: unknown) => (WEBHOOK_EVENTS as readonly unknown[]).includes(event);

const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

const check: OptionChecks = optionChecks('createImpersonation');
const fail: OptionChecks['fail'] = check.fail;

function whole(name: keyof typeof WEBHOOK_DEFAULTS, value: unknown): number {
  return check.integerOr(`webhooks.${name}`, value, WEBHOOK_DEFAULTS[name], WEBHOOK_MAXIMA[name]);
}

export function resolveWebhookOptions(input: WebhookOptions): ResolvedWebhookOptions {
  if (typeof input !== 'object' || input === null) fail('webhooks', 'must be an object');
  check.known(input, OPTION_NAMES, 'webhooks.');
  const subscriptions = input.subscriptions as unknown;
  if (!Array.isArray(subscriptions) || !subscriptions.length)
    fail('webhooks.subscriptions', 'must be a non-empty array');
  const ids = new Set<string>();
  const resolved = subscriptions.map((subscription: unknown, index) => {
    const name = `webhooks.subscriptions[${index}]`;
    if (typeof subscription !== 'object' || subscription === null) fail(name, 'must be an object');
    check.known(subscription, SUBSCRIPTION_NAMES, `${name}.`);
    const { id, url, events, secret } = subscription as Partial<Record<keyof WebhookSubscription, unknown>>;
    if (typeof id !== 'string' || !/^[A-Za-z0-9._-]{1,64}$/.test(id))
      fail(`${name}.id`, 'must be 1 to 64 letters, digits, ".", "_" or "-"');
    if (ids.has(id)) fail(`${name}.id`, "must differ from the other subscriptions' ids");
    ids.add(id);
    const parsed = typeof url === 'string' ? URL.parse(url) : null;
    const secure =
      parsed?.protocol === 'https:' || (parsed?.protocol === 'http:' && LOOPBACK_HOSTS.has(parsed.hostname));
    if (!parsed || !secure || parsed.username || parsed.password || parsed.hash)
      fail(`${name}.url`, 'must be an https URL without credentials or fragment (http only on a loopback address)');
    if (!Array.isArray(events) || !events.length || !events.every(isWebhookEvent))
      fail(`${name}.events`, `must be a non-empty array of ${WEBHOOK_EVENTS.join(', ')}`);
    return Object.freeze({
      id,
      url: parsed.href,
      events: Object.freeze([...new Set(events as WebhookEventName[])]),
      secret: secret as string,
      key: signingKey(`${name}.secret`, secret),
    });
  });
  return Object.freeze({
    subscriptions: Object.freeze(resolved),
    maxPending: whole('maxPending', input.maxPending),
    maxAttempts: whole('maxAttempts', input.maxAttempts),
    maxAgeMs: whole('maxAge', input.maxAge) * 1000,
    deadLetterRetentionMs: whole('deadLetterRetention', input.deadLetterRetention) * 1000,
    timeoutMs: whole('timeout', input.timeout),
    pollIntervalMs: whole('pollInterval', input.pollInterval),
    maxBackoffMs: whole('maxBackoff', input.maxBackoff) * 1000,
  });
}

/** The secret's bytes; the error never repeats the value, which is a secret even when malformed. */
function signingKey(name: string, secret: unknown): Buffer {
  const match = typeof secret === 'string' ? /^whsec_([A-Za-z0-9+/]+={0,2})$/.exec(secret) : null;
  const key = match ? Buffer.from(match[1]!, 'base64') : undefined;
  if (!key || key.length < 24 || key.length > 64)
    fail(name, 'must be "whsec_" followed by the base64 of 24 to 64 random bytes');
  return key;
}
