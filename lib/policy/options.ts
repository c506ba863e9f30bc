import { optionChecks, type OptionChecks } from '../config/checks.js';

/** An OpenID AuthZEN 1.0 decision point (docs/policy.md); anything but `decision: true` refuses. */
export interface AuthzenOptions {
  /** The decision point's base URL (http or https); evaluations go to `{url}/access/v1/evaluation`. */
  url: string;
  /** How long an evaluation may take, milliseconds; past it the request is refused (503). Default 1000; at most 30000. */
  timeout?: number | undefined;
  /** Sent as `Authorization: Bearer …` to the decision point. Never logged, never in an error. */
  token?: string | undefined;
  /** More request headers (e.g. a tenant or an API key); `Content-Type` and `Authorization` are the plugin's. */
  headers?: Record<string, string> | undefined;
}

export type ResolvedAuthzenOptions = Readonly<{
  /** The evaluation endpoint, `{url}/access/v1/evaluation`. */
  endpoint: string;
  timeout: number;
  headers: Readonly<Record<string, string>>;
}>;

const OPTIONS: Record<keyof AuthzenOptions, true> = { url: true, timeout: true, token: true, headers: true };

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const HEADER_VALUE = /^[\t\x20-\x7E\x80-\xFF]*$/;
const RESERVED_HEADERS = new Set(['authorization', 'content-type', 'content-length', 'host', 'accept']);
const check = optionChecks('createImpersonation');
const fail: OptionChecks['fail'] = check.fail;

export function resolveAuthzenOptions(input: AuthzenOptions | undefined): ResolvedAuthzenOptions | undefined {
  if (input === undefined) return undefined;
  if (typeof input !== 'object' || input === null) fail('authzen', 'must be an object');
  check.known(input, Object.keys(OPTIONS), 'authzen.');
  const { url, timeout = 1000, token, headers = {} } = input;
  const base = typeof url === 'string' ? URL.parse(url) : null;
  if (!base || (base.protocol !== 'https:' && base.protocol !== 'http:') || base.hash || base.search) {
    fail('authzen.url', 'must be an absolute http(s) URL without a query or fragment');
  }
  if (base.username || base.password) fail('authzen.url', 'must carry no credentials (use "token" or "headers")');
  check.integer('authzen.timeout', timeout, 30_000);
  if (token !== undefined && (typeof token !== 'string' || !token || !HEADER_VALUE.test(token))) {
    fail('authzen.token', 'must be a non-empty string that a header can carry');
  }
  if (typeof headers !== 'object' || headers === null || Array.isArray(headers)) {
    fail('authzen.headers', 'must be an object of header names to strings');
  }
  const sent: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    // The name may be printed; the value never is (it may be a key).
    if (!HEADER_NAME.test(name)) fail('authzen.headers', 'must name valid HTTP headers');
    if (RESERVED_HEADERS.has(name.toLowerCase())) fail(`authzen.headers`, `may not set ${name} (the plugin's own)`);
    if (typeof value !== 'string' || !HEADER_VALUE.test(value)) fail(`authzen.headers`, `${name} must be a string`);
    sent[name] = value;
  }
  if (token !== undefined) sent['authorization'] = `Bearer ${token}`;
  const path = base.pathname.replace(/\/+$/, '');
  return Object.freeze({
    endpoint: `${base.origin}${path}/access/v1/evaluation`,
    timeout,
    headers: Object.freeze(sent),
  });
}
