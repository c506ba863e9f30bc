/**
 * Where --profile and --cpu-prof put the provider's CPU profiles, and their
 * summaries: per configuration and scenario (--profile, one file per timed
 * window), or of the whole provider process (--cpu-prof).
 */
import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Configuration, Settings } from './command-line.js';
import type { ConfigurationResult } from './measure.js';
import { summarizeProfile } from './profile.js';
import { LABELS, SCENARIOS } from './scenarios.js';

/** A new folder under build/bench-profiles for this run, when a profile is asked for. */
export function profileDirectory(settings: Settings): string | undefined {
  return settings.profile || settings.cpuProf
    ? join(process.cwd(), 'build', 'bench-profiles', new Date().toISOString().replace(/[:.]/g, '-'))
    : undefined;
}

/** A configuration's folder under the profile directory, created. */
export function profileFolder(profileDir: string, config: Configuration): string {
  const path = folderOf(profileDir, config);
  mkdirSync(path, { recursive: true });
  return path;
}

function folderOf(profileDir: string, config: Configuration): string {
  const setup =
    `${config.deployment ? '-deployment' : ''}${config.standingGrant ? '-standing-grant' : ''}` +
    `${config.webhooks ? '-webhooks' : ''}${config.deliveredElsewhere ? '-delivered-elsewhere' : ''}` +
    `${config.twinsPeer ? '-beside-twins' : ''}${config.telemetry ? `-telemetry-${config.telemetry}` : ''}`;
  return join(profileDir, `${config.adapter.replace('memory+', '')}${setup}`);
}

/** The summaries of every profile the run recorded, each after an empty line. */
export function profileSummaries(
  profileDir: string,
  settings: Settings,
  results: readonly ConfigurationResult[],
): string[] {
  const lines: string[] = [];
  for (const result of results) {
    const dir = folderOf(profileDir, result.configuration);
    for (const scenario of settings.profile ? SCENARIOS : []) {
      const runs = result.totals[scenario]?.runs;
      if (!runs) continue;
      const files = readdirSync(dir)
        .filter((name) => name.startsWith(`${scenario}.`))
        .map((name) => join(dir, name));
      lines.push(
        '',
        `CPU profile of the provider, ${result.configuration.name}, ${LABELS[scenario]} (${files.length} windows, ${join(dir, `${scenario}.*.cpuprofile`)}):`,
        ...summarizeProfile(files, { requests: runs.reduce((sum, run) => sum + run.ok + run.non2xx, 0) }),
      );
    }
    if (settings.cpuProf) {
      for (const file of readdirSync(join(dir, 'process')).filter((name) => name.endsWith('.cpuprofile'))) {
        lines.push(
          '',
          `CPU profile of the whole provider process (node --cpu-prof), ${result.configuration.name}: ${join(dir, 'process', file)}`,
          ...summarizeProfile(join(dir, 'process', file)),
        );
      }
    }
  }
  return lines;
}
