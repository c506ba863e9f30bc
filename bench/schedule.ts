/**
 * The order of the timed windows of one provider: every candidate window sits
 * between two baseline windows (a round's last baseline is the next round's
 * first), B C1 B C2 B C3 B, the next round in reverse, so that each candidate
 * has a baseline measured just before and just after it: the machine drifts
 * over tens of seconds, and a candidate is compared with the baseline of its
 * own moment.
 */
import { EXCHANGES, type ScenarioName } from './scenarios.js';

export interface Slot {
  scenario: ScenarioName;
  round: number;
}

export function scheduleOf(scenarios: readonly ScenarioName[], rounds: number): Slot[] {
  const candidates = scenarios.filter((name) => name !== 'baseline');
  const bracketed = scenarios.includes('baseline');
  const schedule: Slot[] = [];
  for (let round = 0; round < rounds; round += 1) {
    const order = round % 2 === 0 ? candidates : [...candidates].reverse();
    if (bracketed && round === 0) schedule.push({ scenario: 'baseline', round });
    for (const scenario of order) {
      schedule.push({ scenario, round });
      if (bracketed) schedule.push({ scenario: 'baseline', round });
    }
  }
  return schedule;
}

/**
 * One round on its own, for a provider whose rounds alternate with other
 * providers' (bench/measure.ts, measureCohort): B C1 B C2 B, in reverse on
 * odd rounds, its own baselines at both ends.
 */
export function roundOf(scenarios: readonly ScenarioName[], round: number): Slot[] {
  if (!scenarios.includes('baseline')) return scheduleOf(scenarios, round + 1).filter((slot) => slot.round === round);
  const candidates = scenarios.filter((name) => name !== 'baseline');
  const order = round % 2 === 0 ? candidates : [...candidates].reverse();
  return [
    { scenario: 'baseline', round },
    ...order.flatMap((scenario) => [
      { scenario, round },
      { scenario: 'baseline' as const, round },
    ]),
  ];
}

/**
 * Whether the subject tokens of the next window are created before this one:
 * an exchange's tokens are created before the baseline window in front of it,
 * so that nothing but a collection (which starts every window) separates the two.
 */
export function tokensBefore(schedule: readonly Slot[], index: number): boolean {
  const next = schedule[index + 1];
  return schedule[index]?.scenario === 'baseline' && next !== undefined && EXCHANGES.includes(next.scenario);
}

/** Whether the window at `index` closes its round. */
export function endsRound(schedule: readonly Slot[], index: number): boolean {
  return schedule[index + 1]?.round !== schedule[index]?.round;
}

/**
 * Each candidate window's rate over the mean of the baseline windows just
 * before and after it, by scenario; none when the schedule has no baseline.
 */
export function pairedRatios(schedule: readonly Slot[], rates: readonly number[]): [ScenarioName, number][] {
  if (!schedule.some(({ scenario }) => scenario === 'baseline')) return [];
  return schedule.flatMap(({ scenario }, index): [ScenarioName, number][] =>
    scenario === 'baseline' ? [] : [[scenario, rates[index]! / ((rates[index - 1]! + rates[index + 1]!) / 2)]],
  );
}
