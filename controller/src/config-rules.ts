/** Rules of the config file's values that more than one schema of it uses (config.ts, agent-network-policy-spec.ts). */
import { z } from "zod";

/** A label key (optional DNS prefix and a name) and a label value. */
export const LABEL_KEY = /^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
export const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$/;

export const intIn = (min: number, max: number) => z.number().int(`must be a whole number from ${min} to ${max}`).min(min).max(max);
export const matching = (re: RegExp, what: string) => z.string().max(253).regex(re, `must be ${what}`);
