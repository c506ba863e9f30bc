/** Invariant 57: a push reaches public addresses only, checked at every delivery. */
import { lookup as dnsLookup, promises as dns } from 'node:dns';
import { setTimeout as sleep } from 'node:timers/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { pushTargetRefused } from '../errors.js';
import { family, hostOf, type PushAllowList } from './options.js';

/** IPv4 ranges no receiver's push endpoint is in. */
const INTERNAL_IPV4: ReadonlyArray<readonly [string, number]> = [
  ['0.0.0.0', 8], // "this network", the unspecified address
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, where clouds serve instance metadata
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, and the broadcast address
];

const INTERNAL_IPV6: ReadonlyArray<readonly [string, number]> = [
  ['::', 96], // unspecified, loopback, and the deprecated IPv4-compatible forms
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['fc00::', 7], // unique-local
  ['ff00::', 8], // multicast
  ['64:ff9b:1::', 48], // NAT64 for local use
];

/** The internal ranges; BlockList matches IPv4-mapped IPv6 addresses against the IPv4 ranges itself. */
const INTERNAL = (() => {
  const list = new BlockList();
  for (const [address, prefix] of INTERNAL_IPV4) {
    list.addSubnet(address, prefix, 'ipv4');
    // An IPv4 address embedded in the well-known NAT64 prefix and in 6to4 reaches the same host.
    list.addSubnet(`64:ff9b::${hexOf(address)}`, 96 + prefix, 'ipv6');
    list.addSubnet(`2002:${hexOf(address)}::`, 16 + prefix, 'ipv6');
  }
  for (const [address, prefix] of INTERNAL_IPV6) list.addSubnet(address, prefix, 'ipv6');
  return list;
})();

/** How long stream creation waits for a host name to resolve; past it the delivery's check is what holds. */
const RESOLVE_TIMEOUT_MS = 2000;

/** An IPv4 address as the two 16-bit groups of an IPv6 address. */
function hexOf(ipv4: string): string {
  const [a = 0, b = 0, c = 0, d = 0] = ipv4.split('.').map(Number);
  return `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
}

/** Whether the service may push to this address: a public one, or one the allow-list names. */
function reachable(address: string, allow: PushAllowList): boolean {
  if (!isIP(address)) return false;
  return !INTERNAL.check(address, family(address)) || allow.addresses.check(address, family(address));
}

/** Whether a host (as the URL gives it) is on the allow-list: by name, or an address in a listed range. */
function listed(host: string, allow: PushAllowList): boolean {
  return allow.names.has(host) || (isIP(host) > 0 && allow.addresses.check(host, family(host)));
}

/** Why a push URL may not be used, as far as the URL itself tells; undefined when nothing in it is refused. */
export function pushUrlProblem(url: URL, allow: PushAllowList): string | undefined {
  const host = hostOf(url.hostname);
  if (listed(host, allow)) return undefined;
  if (url.protocol !== 'https:') return 'must be https (plain http only to a host of ssf.pushAllowList)';
  if (isIP(host) ? !reachable(host, allow) : host === 'localhost' || host.endsWith('.localhost'))
    return 'must not name a loopback, private, link-local or otherwise internal address';
  return undefined;
}

/** Why a push URL's host may not be used now; a name that does not resolve passes, since every delivery checks again. */
export async function pushHostProblem(url: URL, allow: PushAllowList): Promise<string | undefined> {
  const host = hostOf(url.hostname);
  if (isIP(host) || listed(host, allow)) return undefined;
  const timeout = sleep(RESOLVE_TIMEOUT_MS, undefined, { ref: false });
  const addresses = await Promise.race([dns.lookup(host, { all: true }), timeout]).catch(() => undefined);
  return !addresses || addresses.every(({ address }) => reachable(address, allow))
    ? undefined
    : 'must not have a host name that resolves to a loopback, private, link-local or otherwise internal address';
}

/** Invariant 57: the `lookup` a push connects with. */
export function guardedLookup(allow: PushAllowList): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
      const host = hostOf(hostname);
      if (error) callback(error, '');
      else if (!listed(host, allow) && !addresses.every(({ address }) => reachable(address, allow))) {
        callback(pushTargetRefused(host), '');
      } else if (options.all) callback(null, addresses);
      else callback(null, addresses[0]?.address ?? '', addresses[0]?.family);
    });
  };
}
