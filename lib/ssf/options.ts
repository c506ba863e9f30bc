import { BlockList, isIP } from 'node:net';
import { optionChecks, type OptionChecks } from '../config/checks.js';
import { SSF_DEFAULTS, SSF_MAXIMA } from '../config/defaults.js';

/** A stopped session, as `streamCovers` is asked about it: the event of its stop. */
export type SsfStop = Readonly<{ name: string; sessionId: string; subject: string; actor?: string; clientId?: string }>;

/** Whether a stream (its id, and its receiver's client id) is told of a stop; only `true` tells it. */
export type StreamCovers = (
  stream: Readonly<{ id: string; receiver: string }>,
  stop: SsfStop,
) => boolean | Promise<boolean>;

export interface SsfOptions {
  /** Scope a receiver's token needs to manage and poll its streams (also `ssf.manage`, `ssf.read`). Default `ssf:streams`. */
  scope?: string | undefined;
  /** Where the stream management API lives: `<path>/streams`, `/status`, `/verify`, `/poll`. Default `/ssf`. */
  path?: string | undefined;
  /** The absolute URL the stream API's `path` is under. Default: the issuer; set it when `managementApi()` is served elsewhere. */
  baseUrl?: string | undefined;
  /** Most streams in all. Default 100. */
  maxStreams?: number | undefined;
  /** Most streams one receiver (one client) may have. Default 5. */
  maxStreamsPerReceiver?: number | undefined;
  /** Most SETs waiting in the outbox per stream; past it new ones are dropped and counted. Default 10,000. */
  maxPending?: number | undefined;
  /** Most SETs a poll stream holds unacknowledged; past it, delivery to it waits. Default 10,000. */
  maxQueued?: number | undefined;
  /** Seconds an unacknowledged SET is kept for polling. Default 604,800 (7 days). */
  retention?: number | undefined;
  /** Seconds a receiver must leave between two verification requests of a stream. Default 30. */
  minVerificationInterval?: number | undefined;
  /** Longest a poll with `returnImmediately: false` waits for a SET, milliseconds. Default 10,000. */
  longPollTimeout?: number | undefined;
  /** Pushes tried before a SET is dead-lettered (when no webhooks set the delivery's own). Default 15. */
  maxAttempts?: number | undefined;
  /** Milliseconds a push receiver has to answer (when no webhooks set it). Default 10,000. */
  timeout?: number | undefined;
  /** Milliseconds between looks at the outbox when it had nothing due (when no webhooks set it). Default 1,000. */
  pollInterval?: number | undefined;
  /** Internal hosts (names, addresses, CIDR ranges) a push endpoint may name, over http too. Default: none. */
  pushAllowList?: readonly string[] | undefined;
  /** Which stops a stream is told of. Default: every stream every stop. */
  streamCovers?: StreamCovers | undefined;
}

/** The options resolved: counts and durations given or defaulted; the scopes that manage, and those that read (and poll). */
export interface ResolvedSsfOptions
  extends
    Record<'maxStreams' | 'maxStreamsPerReceiver' | 'maxPending' | 'maxQueued' | 'maxAttempts', number>,
    Record<'retentionSeconds' | 'minVerificationInterval' | 'longPollTimeoutMs', number>,
    Record<'timeoutMs' | 'pollIntervalMs', number> {
  scope: string;
  manageScopes: readonly string[];
  readScopes: readonly string[];
  path: string;
  baseUrl: string | undefined;
  allowedPushHosts: PushAllowList;
  streamCovers: StreamCovers | undefined;
}

const OPTION_NAMES = Object.keys({
  ...SSF_DEFAULTS,
  baseUrl: true,
  pushAllowList: true,
  streamCovers: true,
} satisfies Record<keyof SsfOptions, unknown>);

const check: OptionChecks = optionChecks('createImpersonation');
const fail: OptionChecks['fail'] = check.fail;

function whole(name: Exclude<keyof typeof SSF_DEFAULTS, 'scope' | 'path'>, value: unknown): number {
  return check.integerOr(`ssf.${name}`, value, SSF_DEFAULTS[name], SSF_MAXIMA[name]);
}

/** The CAEP Interoperability Profile's scopes: all stream management, and reading only. */
const PROFILE_MANAGE_SCOPE = 'ssf.manage';
const PROFILE_READ_SCOPE = 'ssf.read';

