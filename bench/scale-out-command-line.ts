/** The command line of bench/scale-out.ts: its flags and their defaults. */
import type { AdapterKind } from './protocol.js';
import { STORES, serviceUrls, type ServiceUrls } from './stores.js';

export const SCALE_OUT_USAGE =
  'node build/bench/scale-out.js [--duration S] [--connections C] [--stores redis,postgres,memory+pg-audit] [--help]';

export interface ScaleOutSettings extends ServiceUrls {
  /** Seconds per window. */
  duration: number;
  /** Connections per provider process. */
  connections: number;
  stores: AdapterKind[];
  /** --help: print the usage and measure nothing. */
  help: boolean;
}

export function parseScaleOutSettings(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): ScaleOutSettings {
  const value = (name: string): string | undefined => {
    const index = argv.indexOf(name);
    return index >= 0 ? argv[index + 1] : undefined;
  };
  const settings: ScaleOutSettings = {
    duration: Number(value('--duration') ?? 5),
    connections: Number(value('--connections') ?? 16),
    stores: storesOf(value('--stores') ?? 'redis,postgres,memory+pg-audit'),
    help: argv.includes('--help'),
    ...serviceUrls(env),
  };
  // autocannon checks its deadline once a second: a window is a whole number of seconds.
  if (!Number.isSafeInteger(settings.duration) || settings.duration < 1)
    throw new TypeError('--duration must be a positive integer (seconds)');
  if (!Number.isSafeInteger(settings.connections) || settings.connections < 1)
    throw new TypeError('--connections must be a positive integer');
  return settings;
}

/** --stores' comma-separated stores; an unknown name is an error. */
function storesOf(list: string): AdapterKind[] {
  return list.split(',').map((name) => {
    if (!Object.hasOwn(STORES, name))
      throw new TypeError(`--stores: unknown store ${name} (${Object.keys(STORES).join(', ')})`);
    return name as AdapterKind;
  });
}
