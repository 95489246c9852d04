import type { ConfigIssue } from "ratekeeper";

/**
 * The most limits one policy may hold, in the rules file and in an override. Every check
 * answered by a policy carries limit headers naming each of its limits (`RateLimit-Policy`,
 * `RateLimit`); past a few hundred limits they outgrow the 16 KiB of headers Node, fetch and
 * common proxy defaults read, and every check on the key fails at the client. Real policies
 * hold a handful (a second, a minute, an hour, a day); 32 limits at the longest names (64
 * characters), with every `--headers` style at once, still answer within that
 * (hostile/policy-limits-cap.test.ts).
 */
export const MAX_POLICY_LIMITS = 32;

/**
 * An issue at `path` when `specs` (a policy's `limits` list, not yet resolved) holds more than
 * {@link MAX_POLICY_LIMITS}; undefined otherwise (a list of another type is left to the resolver).
 */
export function tooManyLimits(specs: unknown, path: string): ConfigIssue | undefined {
  if (!Array.isArray(specs) || specs.length <= MAX_POLICY_LIMITS) return undefined;
  return {
    path,
    message: `must hold at most ${MAX_POLICY_LIMITS} limits (got ${specs.length}): each is named in the limit headers of every answer, which clients stop reading past 16 KiB`,
  };
}