export function resolveSsfOptions(input: SsfOptions, taken: { scopes: string[]; paths: string[] }): ResolvedSsfOptions {
  check.object('ssf', input);
  check.known(input, OPTION_NAMES, 'ssf.');
  const scope = check.scope('ssf.scope', input.scope ?? SSF_DEFAULTS.scope);
  if (taken.scopes.includes(scope)) fail('ssf.scope', "must differ from the Management API's other scopes");
  const manageScopes = Object.freeze([...new Set([scope, PROFILE_MANAGE_SCOPE])]);
  const readScopes = Object.freeze([...new Set([...manageScopes, PROFILE_READ_SCOPE])]);
  if (readScopes.some((name) => taken.scopes.includes(name)))
    fail('ssf.scope', `the Management API's other scopes must differ from ${readScopes.join(', ')}`);
  const path = check.path('ssf.path', input.path ?? SSF_DEFAULTS.path);
  const overlaps = (other: string) => other === path || other.startsWith(`${path}/`) || path.startsWith(`${other}/`);
  if (path.startsWith('/.well-known') || taken.paths.some(overlaps))
    fail('ssf.path', "must not overlap the Management API's other paths nor /.well-known");
  let baseUrl: string | undefined;
  if (input.baseUrl !== undefined) {
    const url = typeof input.baseUrl === 'string' ? URL.parse(input.baseUrl) : null;
    if (!url || url.search || url.hash || url.username || url.password || !/^https?:$/.test(url.protocol))
      fail('ssf.baseUrl', 'must be an absolute http(s) URL without query, fragment or credentials');
    baseUrl = url.href.replace(/\/$/, '');
  }
  const pushAllowList = readPushAllowList(input.pushAllowList ?? []);
  const hosts = `at most ${SSF_MAXIMA.pushAllowList} host names, IP addresses and CIDR ranges`;
  if (!pushAllowList) fail('ssf.pushAllowList', `must be an array of ${hosts}`);
  check.optionalFunction('ssf.streamCovers', input.streamCovers);
  const maxStreams = whole('maxStreams', input.maxStreams);
  const maxStreamsPerReceiver = whole('maxStreamsPerReceiver', input.maxStreamsPerReceiver);
  if (maxStreamsPerReceiver > maxStreams) fail('ssf.maxStreamsPerReceiver', 'must not exceed "ssf.maxStreams"');
  return Object.freeze({
    scope,
    manageScopes,
    readScopes,
    path,
    baseUrl,
    maxStreams,
    maxStreamsPerReceiver,
    maxPending: whole('maxPending', input.maxPending),
    maxQueued: whole('maxQueued', input.maxQueued),
    retentionSeconds: whole('retention', input.retention),
    minVerificationInterval: whole('minVerificationInterval', input.minVerificationInterval),
    longPollTimeoutMs: whole('longPollTimeout', input.longPollTimeout),
    maxAttempts: whole('maxAttempts', input.maxAttempts),
    timeoutMs: whole('timeout', input.timeout),
    pollIntervalMs: whole('pollInterval', input.pollInterval),
    allowedPushHosts: pushAllowList,
    streamCovers: input.streamCovers,
  });
}

/** `ssf.pushAllowList`, resolved: host names, and addresses and ranges. */
export interface PushAllowList {
  names: ReadonlySet<string>;
  addresses: BlockList;
}

/** `ssf.pushAllowList`'s entries, checked: host names, addresses and CIDR ranges; undefined when one is not. */
function readPushAllowList(entries: unknown): PushAllowList | undefined {
  if (!Array.isArray(entries) || entries.length > SSF_MAXIMA.pushAllowList) return undefined;
  const names = new Set<string>();
  const addresses = new BlockList();
  for (const entry of entries) {
    if (typeof entry !== 'string') return undefined;
    const [address = '', prefix, ...rest] = entry.split('/');
    const bare = hostOf(address.toLowerCase());
    if (rest.length) return undefined;
    if (prefix !== undefined) {
      const bits = Number(prefix);
      const max = isIP(bare) === 6 ? 128 : 32;
      if (!isIP(bare) || !/^\d{1,3}$/.test(prefix) || bits > max) return undefined;
      addresses.addSubnet(bare, bits, family(bare));
    } else if (isIP(bare)) addresses.addAddress(bare, family(bare));
    else if (/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/.test(bare) && bare.length <= 253) {
      names.add(bare);
    } else return undefined;
  }
  return { names, addresses };
}

/** A URL's host as checked: without IPv6 brackets nor a trailing dot. */
export function hostOf(hostname: string): string {
  return hostname.replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
}

export function family(address: string): 'ipv4' | 'ipv6' {
  return isIP(address) === 6 ? 'ipv6' : 'ipv4';
}
