import { randomBytes } from 'node:crypto';
import type { AdapterSource } from '../lib/core-options.js';
import { createMemoryAuditLog, type AuditSink } from '../lib/index.js';
import { startBackend, type Backend, type BackendOptions } from './backend.js';
import { addressInUse, freePort, LOOPBACK } from './http.js';
import { startIdentityService, type IdentityService } from './identity-service.js';
import type { DemoKeys } from './keys.js';
import { WEBHOOK_PATH, type NotificationLimits } from './notifications.js';
import { startOrdersApp, type OrdersApp } from './orders-app.js';
import { demoSecrets, type DemoSecrets } from './seed.js';

export interface DemoOptions {
  /** Default 3000; 0 picks a free port. */
  identityPort?: number;
  /** Default 3001; 0 picks a free port. */
  backendPort?: number;
  /** The orders application's authorization server and API. Default `identityPort` + 2 (0 with it: a free port). */
  ordersPort?: number;
  /** Host name in every URL; the browser must use the same. Default `localhost`. */
  hostname?: string;
  /** Bind address of both servers. Default 127.0.0.1. */
  bindAddress?: string;
  subjectTokenTTL?: number;
  /** Subject tokens the backend may create per hour. Default: the plugin's (10,000). */
  subjectTokensPerHour?: number;
  /** How long a request waits for the customer's answer, seconds. Default: the plugin's (900). */
  approvalRequestTTL?: number;
  secrets?: DemoSecrets;
  /** The identity service's adapter (e.g. Redis, so that two demo instances share state). */
  adapter?: AdapterSource;
  /** The audit trail (e.g. `createPostgresAuditLog()`). Default: in memory, with the same chain and verify(). */
  auditLog?: AuditSink;
  /** Signing and cookie keys of the identity service; instances that share a store must share them. Default: fresh ones. */
  keys?: DemoKeys;
  /** The identity service's address when several instances serve one (its issuer). Default: its own. */
  identityPublicUrl?: string;
  /** The backends of the other instances behind `identityPublicUrl`, whose consoles sign in there too. */
  peerBackendUrls?: readonly string[];
  /** How recent the engineer's sign-in must be for an impersonation, seconds. Default 300. */
  actorMaxAge?: number;
  /** Where both halves log, a line each (audit events, failures). Default: nowhere. */
  log?: (line: string) => void;
  /** Also log each read of the revocation feed (several a second). Default false. */
  logFeedReads?: boolean;
  /**
   * The secret the identity service signs the customers' notifications with
   * (webhooks to the backend), `whsec_` and base64. Default: a fresh one,
   * made at start like the keys, never printed.
   */
  webhookSecret?: string;
  /** Overrides for the backend (e.g. a Management API address that is down). */
  backend?: Partial<Pick<BackendOptions, 'managementUrl' | 'timeoutMs' | 'pendingSignIns'>> & {
    notificationLimits?: NotificationLimits;
  };
}

export interface Demo {
  identity: IdentityService;
  auditLog: AuditSink;
  backend: Backend;
  /** The orders application: a second authorization server, which redeems the identity service's ID-JAGs, and its API. */
  orders: OrdersApp;
  close(): Promise<void>;
}

/** Attempts at starting on free ports, when another process takes one between its pick and the demo's listen. */
const FREE_PORT_ATTEMPTS = 3;

/**
 * Starts the demo, each server listening only once it is ready: the identity
 * service first (the backend reads its revocation feed, the orders
 * application its SSF stream, before they listen or answer), then the backend
 * and the orders application side by side. Each half names the other's
 * address in its configuration, so ports to be picked (0) are picked before
 * either is built.
 */
export async function startDemo(options: DemoOptions = {}): Promise<Demo> {
  const bindAddress = options.bindAddress ?? LOOPBACK;
  const identityPort = options.identityPort ?? 3000;
  const requested = {
    identity: identityPort,
    backend: options.backendPort ?? 3001,
    orders: options.ordersPort ?? (identityPort === 0 ? 0 : identityPort + 2),
  };
  for (let attempt = 1; ; attempt += 1) {
    // Behind a common address the issuer does not name this instance's port, which can then be picked by listening.
    const identity =
      requested.identity === 0 && !options.identityPublicUrl ? await freePort(bindAddress) : requested.identity;
    const backend = requested.backend === 0 ? await freePort(bindAddress) : requested.backend;
    const orders = requested.orders === 0 ? await freePort(bindAddress) : requested.orders;
    try {
      return await startOn({ identity, backend, orders }, bindAddress, options);
    } catch (error) {
      const lost = (asked: number, picked: number) => asked === 0 && picked !== 0 && addressInUse(error, picked);
      const anyLost =
        lost(requested.identity, identity) || lost(requested.backend, backend) || lost(requested.orders, orders);
      if (attempt === FREE_PORT_ATTEMPTS || !anyLost) throw error;
    }
  }
}

