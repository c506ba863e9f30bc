import type http from 'node:http';
import type { AdapterSource } from '../lib/adapters/contract.js';
import { createMemoryAuditLog, type AuditSink } from '../lib/index.js';
import { startBackend, type Backend, type BackendOptions } from './backend.js';
import { closeServer, listen, LOOPBACK, portOf } from './http.js';
import { startIdentityService, type IdentityService } from './identity-service.js';
import type { DemoKeys } from './keys.js';
import { demoSecrets, type DemoSecrets } from './seed.js';

export interface DemoOptions {
  /** Default 3000; 0 picks a free port. */
  identityPort?: number;
  /** Default 3001; 0 picks a free port. */
  backendPort?: number;
  /**
   * Servers from `listen()` instead of the ports, when the addresses must be
   * known before the demo starts (e.g. instances that name each other's backends).
   */
  servers?: { identity: http.Server; backend: http.Server };
  /** Host name in every URL; the browser must use the same. Default `localhost`. */
  hostname?: string;
  /** Bind address of both servers. Default 127.0.0.1. */
  bindAddress?: string;
  subjectTokenTTL?: number;
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
  /** Overrides for the backend (e.g. a Management API address that is down). */
  backend?: Partial<Pick<BackendOptions, 'managementUrl' | 'timeoutMs' | 'pendingSignIns'>>;
}

export interface Demo {
  identity: IdentityService;
  auditLog: AuditSink;
  backend: Backend;
  close(): Promise<void>;
}

/**
 * Starts both halves of the demo. Both servers listen first, so each side's
 * URL is known (even on port 0) before the other side is configured with it.
 */
export async function startDemo(options: DemoOptions = {}): Promise<Demo> {
  const bindAddress = options.bindAddress ?? LOOPBACK;
  const hostname = options.hostname ?? 'localhost';
  const { identity: identityServer, backend: backendServer } =
    options.servers ?? (await listenBoth(options.identityPort ?? 3000, options.backendPort ?? 3001, bindAddress));
  try {
    const secrets = options.secrets ?? demoSecrets();
    const log = options.log ?? (() => {});
    const auditLog = options.auditLog ?? createMemoryAuditLog();
    const identity = await startIdentityService({
      server: identityServer,
      hostname,
      backendOrigin: `http://${hostname}:${portOf(backendServer)}`,
      ...(options.subjectTokenTTL === undefined ? {} : { subjectTokenTTL: options.subjectTokenTTL }),
      secrets,
      ...(options.adapter ? { adapter: options.adapter } : {}),
      auditLog,
      ...(options.keys ? { keys: options.keys } : {}),
      ...(options.identityPublicUrl ? { publicUrl: options.identityPublicUrl } : {}),
      ...(options.peerBackendUrls
        ? { peerBackendOrigins: options.peerBackendUrls.map((url) => new URL(url).origin) }
        : {}),
      ...(options.actorMaxAge === undefined ? {} : { actorMaxAge: options.actorMaxAge }),
      log,
      logFeedReads: options.logFeedReads ?? false,
    });
    const backend = await startBackend({
      server: backendServer,
      hostname,
      issuer: identity.issuer,
      managementUrl: identity.managementUrl,
      managementResource: identity.managementResource,
      managementScope: identity.impersonation.options.managementScope,
      secrets,
      log,
      ...options.backend,
    });
    return {
      identity,
      auditLog,
      backend,
      close: async () => {
        await Promise.all([backend.close(), identity.close()]);
      },
    };
  } catch (error) {
    await Promise.all([closeServer(identityServer), closeServer(backendServer)]);
    throw error;
  }
}

async function listenBoth(
  identityPort: number,
  backendPort: number,
  bindAddress: string,
): Promise<{ identity: http.Server; backend: http.Server }> {
  const identity = await listen(identityPort, bindAddress);
  try {
    return { identity, backend: await listen(backendPort, bindAddress) };
  } catch (error) {
    await closeServer(identity);
    throw error;
  }
}
