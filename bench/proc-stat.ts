/** What Linux's /proc tells of a process or a thread: its command name and the CPU it used. */
import { readFileSync } from 'node:fs';

/** Clock ticks per second of /proc's utime and stime (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100;

/**
 * The command name and the CPU seconds (user and system) in a `stat` file of
 * /proc (`/proc/PID/stat` or `/proc/PID/task/TID/stat`). Throws when the file
 * is gone (the process ended) or there is no /proc.
 */
export function readStat(path: string): { name: string; cpuSeconds: number } {
  const stat = readFileSync(path, 'utf8');
  // The name is in parentheses and may hold spaces: the fields are counted after its closing one,
  // where utime and stime are the 12th and the 13th.
  const close = stat.lastIndexOf(')');
  const fields = stat.slice(close + 2).split(' ');
  return {
    name: stat.slice(stat.indexOf('(') + 1, close),
    cpuSeconds: (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND,
  };
}
