// A whole-number setting given as text (a flag, an environment variable): decimal digits only, the rule behind
// core's portSetting. `z.coerce.number()` would take "0x10" as 16, "1e3" as 1000 and " 4 " as 4.
import { z } from "zod";

export interface WholeNumberRule {
  min: number;
  max: number;
  /** The value when the setting is absent. */
  fallback: number;
  /** The refusal, as a phrase after the setting's name ("must be a whole number from 1 to 256"). */
  message: string;
}

/** A whole-number setting's text to its number, within min..max; absent: `fallback`. */
export const wholeNumberSetting = (rule: WholeNumberRule) =>
  z
    .string()
    .regex(/^[0-9]{1,15}$/, rule.message)
    .transform(Number)
    .refine((n) => n >= rule.min && n <= rule.max, rule.message)
    .default(rule.fallback);
