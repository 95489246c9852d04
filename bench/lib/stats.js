// Small statistics helpers shared by every bench section. The machine is shared and noisy
// (2 cores, other jobs running): sections quote the median of several runs and its spread,
// never a single run or a mean that one stall can drag.

/** The median of a list of numbers (the mean of the middle two when the count is even). */
export function median(values) {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/**
 * How far the runs strayed from their median, as a fraction: `(max - min) / median`.
 * Printed as "±x%" (half of it) next to each median so a reader can tell a real gap from noise.
 */
export function spread(values) {
  if (values.length < 2) return 0;
  const m = median(values);
  if (!(m > 0)) return 0;
  return (Math.max(...values) - Math.min(...values)) / m;
}

/** Median and spread together, plus the raw samples. */
export function summarize(values) {
  return { median: median(values), spread: spread(values), min: Math.min(...values), max: Math.max(...values), samples: values };
}