async function startOn(
  ports: { identity: number; backend: number; orders: number },
  bindAddress: string,
  options: DemoOptions,
): Promise<Demo> {
  const hostname = options.hostname ?? 'localhost';
  const secrets = options.secrets ?? demoSecrets();
  const log = options.log ?? (() => {});
  const auditLog = options.auditLog ?? createMemoryAuditLog();
  const webhookSecret = options.webhookSecret ?? `whsec_${randomBytes(32).toString('base64')}`;
  const receiver = webhookReceiver(bindAddress, ports.backend);
  const identity = await startIdentityService({
    port: ports.identity,
    bindAddress,
    hostname,
    backendOrigin: `http://${hostname}:${ports.backend}`,
    ...(options.subjectTokenTTL === undefined ? {} : { subjectTokenTTL: options.subjectTokenTTL }),
    ...(options.subjectTokensPerHour === undefined ? {} : { subjectTokensPerHour: options.subjectTokensPerHour }),
    ...(options.approvalRequestTTL === undefined ? {} : { approvalRequestTTL: options.approvalRequestTTL }),
    secrets,
    ...(options.adapter ? { adapter: options.adapter } : {}),
    auditLog,
    ...(options.keys ? { keys: options.keys } : {}),
    ...(options.identityPublicUrl ? { publicUrl: options.identityPublicUrl } : {}),
    ...(options.peerBackendUrls
      ? { peerBackendOrigins: options.peerBackendUrls.map((url) => new URL(url).origin) }
      : {}),
    ...(options.actorMaxAge === undefined ? {} : { actorMaxAge: options.actorMaxAge }),
    ...(receiver ? { notifications: { url: receiver, secret: webhookSecret } } : {}),
    log,
    logFeedReads: options.logFeedReads ?? false,
  });
  const { notificationLimits, ...backendOverrides } = options.backend ?? {};
  // Each needs only the identity service: they start side by side.
  const [orders, backend] = await Promise.allSettled([
    startOrdersApp({ port: ports.orders, bindAddress, hostname, identity, secrets, log }),
    startBackend({
      port: ports.backend,
      bindAddress,
      hostname,
      issuer: identity.issuer,
      managementUrl: identity.managementUrl,
      managementResource: identity.managementResource,
      managementScope: identity.impersonation.options.managementScope,
      customerResource: identity.customerResource,
      secrets,
      log,
      ...(receiver
        ? { notifications: { secret: webhookSecret, ...(notificationLimits ? { limits: notificationLimits } : {}) } }
        : {}),
      ...backendOverrides,
    }),
  ]);
  if (orders.status === 'rejected' || backend.status === 'rejected') {
    const started = [orders, backend].flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
    await Promise.all([...started.map((half) => half.close()), identity.close()]);
    throw orders.status === 'rejected' ? orders.reason : (backend as PromiseRejectedResult).reason;
  }
  return {
    identity,
    auditLog,
    backend: backend.value,
    orders: orders.value,
    close: async () => {
      await Promise.all([backend.value.close(), orders.value.close(), identity.close()]);
    },
  };
}

/**
 * Where the identity service reaches the backend's webhook receiver: on this
 * machine (the plugin posts plain http only to a loopback address). A backend
 * bound to another address alone gets no notifications.
 */
function webhookReceiver(bindAddress: string, port: number): string | undefined {
  if (['127.0.0.1', '0.0.0.0', 'localhost'].includes(bindAddress)) return `http://127.0.0.1:${port}${WEBHOOK_PATH}`;
  if (['::1', '::'].includes(bindAddress)) return `http://[::1]:${port}${WEBHOOK_PATH}`;
  return undefined;
}
