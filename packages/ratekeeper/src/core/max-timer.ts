/**
 * The longest delay a timer holds: 2^31 - 1 ms, about 24.8 days. Node (and browsers, and vitest's
 * fake timers) run a setTimeout or setInterval of a longer delay after 1 ms, so an interval of
 * more than this runs every millisecond and a timeout fires at once: delays that come from options
 * accepting any whole number of ms are capped with this.
 */
export const MAX_TIMER_MS = 2_147_483_647;
