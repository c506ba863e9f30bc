/** The command line of bench/scale-out.ts: its flags and their defaults. */
import { checkFlags, flagValue, positiveInteger, windowSeconds } from './flags.js';
import type { AdapterKind } from './protocol.js';
import { STORES, serviceUrls, type ServiceUrls } from './stores.js';

export const SCALE_OUT_USAGE =
  'node build/bench/scale-out.js [--duration S] [--connections C] [--stores redis,postgres,memory+pg-audit,postgres+pg-audit] [--help]';

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
  checkFlags(argv, { valued: ['--duration', '--connections', '--stores'], plain: ['--help'] }, SCALE_OUT_USAGE);
  return {
    duration: windowSeconds(argv, 5),
    connections: positiveInteger(argv, '--connections', 16),
    stores: storesOf(flagValue(argv, '--stores') ?? 'redis,postgres,memory+pg-audit'),
    help: argv.includes('--help'),
    ...serviceUrls(env),
  };
}

/** --stores' comma-separated stores; an unknown name is an error. */
function storesOf(list: string): AdapterKind[] {
  return list.split(',').map((name) => {
    if (!Object.hasOwn(STORES, name))
      throw new TypeError(`--stores: unknown store ${name} (${Object.keys(STORES).join(', ')})`);
    return name as AdapterKind;
  });
}
